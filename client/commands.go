package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/greffe/greffe/wire"
)

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
func (c *Client) Command(ctx context.Context, in wire.CommandIn) (wire.CommandOut, error) {
	var out wire.CommandOut
	if err := commandTextError(&in); err != nil {
		return out, err
	}
	err := c.Do(ctx, http.MethodPost, "/v1/commands", in, &out)
	return out, err
}

// Projections lists the projections and their lag.
func (c *Client) Projections(ctx context.Context) (wire.ProjectionsOut, error) {
	var out wire.ProjectionsOut
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
