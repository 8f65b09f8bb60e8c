package wire

import (
	"fmt"
	"time"

	"github.com/greffe/greffe/events"
)

// Error is an API error: a status, a stable code, a sentence saying what to
// fix, and optionally the JSON path of the bad field and details.
type Error struct {
	Status int `json:"-"`
	// Code is the stable error code: never renamed, never reused.
	Code string `json:"code"`
	// Message says what is wrong and what to fix, in words; its text may
	// change, match on code.
	Message string `json:"message"`
	// Field is the JSON path of the offending field (e.g.
	// "data.acceptance_checks[2].argv"); empty when no one field is at fault.
	Field string `json:"field,omitempty"`
	// Details are the facts behind the error, by name (a gate's details,
	// next_due, …).
	Details map[string]any `json:"details,omitempty"`
	// RetryAfter is the wait the node asked for in a Retry-After header
	// (a 429 for a capped resource: docs/API.md); zero when none.
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// CodedError describes the node's answer as any coded error (events.Coded):
// its code, field and details, of kind failed for a 5xx, uncertain for
// outcome_unknown, refused otherwise (a 4xx is the request's fault).
func (e *Error) CodedError() *events.Error {
	k := events.KindRefused
	switch {
	case e.Code == events.CodeOutcomeUnknown:
		k = events.KindUncertain
	case e.Status >= 500:
		k = events.KindFailed
	}
	return &events.Error{Code: e.Code, Kind: k, Field: e.Field, Message: e.Message, Details: e.Details, Err: e}
}

// ErrorBody is the JSON envelope of every error response.
type ErrorBody struct {
	// Error is the error.
	Error *Error `json:"error"`
}

// Error codes of the HTTP layer (the log's own codes are in events, the
// commands' in commands and aggregates, the projections' in projections;
// every code is listed in docs/API.md). Never renamed, never reused.
const (
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
	// CodeTooManySubscriptions: the caller holds as many SSE
	// subscriptions as one principal may, or the node serves as many as
	// it may (details.scope "principal" or "total", details.limit); 429
	// with Retry-After (Config.MaxSubscriptionsPerPrincipal,
	// MaxSubscriptions).
	CodeTooManySubscriptions = "too_many_subscriptions"
	// CodeTooManyProvenReads: the caller has as many proven reads being
	// answered as one principal may, or the node as many as it may
	// (details.scope, details.limit); 429 with Retry-After
	// (Config.MaxProvenReadsPerPrincipal, MaxProvenReads).
	CodeTooManyProvenReads = "too_many_proven_reads"
	// CodeHostNotAllowed: a node without tokens answers only requests
	// addressed to a loopback name, and this one's Host is not one (DNS
	// rebinding); 403 (api/browser.go).
	CodeHostNotAllowed = "host_not_allowed"
	// CodeOriginNotAllowed: a node without tokens answers only its own
	// web pages, and this request came from a page of another origin; 403
	// (api/browser.go).
	CodeOriginNotAllowed = "origin_not_allowed"
	// CodeSignatureInvalid refuses an append whose envelope does not verify;
	// details.reason is unknown_key, revoked_key or bad_signature, and
	// details.key_id the signer. Never renamed, never reused.
	CodeSignatureInvalid = "signature_invalid"
	// CodeCheckpointNotWitnessed: no checkpoint covering the answer was
	// cosigned by the witness quorum asked for within maxWitnessWait (503,
	// Retry-After). Stable.
	CodeCheckpointNotWitnessed = "checkpoint_not_witnessed"
)

// Error codes of GET /v1/backup.
const (
	// CodeBackupInProgress: another backup of this node is being streamed;
	// retry when it is done. Never renamed, never reused.
	CodeBackupInProgress = "backup_in_progress"
	// CodeBackupKeysAdminOnly: the node's private keys were asked for
	// (?include_keys=true) by a role other than admin: only an admin takes
	// them; an operator's backup holds the verifier keys. Never renamed,
	// never reused.
	CodeBackupKeysAdminOnly = "backup_keys_admin_only"
)
