package commands

import (
	"fmt"
	"net/http"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// Codes of the commands layer (docs/COMMANDS.md). The gates' own codes are
// the aggregates' (docs/GATES.md). Never renamed, never reused.
const (
	// CodeInvalidCommand: the envelope or the command's data is malformed
	// (unknown or duplicate field, wrong type, a value outside its shape).
	// HTTP 400; Field is the JSON path from the body ("data.uses").
	CodeInvalidCommand = "invalid_command"
	// CodeUnknownCommand: the command name is not in the catalogue. 400.
	CodeUnknownCommand = "unknown_command"
	// CodeInvalidCommandID: the id is missing, not a UUID or the nil UUID.
	// 400. Every command carries its idempotency key.
	CodeInvalidCommandID = "invalid_command_id"
	// CodeCommandTimeNotAllowed: the command carries "at" but the node runs
	// on the system clock. 400.
	CodeCommandTimeNotAllowed = "command_time_not_allowed"
	// CodeCommandIDReused: the command id was already used by a command
	// with another name, data or correlation id. 409; nothing written.
	CodeCommandIDReused = "command_id_reused"
	// CodeConcurrencyConflict: the streams the command read kept changing
	// under it through every retry. 409; nothing written; re-send it.
	CodeConcurrencyConflict = "concurrency_conflict"
)

// InvalidError is a malformed command: nothing was decided or written.
// Field is the JSON path of the offending value from the body's root
// ("id", "data.acceptance_checks[1].argv").
type InvalidError struct {
	Code    string
	Field   string
	Message string
	// Err is the cause (an *aggregates.InvalidCommandError or
	// *aggregates.UnknownCommandError), when there is one.
	Err error
}

// Error returns "code: message (field)".
func (e *InvalidError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Field)
	}
	return e.Code + ": " + e.Message
}

// ErrorCode returns the stable code.
func (e *InvalidError) ErrorCode() string { return e.Code }

// HTTPStatus returns 400.
func (e *InvalidError) HTTPStatus() int { return http.StatusBadRequest }

// Unwrap returns the cause.
func (e *InvalidError) Unwrap() error { return e.Err }

// RefusedError is a gate's refusal, as recorded in the refusals stream.
// Refusal holds the code, message and details read back from the recorded
// event, so the first answer and every re-sent answer are the same bytes.
type RefusedError struct {
	Refusal aggregates.Refusal
	// Event is the CommandRefused event that records it.
	Event events.Event
	// Duplicate is true when the command had been refused before and this
	// answer is the recorded one.
	Duplicate bool
}

// Error returns "code: message".
func (e *RefusedError) Error() string { return e.Refusal.Error() }

// ErrorCode returns the gate's code.
func (e *RefusedError) ErrorCode() string { return e.Refusal.Code }

// ErrorDetails returns the gate's details.
func (e *RefusedError) ErrorDetails() map[string]any { return e.Refusal.Details }

// HTTPStatus returns 422.
func (e *RefusedError) HTTPStatus() int { return http.StatusUnprocessableEntity }

// Unwrap returns the refusal, so errors.As(err, **aggregates.Refusal) holds.
func (e *RefusedError) Unwrap() error { return &e.Refusal }

// ConflictError is a command that could not be applied for a reason a
// re-send may resolve (concurrency_conflict) or never will
// (command_id_reused). Nothing was written.
type ConflictError struct {
	Code    string
	Message string
	Details map[string]any
}

// Error returns "code: message".
func (e *ConflictError) Error() string { return e.Code + ": " + e.Message }

// ErrorCode returns the stable code.
func (e *ConflictError) ErrorCode() string { return e.Code }

// ErrorDetails returns what conflicted.
func (e *ConflictError) ErrorDetails() map[string]any { return e.Details }

// HTTPStatus returns 409.
func (e *ConflictError) HTTPStatus() int { return http.StatusConflict }
