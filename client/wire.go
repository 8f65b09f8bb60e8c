package client

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// The JSON bodies of greffe's HTTP API (docs/API.md), shared by the server
// (package api) and its clients.

// Error is an API error: a status, a stable code, a sentence saying what to
// fix, and optionally the JSON path of the bad field and details.
type Error struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Field   string         `json:"field,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

// EventIn is one event of an append request body.
type EventIn struct {
	// ID is the idempotency key (a UUID); the node generates one if empty.
	ID            string          `json:"id,omitempty"`
	Type          string          `json:"type"`
	Data          json.RawMessage `json:"data,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	CausationID   string          `json:"causation_id,omitempty"`
	// Envelope carries DSSE signatures over Data (sig in base64).
	Envelope *events.Envelope `json:"envelope,omitempty"`
}

// StreamAppendIn is the body of POST /v1/streams/{stream} and one entry of
// POST /v1/append.
type StreamAppendIn struct {
	Stream          string          `json:"stream,omitempty"`
	ExpectedVersion events.Expected `json:"expected_version"`
	Events          []EventIn       `json:"events"`
}

// AppendIn is the body of POST /v1/append.
type AppendIn struct {
	Appends []StreamAppendIn `json:"appends"`
}

// AppendedEvent is one stored event in an append response.
type AppendedEvent struct {
	ID         uuid.UUID `json:"id"`
	Stream     string    `json:"stream"`
	Version    uint64    `json:"version"`
	Position   uint64    `json:"position"`
	LeafHash   []byte    `json:"leaf_hash"`
	RecordedAt time.Time `json:"recorded_at"`
}

// AppendOut is the response of both append routes.
type AppendOut struct {
	Events []AppendedEvent `json:"events"`
	// Duplicate is true when every event was already in the log with the
	// same content: nothing was written and Events are the originals.
	Duplicate bool `json:"duplicate"`
}

// ReadOut is the response of the read routes. Next, when set, is the From
// of the next page in the same direction.
type ReadOut struct {
	Events []events.Event `json:"events"`
	Next   *uint64        `json:"next,omitempty"`
}

// InfoOut is the response of GET /v1/info.
type InfoOut struct {
	LedgerID     string   `json:"ledger_id"`
	Origin       string   `json:"origin"`
	NodeID       string   `json:"node_id,omitempty"`
	Version      string   `json:"version,omitempty"`
	VerifierKeys []string `json:"verifier_keys"`
	Head         HeadOut  `json:"head"`
}

// HeadOut is the acknowledged head.
type HeadOut struct {
	Size       uint64    `json:"size"`
	Root       string    `json:"root"`
	RecordedAt time.Time `json:"recorded_at,omitzero"`
}

// InclusionOut is an RFC 6962 inclusion proof: Hashes in RFC order, base64.
type InclusionOut struct {
	Position uint64   `json:"position"`
	Size     uint64   `json:"size"`
	LeafHash []byte   `json:"leaf_hash"`
	Root     []byte   `json:"root"`
	Hashes   [][]byte `json:"hashes"`
}

// ConsistencyOut is an RFC 6962 consistency proof between two sizes. From
// the empty tree it is the empty proof, and RootFrom is SHA-256("").
type ConsistencyOut struct {
	From     uint64   `json:"from"`
	To       uint64   `json:"to"`
	RootFrom []byte   `json:"root_from"`
	RootTo   []byte   `json:"root_to"`
	Hashes   [][]byte `json:"hashes"`
}

// ErrorBody is the JSON envelope of every error response.
type ErrorBody struct {
	Error *Error `json:"error"`
}
