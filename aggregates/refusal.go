package aggregates

import (
	"fmt"
	"sort"
	"strings"
)

// Refusal is a gate's answer when a command would break a rule: nothing is
// written (the commands layer records the attempt in the refusals stream).
// Code is stable and machine-readable; Message says what is wrong and what
// to do; Details carries the facts the gate looked at, as JSON-friendly
// values (strings, numbers, booleans, slices and maps of them).
//
// A Refusal is immutable once returned and safe to share.
type Refusal struct {
	// Code is the snake_case code of the gate, one of the Code… constants.
	// Codes are never renamed or reused.
	Code string
	// Message is a sentence for a person; it may improve over time.
	Message string
	// Details are the values the gate compared, keyed by snake_case names.
	Details map[string]any
}

// Error returns "code: message".
func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// ErrorCode returns the stable code. The API maps any error with an
// ErrorCode method to a 422 response carrying the code.
func (r *Refusal) ErrorCode() string { return r.Code }

// refuse builds a Refusal. details may be nil.
func refuse(code string, details map[string]any, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...), Details: details}
}

// InvalidCommandError reports a malformed command: JSON that does not decode
// strictly, or a value outside its declared shape. It is an HTTP 400, not a
// gate refusal, and deliberately has no ErrorCode method.
type InvalidCommandError struct {
	// Command is the command name.
	Command string
	// Path is the JSON path of the offending field from the command body,
	// e.g. "data.acceptance_checks[2].argv".
	Path string
	// Reason says what is wrong with it.
	Reason string
	// Code, when set, is a more precise code than the commands layer's
	// invalid_command: events.CodeInvalidUTF8 for a string that is not
	// text.
	Code string
}

// Error returns "invalid <command> command: <path>: <reason>".
func (e *InvalidCommandError) Error() string {
	return fmt.Sprintf("invalid %s command: %s: %s", e.Command, e.Path, e.Reason)
}

// invalid builds an *InvalidCommandError for the field at path (relative to
// data, without the "data." prefix); the catalogue fills in Command.
func invalid(path, format string, args ...any) *InvalidCommandError {
	p := "data"
	if path != "" {
		if strings.HasPrefix(path, "[") {
			p += path
		} else {
			p += "." + path
		}
	}
	return &InvalidCommandError{Path: p, Reason: fmt.Sprintf(format, args...)}
}

// UnknownCommandError is returned by DecodeCommand for a name that is not in
// the catalogue (an HTTP 400).
type UnknownCommandError struct {
	Name string
}

// Error names the command and lists the known ones.
func (e *UnknownCommandError) Error() string {
	return fmt.Sprintf("unknown command %q; known commands are %s", e.Name, strings.Join(CommandNames(), ", "))
}

// sortedKeys returns the keys of m in order, for deterministic details.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
