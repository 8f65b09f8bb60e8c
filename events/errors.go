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
	// CodeMalformedJSON: input that DecodeJSON refuses as not JSON, a value
	// of the wrong type, a name given twice, trailing data. Field is the
	// value's path when there is one.
	CodeMalformedJSON = "malformed_json"
	// CodeUnknownField: a name the decoded type does not have (names are
	// case-sensitive). Field is the name's full path.
	CodeUnknownField = "unknown_field"
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
	// ErrNoSigner is returned when a checkpoint is to be signed and the
	// ledger has no key to sign it with: nothing can be proven, backed
	// up or served as the latest checkpoint until one is set. A store
	// wraps it with its own prefix (pebblelog.ErrNoSigner reads
	// "pebblelog: no checkpoint signer configured"), so its text has none.
	ErrNoSigner = errors.New("no checkpoint signer configured")
)

// Kind is which of the four outcomes of a request an error reports
// (docs/STYLE.md, "Keep four outcomes apart"). Below the API an error says
// what happened to the write; only the API turns that into an HTTP status
// (with the code, in one table) and the CLI into an exit code.
type Kind uint8

const (
	// KindRefused: the request breaks a rule (a malformed input, a bound, a
	// gate, a condition that does not hold); nothing was written, and the
	// same request is refused again until it is changed. The zero Kind:
	// nearly every coded error is a refusal.
	KindRefused Kind = iota
	// KindFailed: nothing was written, for a reason of the node's (it does
	// not lead, its store failed, the streams kept changing through every
	// retry); the same request may succeed later, here or on another node.
	KindFailed
	// KindUncertain: the request may have been written. Re-send it with the
	// same event ids (or command id), which the log recognises; never with
	// new ones.
	KindUncertain
	// KindCorrupt: stored data does not verify.
	KindCorrupt
)

// String returns refused, failed, uncertain or corrupt.
func (k Kind) String() string {
	switch k {
	case KindRefused:
		return "refused"
	case KindFailed:
		return "failed"
	case KindUncertain:
		return "uncertain"
	case KindCorrupt:
		return "corrupt"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Error is the one shape of a coded error below the API: a stable code,
// the outcome (Kind), the JSON path of the offending input, a sentence and
// the facts behind it. The log's refusals are *Error values; the coded
// errors of other packages, which callers tell apart by type (a gate's
// refusal is recorded, a malformed command is not), describe themselves
// as one through Coded. Nothing here knows HTTP: the API maps Kind and
// Code to a status in one table.
type Error struct {
	// Code is the stable, snake_case identifier of the error.
	Code string
	// Kind is what happened to the request; the zero Kind is KindRefused.
	Kind Kind
	// Field is the JSON path of the offending input in the body it came
	// in ("events[2].data.name", "appends[0].stream"), when there is one.
	Field string
	// Message says what is wrong and what to fix. It does not repeat
	// Field, and it may improve over time; Code does not change.
	Message string
	// Details are the facts behind the error, as JSON-friendly values
	// (strings, numbers, booleans, slices and maps of them); nil when none.
	Details map[string]any
	// Err is the cause, when there is one (Unwrap returns it).
	Err error
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CodedError returns e itself: an *Error is Coded.
func (e *Error) CodedError() *Error { return e }

// Coded is the small interface through which a coded error of another
// package presents itself in the one shape, *Error. Those errors stay types
// of their own because their callers tell them apart (a gate's refusal is
// recorded in the refusals stream, a malformed command is not, a conflict
// is retried); what every other reader needs of them (the API, the CLI,
// the gRPC surface) is the code, the kind, the field and the details, and
// that is all Coded gives. A new coded error implements one method; no
// reader learns its type.
type Coded interface {
	error
	// CodedError describes the error. The *Error returned is the caller's
	// to keep (a new value, or one the error will not change).
	CodedError() *Error
}

var (
	_ Coded = (*Error)(nil)
	_ Coded = (*ConditionError)(nil)
)

// AsCoded returns the description of the first Coded error in err's
// chain (errors.As order: the outermost), or false when err has none.
func AsCoded(err error) (*Error, bool) {
	var c Coded
	if !errors.As(err, &c) {
		return nil, false
	}
	return c.CodedError(), true
}

// Errorf builds an *Error of the given kind with a formatted message and
// no field path (an operation's, not an input's: a raft operation, an
// exporter's target). The cause, when there is one, ends the message and
// is unwrapped.
func Errorf(code string, kind Kind, cause error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if cause != nil {
		msg += ": " + cause.Error()
	}
	return &Error{Code: code, Kind: kind, Message: msg, Err: cause}
}

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

func (e *ConditionError) Error() string { return CodeWrongExpectedVersion + ": " + e.message() }

// message is the refusal's sentence, without its code (which the API
// sends apart: a message that repeated it was printed twice by the CLI).
func (e *ConditionError) message() string {
	return fmt.Sprintf("stream %q expected %s, actual version %d", e.Stream, e.Expected, e.Actual)
}

// CodedError describes the refusal: wrong_expected_version, with the
// stream, the expected version and the actual one (-1: no stream) in
// Details.
func (e *ConditionError) CodedError() *Error {
	return &Error{Code: CodeWrongExpectedVersion, Kind: KindRefused, Message: e.message(), Err: e,
		Details: map[string]any{"stream": e.Stream, "expected": e.Expected, "actual": e.Actual}}
}

// CodeOf returns the stable code carried by err, or "" when it has none.
func CodeOf(err error) string {
	if c, ok := AsCoded(err); ok {
		return c.Code
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return CodeNotFound
	case errors.Is(err, ErrOutcomeUnknown):
		return CodeOutcomeUnknown
	}
	return ""
}
