package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/wire"
)

// statusKey is a row of statuses: a code for one kind, a code for every
// kind (anyKind), or a kind for the codes without a row of their own (no
// code).
type statusKey struct {
	code string
	kind events.Kind
}

// anyKind marks a row that holds for its code whatever the error's kind.
const anyKind events.Kind = 255

// statuses is the one table that turns an error into an HTTP status
// (statusOf): the row of its code and kind, else of its code, else of its
// kind. Below the API errors carry a kind (events.Kind) and a code, never
// a status; this table and the sentinels of toAPIError are the only place
// a status is chosen. TestStatuses_Docs holds it to docs/API.md's tables.
// Never written after it is built.
var statuses = map[statusKey]int{
	// Each kind, for a code without a row of its own. A refusal is a 422:
	// a rule refused a well-formed request; every gate code of
	// docs/GATES.md is one. Malformed input and the refusals that are not
	// gates' have their rows below.
	{kind: events.KindRefused}:   http.StatusUnprocessableEntity,
	{kind: events.KindFailed}:    http.StatusServiceUnavailable,
	{kind: events.KindUncertain}: http.StatusServiceUnavailable,
	{kind: events.KindCorrupt}:   http.StatusInternalServerError,

	// 400: the request is malformed; fix it.
	{events.CodeInvalidStreamName, anyKind}:       http.StatusBadRequest,
	{events.CodeInvalidEventType, anyKind}:        http.StatusBadRequest,
	{events.CodeInvalidEventID, anyKind}:          http.StatusBadRequest,
	{events.CodeReservedEventID, anyKind}:         http.StatusBadRequest,
	{events.CodeInvalidField, anyKind}:            http.StatusBadRequest,
	{events.CodeDataNotObject, anyKind}:           http.StatusBadRequest,
	{events.CodeMetadataNotObject, anyKind}:       http.StatusBadRequest,
	{events.CodeInvalidSignature, anyKind}:        http.StatusBadRequest,
	{events.CodeEmptyAppend, anyKind}:             http.StatusBadRequest,
	{events.CodeDuplicateStream, anyKind}:         http.StatusBadRequest,
	{events.CodeInvalidUTF8, anyKind}:             http.StatusBadRequest,
	{events.CodeInvalidExpectedVersion, anyKind}:  http.StatusBadRequest,
	{events.CodeMalformedJSON, anyKind}:           http.StatusBadRequest,
	{events.CodeUnknownField, anyKind}:            http.StatusBadRequest,
	{wire.CodeInvalidQuery, anyKind}:              http.StatusBadRequest,
	{commands.CodeInvalidCommand, anyKind}:        http.StatusBadRequest,
	{commands.CodeUnknownCommand, anyKind}:        http.StatusBadRequest,
	{commands.CodeInvalidCommandID, anyKind}:      http.StatusBadRequest,
	{commands.CodeCommandTimeNotAllowed, anyKind}: http.StatusBadRequest,
	{projections.CodePositionBeyondHead, anyKind}: http.StatusBadRequest,
	// 401, 403, 404, 405, 408, 413, 415.
	{wire.CodeUnauthorized, anyKind}:        http.StatusUnauthorized,
	{wire.CodeForbidden, anyKind}:           http.StatusForbidden,
	{wire.CodeBackupKeysAdminOnly, anyKind}: http.StatusForbidden,
	// A gate's refusal like any (recorded), but of authority: the
	// principal's role may not send the command (issue #20).
	{aggregates.CodeRoleNotAllowed, anyKind}:     http.StatusForbidden,
	{events.CodeReservedStream, anyKind}:         http.StatusForbidden,
	{events.CodeReservedStreamName, anyKind}:     http.StatusForbidden,
	{events.CodeNotFound, anyKind}:               http.StatusNotFound,
	{events.CodeStreamNotFound, anyKind}:         http.StatusNotFound,
	{projections.CodeUnknownProjection, anyKind}: http.StatusNotFound,
	{wire.CodeUnknownNode, anyKind}:              http.StatusNotFound,
	{wire.CodeMethodNotAllowed, anyKind}:         http.StatusMethodNotAllowed,
	{wire.CodeBodyTimeout, anyKind}:              http.StatusRequestTimeout,
	{events.CodeEventTooLarge, anyKind}:          http.StatusRequestEntityTooLarge,
	{events.CodeTooManyEvents, anyKind}:          http.StatusRequestEntityTooLarge,
	{events.CodeAppendTooLarge, anyKind}:         http.StatusRequestEntityTooLarge,
	{wire.CodeBodyTooLarge, anyKind}:             http.StatusRequestEntityTooLarge,
	{wire.CodeUnsupportedMedia, anyKind}:         http.StatusUnsupportedMediaType,
	{wire.CodeHostNotAllowed, anyKind}:           http.StatusForbidden,
	{wire.CodeOriginNotAllowed, anyKind}:         http.StatusForbidden,
	// 429: the caller holds as much of a capped resource as it may.
	{wire.CodeTooManySubscriptions, anyKind}: http.StatusTooManyRequests,
	{wire.CodeTooManyProvenReads, anyKind}:   http.StatusTooManyRequests,
	// 409: the request conflicts with the state (refused), or lost a
	// race it may win when re-sent (failed).
	{events.CodeWrongExpectedVersion, anyKind}:       http.StatusConflict,
	{events.CodeDuplicateEventID, anyKind}:           http.StatusConflict,
	{commands.CodeCommandIDReused, anyKind}:          http.StatusConflict,
	{commands.CodeConcurrencyConflict, anyKind}:      http.StatusConflict,
	{wire.CodeLedgerMismatch, anyKind}:               http.StatusConflict,
	{wire.CodeMemberConflict, anyKind}:               http.StatusConflict,
	{wire.CodeReplicationFailed, events.KindRefused}: http.StatusConflict,
	{wire.CodeNotClustered, anyKind}:                 http.StatusConflict,
	{wire.CodeBackupInProgress, anyKind}:             http.StatusConflict,
	// 422: a gate (the kind's row), or a signature that does not verify.
	{wire.CodeSignatureInvalid, anyKind}: http.StatusUnprocessableEntity,
	// 500 and 503: the node's side.
	{wire.CodeInternal, anyKind}:                 http.StatusInternalServerError,
	{wire.CodeCorrupt, anyKind}:                  http.StatusInternalServerError,
	{projections.CodeProjectionFailed, anyKind}:  http.StatusInternalServerError,
	{events.CodeOutcomeUnknown, anyKind}:         http.StatusServiceUnavailable,
	{projections.CodeProjectionLagging, anyKind}: http.StatusServiceUnavailable,
	{wire.CodeNotLeader, anyKind}:                http.StatusServiceUnavailable,
	{wire.CodeLeaderUnreachable, anyKind}:        http.StatusServiceUnavailable,
	{wire.CodeLeaderChanged, anyKind}:            http.StatusServiceUnavailable,
	{events.CodeStoreFailed, anyKind}:            http.StatusServiceUnavailable,
	{wire.CodeUnavailable, anyKind}:              http.StatusServiceUnavailable,
	{wire.CodeCheckpointNotWitnessed, anyKind}:   http.StatusServiceUnavailable,
}

// statusOf returns the HTTP status of an error of kind k and code code.
func statusOf(k events.Kind, code string) int {
	if s, ok := statuses[statusKey{code, k}]; ok {
		return s
	}
	if s, ok := statuses[statusKey{code, anyKind}]; ok {
		return s
	}
	if s, ok := statuses[statusKey{kind: k}]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// toAPIError turns any error into an *Error with a status and a code: the
// API's own errors (and a leader's answers relayed as they came) as they
// are; every coded error (events.Coded) by its code, kind, field and
// details; the log's sentinels by what they mean.
func toAPIError(err error) *wire.Error {
	var ae *wire.Error
	if errors.As(err, &ae) {
		if ae.Status == 0 {
			ae.Status = statusOf(events.KindRefused, ae.Code)
		}
		return ae
	}
	if d, ok := events.AsCoded(err); ok {
		return &wire.Error{Status: statusOf(d.Kind, d.Code), Code: d.Code, Message: d.Message, Field: d.Field, Details: d.Details}
	}
	sentinel := func(code string, k events.Kind, msg string) *wire.Error {
		return &wire.Error{Status: statusOf(k, code), Code: code, Message: msg}
	}
	switch {
	case errors.Is(err, events.ErrNotFound):
		return sentinel(events.CodeNotFound, events.KindRefused, err.Error())
	case errors.Is(err, events.ErrOutcomeUnknown):
		return sentinel(events.CodeOutcomeUnknown, events.KindUncertain,
			"the outcome is unknown: "+err.Error()+"; retrying with the same event ids (or command id) is safe")
	case errors.Is(err, events.ErrCorrupt):
		return sentinel(wire.CodeCorrupt, events.KindCorrupt, err.Error())
	case errors.Is(err, events.ErrClosed), errors.Is(err, context.Canceled):
		return sentinel(wire.CodeUnavailable, events.KindFailed, "the node is shutting down; retry on another node or later")
	case errors.Is(err, context.DeadlineExceeded):
		return sentinel(events.CodeOutcomeUnknown, events.KindUncertain, "timed out: "+err.Error())
	}
	return sentinel(wire.CodeInternal, events.KindFailed, err.Error())
}

func writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	writeJSON(w, ae.Status, wire.ErrorBody{Error: ae})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if a, ok := v.(jsonAppender); ok {
		_, _ = w.Write(append(a.AppendJSON(nil), '\n'))
		return
	}
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// jsonAppender is an answer that writes its own JSON: one that carries
// stored events, whose data and metadata go out as stored
// (events.Event.AppendJSON), which encoding/json would compact and
// HTML-escape ("a<b" served as "a\u003cb").
type jsonAppender interface {
	AppendJSON(b []byte) []byte
}

// marshalAnswer is json.Marshal, but an answer that writes its own JSON
// (jsonAppender) writes it.
func marshalAnswer(v any) ([]byte, error) {
	if a, ok := v.(jsonAppender); ok {
		return a.AppendJSON(nil), nil
	}
	return json.Marshal(v)
}

// maxBodyBytes bounds a request body: one append's 4 MiB of events plus JSON
// and base64 overhead.
const maxBodyBytes = 6 << 20

// decodeBody decodes a JSON body strictly (DecodeStrict), after checking
// its Content-Type, with its size bounded.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if err := checkContentType(r); err != nil {
		return err
	}
	return DecodeStrict(http.MaxBytesReader(w, r.Body, maxBodyBytes), v)
}

// checkContentType refuses a body that is not declared application/json
// (parameters such as charset allowed), a missing Content-Type too, with
// or without tokens. Every POST of the API takes a JSON body and decodes
// it here (decodeBody, decodeStreamAppend). Beyond naming the format, it
// is what keeps web pages of other origins out: a page can POST
// cross-origin without a CORS preflight only as text/plain, a form
// encoding, or with no type at all (a form, fetch with mode no-cors,
// navigator.sendBeacon), and a preflight for application/json is never
// granted (the node sends no CORS headers). Without tokens that POST would
// be an admin's (issue #20); with tokens a page cannot attach the bearer
// token anyway, so there it is defence in depth, and free.
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" {
		return nil // what clients send: no parse (it allocates) on the append path
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		msg := fmt.Sprintf("Content-Type %q: send the body as application/json", ct)
		if ct == "" {
			msg = "no Content-Type: send the body as application/json (Content-Type: application/json; curl --json does)"
		}
		return &wire.Error{Code: wire.CodeUnsupportedMedia, Field: "Content-Type", Message: msg}
	}
	return nil
}

// DecodeStrict decodes one JSON value from rd into v with events.DecodeJSON,
// the one strict decoder: unknown names, names in another case than the
// field's, names given twice, strings that are not UTF-8 text and trailing
// data are refused, each with its full path. Exported for the CLI, which
// reads the same shapes from files. v is undefined after an error.
func DecodeStrict(rd io.Reader, v any) error {
	body, err := io.ReadAll(rd)
	if err != nil {
		return readError(err)
	}
	return decodeBytes(body, v)
}

// decodeBytes is DecodeStrict on a body already read. Its errors are the
// decoder's *events.Error, with the path at the head of the sentence.
func decodeBytes(body []byte, v any) error {
	err := events.DecodeJSON(body, v, events.DecodeOptions{})
	var ee *events.Error
	if err == nil || !errors.As(err, &ee) {
		return err
	}
	e := *ee
	if e.Field == "" {
		e.Message = "the body " + e.Message
	} else {
		e.Message = e.Field + ": " + e.Message
	}
	return &e
}

// readError words why a body could not be read: over the limit, the
// body's own refusal (body_timeout), or the connection lost.
func readError(err error) error {
	var mbe *http.MaxBytesError
	var ae *wire.Error
	switch {
	case errors.As(err, &mbe):
		return &wire.Error{Code: wire.CodeBodyTooLarge, Message: fmt.Sprintf("the body exceeds %d bytes; split the append", mbe.Limit)}
	case errors.As(err, &ae):
		return ae
	}
	return &wire.Error{Code: events.CodeMalformedJSON, Message: "the body could not be read: " + err.Error()}
}
