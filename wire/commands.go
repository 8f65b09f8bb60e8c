package wire

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// The bodies of the commands and projections routes (docs/COMMANDS.md).

// CommandIn is the body of POST /v1/commands.
type CommandIn struct {
	// Command is the catalogue name, e.g. "GrantApproval".
	Command string `json:"command"`
	// ID is the command's UUID: its idempotency key. Re-sending a command
	// with the same id returns the original outcome and appends nothing.
	ID string `json:"id" jsonschema:"format=uuid"`
	// Actor names who the caller acts for. The authenticated principal is
	// always the events' actor; a different Actor is recorded as
	// on_behalf_of.
	Actor string `json:"actor,omitempty"`
	// CorrelationID groups commands in the audit trail (default: the id).
	CorrelationID string `json:"correlation_id,omitempty"`
	// At is the command's time; only a node running on a settable (test or
	// demo) clock accepts it.
	At *time.Time `json:"at,omitempty"`
	// Data is the command's data, decoded strictly.
	Data json.RawMessage `json:"data,omitempty"`
}

// CommandEvent is one event a command appended.
type CommandEvent struct {
	// ID is the event's UUID (derived from the command id, so a re-send
	// proposes the same).
	ID uuid.UUID `json:"id"`
	// Stream is the stream the event was appended to.
	Stream string `json:"stream"`
	// Version is the event's index in its stream, from 0.
	Version uint64 `json:"version"`
	// Position is the event's index in the global log, from 0.
	Position uint64 `json:"position"`
	// Type is the event's type (docs/COMMANDS.md lists each command's).
	Type string `json:"type"`
	// LeafHash is the event's Merkle leaf hash, SHA-256(0x00 || its canonical
	// encoding), base64.
	LeafHash []byte `json:"leaf_hash"`
	// RecordedAt is when the node recorded it (RFC 3339, nanoseconds, UTC).
	RecordedAt time.Time `json:"recorded_at"`
}

// CommandOut is the answer of a command that was not refused (HTTP 200).
// A refusal is an *Error with status 422 and the gate's code and details.
type CommandOut struct {
	// Command is the command's name, as sent.
	Command string `json:"command"`
	// CommandID is the command's id, as sent.
	CommandID string `json:"command_id"`
	// Outcome is "appended" or "unchanged" (the decision appended
	// nothing: an idempotent repeat).
	Outcome string `json:"outcome"`
	// Duplicate is true when the command had been applied before: Events
	// are the original ones and nothing was written now.
	Duplicate bool `json:"duplicate"`
	// Events are the events the command appended, in position order; empty
	// when it changed nothing.
	Events []CommandEvent `json:"events"`
	// Position is the log size that includes the outcome: ask a projection
	// with min_position=Position to read your own write.
	Position uint64 `json:"position"`
	// Head is the log's size when the answer was written.
	Head uint64 `json:"head"`
	// At is the command's time.
	At time.Time `json:"at"`
	// Retries counts the reloads after concurrent changes.
	Retries int `json:"retries,omitempty"`
}

// ProjectionStatus is one projection in GET /v1/projections.
type ProjectionStatus struct {
	// Name is the projection's name (GET /v1/projections/{name}).
	Name string `json:"name"`
	// Description says what the read model holds, in words.
	Description string `json:"description"`
	// Timed says the model's rows depend on the time they are judged at
	// (freshness); ?time=T judges them at T.
	Timed bool `json:"timed"`
	// Position is the log size the model has folded.
	Position uint64 `json:"position"`
	// Committed is the log size the node has committed.
	Committed uint64 `json:"committed"`
	// Head is the log's size on this node.
	Head uint64 `json:"head"`
	// Lag is how many events the model has yet to fold (head minus position).
	Lag uint64 `json:"lag"`
	// Error says why the model stopped folding; empty while it folds.
	Error string `json:"error,omitempty"`
}

// ProjectionsOut is the answer of GET /v1/projections.
type ProjectionsOut struct {
	// Head is the log's size on this node.
	Head uint64 `json:"head"`
	// Projections are the node's projections, sorted by name.
	Projections []ProjectionStatus `json:"projections"`
}
