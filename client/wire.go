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
	// Build is what the node's binary is (greffe version); nil from a
	// node before it was reported.
	Build *VersionOut `json:"build,omitempty"`
}

// VersionOut is what a greffe binary is: `greffe version --json`, and
// "build" in GET /v1/info (docs/OPERATIONS.md, "Install").
type VersionOut struct {
	// Version is the release (stamped with -ldflags at a release build,
	// or the module version of `go install …@vX`), else the source's
	// version with "-dev".
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, "" when
	// unknown (built outside a checkout, or with -buildvcs=false);
	// Modified says the work tree had uncommitted changes.
	Commit     string    `json:"commit,omitempty"`
	CommitTime time.Time `json:"commit_time,omitzero"`
	Modified   bool      `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// APIVersion is the HTTP API's version: the /v1 of its routes.
	APIVersion string `json:"api_version"`
	// StoreFormat is the store format the binary writes; StoreFormatsRead
	// those it opens (newest first; older ones are upgraded in place on
	// open, after which older binaries refuse the folder).
	StoreFormat      string   `json:"store_format"`
	StoreFormatsRead []string `json:"store_formats_read"`
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

// StreamsOut is a page of GET /v1/streams: streams in name order, and Next,
// the after of the next page, when the page was full ("" at the end).
type StreamsOut struct {
	Streams []events.StreamInfo `json:"streams"`
	Next    string              `json:"next,omitempty"`
}
