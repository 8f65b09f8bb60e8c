package commands

import (
	"fmt"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// Codes of the commands layer (docs/COMMANDS.md). The gates' own codes are
// the aggregates' (docs/GATES.md). Never renamed, never reused.
const (
	// CodeInvalidCommand: the envelope or the command's data is malformed
	// (unknown or duplicate field, wrong type, a value outside its shape).
	// Field is the JSON path from the body ("data.uses"). The aggregates'
	// *InvalidCommandError carries it for the data.
	CodeInvalidCommand = "invalid_command"
	// CodeUnknownCommand: the command name is not in the catalogue
	// (aggregates' *UnknownCommandError).
	CodeUnknownCommand = "unknown_command"
	// CodeInvalidCommandID: the id is missing, not a UUID or the nil UUID.
	// Every command carries its idempotency key.
	CodeInvalidCommandID = "invalid_command_id"
	// CodeCommandTimeNotAllowed: the command carries "at" but the node runs
	// on the system clock.
	CodeCommandTimeNotAllowed = "command_time_not_allowed"
	// CodeCommandIDReused: the command id was already used by a command
	// with another name, data or correlation id; nothing written. A
	// refusal (events.KindRefused): sending it again is refused again.
	CodeCommandIDReused = "command_id_reused"
	// CodeConcurrencyConflict: the streams the command read kept changing
	// under it through every retry; nothing written. A failure
	// (events.KindFailed): re-send it.
	CodeConcurrencyConflict = "concurrency_conflict"
)

// The errors of Handle, by what the caller does with them:
//
//   - a malformed command: the aggregates' *InvalidCommandError (its data)
//     or *UnknownCommandError, or an *events.Error of this package's codes
//     (its envelope: the id, the actor, the time); nothing decided or
//     written, nothing recorded;
//   - a gate's refusal: *RefusedError, recorded in the refusals stream;
//   - command_id_reused and concurrency_conflict: an *events.Error with its
//     details;
//   - the log's errors, as they are (events.ErrOutcomeUnknown: re-send the
//     same command).
//
// Every one of them is events.Coded but the log's sentinels; none knows
// HTTP, which is the API's (api/errors.go maps kinds and codes to
// statuses in one table).

// RefusedError is a gate's refusal, as recorded in the refusals stream.
// Refusal holds the code, message and details read back from the recorded
// event, so the first answer and every re-sent answer are the same bytes.
// It is a type of its own, not an *events.Error, because it carries the
// recorded event (its position is the one a client reads its own write
// at).
type RefusedError struct {
	Refusal aggregates.Refusal
	// Event is the CommandRefused event that records it.
	Event events.Event
	// Duplicate is true when the command had been refused before and this
	// answer is the recorded one.
	Duplicate bool
}

var _ events.Coded = (*RefusedError)(nil)

// Error returns "code: message".
func (e *RefusedError) Error() string { return e.Refusal.Error() }

// CodedError describes the refusal: the gate's code and details, of kind
// events.KindRefused.
func (e *RefusedError) CodedError() *events.Error {
	d := e.Refusal.CodedError()
	d.Err = e
	return d
}

// Unwrap returns the refusal, so errors.As(err, **aggregates.Refusal) holds.
func (e *RefusedError) Unwrap() error { return &e.Refusal }

// invalid is a malformed envelope field of a command.
func invalid(code, field, format string, args ...any) *events.Error {
	return &events.Error{Code: code, Kind: events.KindRefused, Field: field, Message: fmt.Sprintf(format, args...)}
}
