package aggregates

import (
	"fmt"
	"sort"
	"strings"

	"github.com/greffe/greffe/events"
)

// The errors of this package are of three types, which the commands layer
// tells apart: a *Refusal is a gate's answer, recorded in the refusals
// stream; an *InvalidCommandError or an *UnknownCommandError is a malformed
// command, never recorded. They stay types of their own for that reason,
// and each implements events.Coded (CodedError), which is all any other
// reader needs: the code, the kind (always events.KindRefused: nothing
// was written), the field and the details. This package imports events
// only; the HTTP status of each kind and code is the API's business.

// The codes of a malformed command. The commands layer declares them too
// (commands.CodeInvalidCommand, CodeUnknownCommand) and docs/API.md lists
// them; they are not gate codes (a malformed command is never recorded),
// so they are not Code… constants here, which docs/GATES.md lists.
const (
	invalidCommandCode = "invalid_command"
	unknownCommandCode = "unknown_command"
)

var (
	_ events.Coded = (*Refusal)(nil)
	_ events.Coded = (*InvalidCommandError)(nil)
	_ events.Coded = (*UnknownCommandError)(nil)
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

// CodedError describes the refusal: its code and details, of kind
// events.KindRefused.
func (r *Refusal) CodedError() *events.Error {
	return &events.Error{Code: r.Code, Kind: events.KindRefused, Message: r.Message, Details: r.Details, Err: r}
}

// refuse builds a Refusal. details may be nil.
func refuse(code string, details map[string]any, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...), Details: details}
}

// InvalidCommandError reports a malformed command: JSON that does not decode
// strictly, or a value outside its declared shape. It is not a gate
// refusal: nothing is recorded.
type InvalidCommandError struct {
	// Command is the command name.
	Command string
	// Path is the JSON path of the offending field from the command body,
	// e.g. "data.acceptance_checks[2].argv".
	Path string
	// Reason says what is wrong with it.
	Reason string
	// Code, when set, is a more precise code than invalid_command:
	// events.CodeInvalidUTF8 for a string that is not text.
	Code string
}

// CodedError describes the error: invalid_command (or Code) at Path.
func (e *InvalidCommandError) CodedError() *events.Error {
	code := e.Code
	if code == "" {
		code = invalidCommandCode
	}
	return &events.Error{Code: code, Kind: events.KindRefused, Field: e.Path, Message: e.Reason, Err: e}
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
// the catalogue.
type UnknownCommandError struct {
	Name string
}

// Error names the command and lists the known ones.
func (e *UnknownCommandError) Error() string {
	return fmt.Sprintf("unknown command %q; known commands are %s", e.Name, strings.Join(CommandNames(), ", "))
}

// CodedError describes the error: unknown_command, at the field "command".
func (e *UnknownCommandError) CodedError() *events.Error {
	return &events.Error{Code: unknownCommandCode, Kind: events.KindRefused, Field: "command", Message: e.Error(), Err: e}
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
