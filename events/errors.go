package events

import (
	"errors"
	"fmt"
)

// Error codes of the log. They are part of the public contract (docs/API.md):
// never renamed, never reused. The sentence that comes with them may improve.
const (
	CodeWrongExpectedVersion = "wrong_expected_version"
	CodeDuplicateEventID     = "duplicate_event_id"
	CodeReservedStream       = "reserved_stream"
	CodeInvalidStreamName    = "invalid_stream_name"
	CodeInvalidEventType     = "invalid_event_type"
	CodeInvalidEventID       = "invalid_event_id"
	CodeInvalidField         = "invalid_field"
	CodeDataNotObject        = "data_not_object"
	CodeMetadataNotObject    = "metadata_not_object"
	CodeEventTooLarge        = "event_too_large"
	CodeTooManyEvents        = "too_many_events"
	CodeAppendTooLarge       = "append_too_large"
	CodeEmptyAppend          = "empty_append"
	CodeDuplicateStream      = "duplicate_stream"
	CodeInvalidSignature     = "invalid_envelope"
	CodeNotFound             = "not_found"
	CodeStreamNotFound       = "stream_not_found"
	CodeStoreFailed          = "store_failed"
	CodeOutcomeUnknown       = "outcome_unknown"
	// CodeInvalidUTF8: a string (a name, a type, a text field, or any key
	// or string value inside data or metadata) is not Unicode text: bytes
	// that are not UTF-8, or an unpaired UTF-16 surrogate escape such as
	// "\ud800" (see ValidJSON for why both are refused). Whatever the field,
	// this code wins over the field's own, so a client can tell "fix the
	// encoding" from "fix the value".
	CodeInvalidUTF8 = "invalid_utf8"
	// CodeInvalidExpectedVersion: an append's expected version is none of
	// the values Expected.UnmarshalJSON accepts.
	CodeInvalidExpectedVersion = "invalid_expected_version"
	// CodeReservedEventID: a raw append carries an event id of the space
	// commands derive theirs from (IsReservedEventID).
	CodeReservedEventID = "reserved_event_id"
	// CodeReservedStreamName: a raw append names a stream starting with "$"
	// (IsSystemStream).
	CodeReservedStreamName = "reserved_stream_name"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrNotFound is returned when an event, stream or checkpoint does not exist.
	ErrNotFound = errors.New("events: not found")
	// ErrClosed is returned by a Log after Close.
	ErrClosed = errors.New("events: log closed")
	// ErrCorrupt marks stored data that does not verify (a decode failure of a
	// stored event, a hash that does not recompute). It is never returned for
	// bad input.
	ErrCorrupt = errors.New("events: corrupt data")
	// ErrOutcomeUnknown means an append may or may not have been written
	// (leadership lost mid-commit, a failed fsync). Retrying with the same
	// event ids is safe: the log answers with the original positions.
	ErrOutcomeUnknown = errors.New("events: outcome unknown")
)

// Error is a refusal of the log with a stable code. Nothing was written.
type Error struct {
	// Code is the stable, snake_case identifier of the refusal.
	Code string
	// Message says what is wrong and what to fix.
	Message string
	// Field is the JSON path of the offending input, when there is one.
	Field string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// ErrorCode returns the stable code, so that callers outside this package can
// map any coded error without knowing its type.
func (e *Error) ErrorCode() string { return e.Code }

// Refusef builds an *Error for field with a formatted message.
func Refusef(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ConditionError is returned when an append's expected version does not hold.
// Nothing of the append was written.
type ConditionError struct {
	Stream   string
	Expected Expected
	// Actual is the stream's current version, or -1 when it has no event.
	Actual int64
}

func (e *ConditionError) Error() string {
	return fmt.Sprintf("%s: stream %q expected %s, actual version %d",
		CodeWrongExpectedVersion, e.Stream, e.Expected, e.Actual)
}

// ErrorCode returns wrong_expected_version.
func (e *ConditionError) ErrorCode() string { return CodeWrongExpectedVersion }

// CodeOf returns the stable code carried by err, or "" when it has none.
func CodeOf(err error) string {
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return CodeNotFound
	case errors.Is(err, ErrOutcomeUnknown):
		return CodeOutcomeUnknown
	}
	return ""
}
