package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
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

// ProjectionQuery selects what GET /v1/projections/{name} renders.
type ProjectionQuery struct {
	// At, when set, renders the projection as of that log position,
	// replayed from position 0.
	At *uint64
	// Time judges timed projections (readiness, approvals) at that time;
	// zero means the node's clock.
	Time time.Time
	// Key keeps one row (a provider, a mission, a correlation id).
	Key string
	// MinPosition waits (bounded) until the projection has folded that many
	// events: read your own writes with a command's Position.
	MinPosition uint64
}

func (q ProjectionQuery) values() url.Values {
	v := url.Values{}
	if q.At != nil {
		v.Set("at", strconv.FormatUint(*q.At, 10))
	}
	if !q.Time.IsZero() {
		v.Set("time", q.Time.UTC().Format(time.RFC3339Nano))
	}
	if q.Key != "" {
		v.Set("key", q.Key)
	}
	if q.MinPosition > 0 {
		v.Set("min_position", strconv.FormatUint(q.MinPosition, 10))
	}
	return v
}

// Command sends a command. A refusal is an *Error (422) with the gate's
// code; a malformed command an *Error (400) with the JSON path in Field
// (strings that are not UTF-8 are refused before sending: client/text.go).
func (c *Client) Command(ctx context.Context, in CommandIn) (CommandOut, error) {
	var out CommandOut
	if err := commandTextError(&in); err != nil {
		return out, err
	}
	err := c.Do(ctx, http.MethodPost, "/v1/commands", in, &out)
	return out, err
}

// Projections lists the projections and their lag.
func (c *Client) Projections(ctx context.Context) (ProjectionsOut, error) {
	var out ProjectionsOut
	err := c.Do(ctx, http.MethodGet, "/v1/projections", nil, &out)
	return out, err
}

// Projection returns the rendered projection name, byte for byte as the
// node rendered it (the unit verify compares).
func (c *Client) Projection(ctx context.Context, name string, q ProjectionQuery) ([]byte, error) {
	p := "/v1/projections/" + url.PathEscape(name)
	if v := q.values(); len(v) > 0 {
		p += "?" + v.Encode()
	}
	return c.Get(ctx, p)
}

// Policy returns the node's policy (budgets, freshness windows, screens).
func (c *Client) Policy(ctx context.Context) (json.RawMessage, error) {
	return c.Get(ctx, "/v1/policy")
}
