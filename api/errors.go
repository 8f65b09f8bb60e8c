package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/strictjson"
)

// Error codes of the HTTP layer (the log's own codes are in events; every
// code is listed in docs/API.md). Never renamed, never reused.
const (
	CodeMalformedJSON    = "malformed_json"
	CodeUnknownField     = "unknown_field"
	CodeBodyTooLarge     = "body_too_large"
	CodeBodyTimeout      = "body_timeout"
	CodeInvalidQuery     = "invalid_query"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeInternal         = "internal"
	CodeUnavailable      = "unavailable"
	CodeCorrupt          = "corrupt"
)

// statusOf maps the log's codes to HTTP statuses.
func statusOf(code string) int {
	switch code {
	case events.CodeWrongExpectedVersion, events.CodeDuplicateEventID:
		return http.StatusConflict
	case events.CodeReservedStream, events.CodeReservedStreamName:
		return http.StatusForbidden
	case events.CodeEventTooLarge, events.CodeAppendTooLarge, events.CodeTooManyEvents, CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case events.CodeNotFound, events.CodeStreamNotFound:
		return http.StatusNotFound
	case events.CodeOutcomeUnknown, events.CodeStoreFailed, CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeCorrupt, CodeInternal:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// toAPIError turns any error into an *Error with a status and a code.
func toAPIError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		if ae.Status == 0 {
			ae.Status = statusOf(ae.Code)
		}
		return ae
	}
	var ce *events.ConditionError
	if errors.As(err, &ce) {
		return &Error{Status: http.StatusConflict, Code: events.CodeWrongExpectedVersion, Message: ce.Error(),
			Details: map[string]any{"stream": ce.Stream, "expected": ce.Expected, "actual": ce.Actual}}
	}
	var ee *events.Error
	if errors.As(err, &ee) {
		return &Error{Status: statusOf(ee.Code), Code: ee.Code, Message: ee.Message, Field: ee.Field}
	}
	var coded interface {
		ErrorCode() string
	}
	if errors.As(err, &coded) {
		ae := &Error{Status: http.StatusUnprocessableEntity, Code: coded.ErrorCode(), Message: err.Error()}
		var detailed interface{ ErrorDetails() map[string]any }
		if errors.As(err, &detailed) {
			ae.Details = detailed.ErrorDetails()
		}
		var status interface{ HTTPStatus() int }
		if errors.As(err, &status) {
			ae.Status = status.HTTPStatus()
		}
		return ae
	}
	switch {
	case errors.Is(err, events.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: events.CodeNotFound, Message: err.Error()}
	case errors.Is(err, events.ErrOutcomeUnknown):
		return &Error{Status: http.StatusServiceUnavailable, Code: events.CodeOutcomeUnknown,
			Message: "the outcome is unknown: " + err.Error() + "; retrying with the same event ids (or command id) is safe"}
	case errors.Is(err, events.ErrCorrupt):
		return &Error{Status: http.StatusInternalServerError, Code: CodeCorrupt, Message: err.Error()}
	case errors.Is(err, events.ErrClosed), errors.Is(err, context.Canceled):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the node is shutting down; retry on another node or later"}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Code: events.CodeOutcomeUnknown, Message: "timed out: " + err.Error()}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}

func writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	writeJSON(w, ae.Status, errorBody{Error: ae})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// maxBodyBytes bounds a request body: one append's 4 MiB of events plus JSON
// and base64 overhead.
const maxBodyBytes = 6 << 20

// decodeBody decodes a JSON body strictly: unknown fields refused, one value
// only, bounded size. Errors are *Error with the JSON path when known.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &Error{Status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedMedia, Message: "send the body as application/json"}
	}
	body := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	return DecodeStrict(body, v)
}

// DecodeStrict decodes one JSON value from rd into v, refusing unknown
// fields, keys in another case than the field's (encoding/json would match
// them), duplicate keys and trailing data. Exported for the CLI, which reads
// the same shapes from files. v is undefined after an error.
func DecodeStrict(rd io.Reader, v any) error {
	body, err := io.ReadAll(rd)
	if err != nil {
		return jsonError(err)
	}
	return decodeStrictBytes(body, v)
}

// decodeStrictBytes is DecodeStrict on a body already read.
//
// A body that is one JSON value whose strings are text is walked by
// strictjson.Check before encoding/json decodes it, so that every problem
// is named by its full path ("appends[0].events[2].actor", with the array
// indices encoding/json drops): unknown fields (encoding/json names the key
// alone), keys in another case and repeated keys (which encoding/json lets
// through), type errors, and values that decode themselves
// (expected_version, with its own code). encoding/json then cannot fail.
// Anything else is refused before: not text, or not JSON.
func decodeStrictBytes(body []byte, v any) error {
	if !events.ValidJSON(body) {
		// JSON is UTF-8 (RFC 8259 §8.1). encoding/json decodes a string
		// that is not text (invalid bytes, an unpaired surrogate escape)
		// to U+FFFD and keeps a RawMessage's bytes as they are, so "p\xff"
		// and "p\xfe" would become one name and data would be stored as no
		// reader shows it: such a body is refused with the path of the
		// first such string, in data too.
		if json.Valid(body) {
			var se *strictjson.Error
			if err := strictjson.CheckText(body, ""); errors.As(err, &se) {
				return &Error{Status: http.StatusBadRequest, Code: events.CodeInvalidUTF8, Field: se.Path, Message: pathMessage(se)}
			}
		}
		return syntaxError(body)
	}
	if err := strictjson.Check(body, reflect.TypeOf(v).Elem(), "", true); err != nil {
		var se *strictjson.Error
		if !errors.As(err, &se) {
			return err
		}
		return strictError(se)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err) // the walk accepts only what decodes: a gap in it
	}
	return nil
}

// syntaxError words why body, which is not one JSON value, is refused:
// encoding/json's syntax error with its offset, an empty body, or what
// follows the first value.
func syntaxError(body []byte) *Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return &Error{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "the body holds more than one JSON value"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "trailing data after the JSON value"}
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "the body is not one JSON value"}
}

// strictError turns the walk's first problem into the API's error, with
// its path.
func strictError(se *strictjson.Error) *Error {
	// A value that decodes itself and refused with a code of the log
	// (expected_version: invalid_expected_version) keeps that code.
	var ee *events.Error
	if errors.As(se, &ee) {
		return &Error{Status: http.StatusBadRequest, Code: ee.Code, Field: se.Path, Message: ee.Message}
	}
	code, hint := CodeMalformedJSON, ""
	switch {
	case strings.HasPrefix(se.Reason, "unknown field"):
		code, hint = CodeUnknownField, " (keys are case-sensitive; check the name against docs/API.md)"
	case se.Reason == "appears twice":
		hint = " (a key appears once)"
	}
	return &Error{Status: http.StatusBadRequest, Code: code, Field: se.Path, Message: pathMessage(se) + hint}
}

// pathMessage words a strictjson error: "path: reason", or the reason
// about "the body" at the root.
func pathMessage(se *strictjson.Error) string {
	if se.Path == "" {
		return "the body " + se.Reason
	}
	return se.Path + ": " + se.Reason
}

func jsonError(err error) *Error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge, Message: fmt.Sprintf("the body exceeds %d bytes; split the append", mbe.Limit)}
	case errors.As(err, &se):
		return &Error{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)}
	case errors.As(err, &te):
		return &Error{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Field: te.Field,
			Message: fmt.Sprintf("field %q must be %s, got %s", te.Field, te.Type, te.Value)}
	case errors.Is(err, io.EOF):
		return &Error{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "the body is empty; send a JSON object"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "the JSON body ends too early"}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for unknown fields.
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &Error{Status: http.StatusBadRequest, Code: CodeUnknownField, Field: f, Message: fmt.Sprintf("unknown field %q; check the field name against docs/API.md", f)}
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: err.Error()}
}
