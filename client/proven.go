package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Proven reads and writes (docs/API.md, "Proven answers"): with ?prove=1,
// a read or an append answers, besides what it always answers, the
// checkpoint it is proven against, the consistency proof from the size the
// client already trusts, and each event's stored bytes with its inclusion
// proof, in one round trip. client/verified checks them; this file only
// carries them.

// ProofQuery is what a client asks a proof for.
type ProofQuery struct {
	// Trusted is the size of the newest checkpoint the client verified
	// (0: none): the consistency proof starts there.
	Trusted uint64
	// WitnessQuorum asks for a checkpoint that at least that many of the
	// node's witnesses cosigned (0: the newest checkpoint, cosigned or
	// not). The node waits for one (up to 10 s) when none covers the
	// answer yet.
	WitnessQuorum int
	// Range asks that an answer whose events are one run of consecutive
	// positions (a page of the global log) be proven by one range proof
	// (Proof.Range) rather than an inclusion proof per event.
	Range bool
}

func (q ProofQuery) values(v url.Values) url.Values {
	if v == nil {
		v = url.Values{}
	}
	v.Set("prove", "1")
	if q.Range {
		v.Set("prove", "range")
	}
	if q.Trusted > 0 {
		v.Set("trusted", strconv.FormatUint(q.Trusted, 10))
	}
	if q.WitnessQuorum > 0 {
		v.Set("witness_quorum", strconv.Itoa(q.WitnessQuorum))
	}
	return v
}

// ProvenRead is a read page with its proof.
type ProvenRead struct {
	wire.ReadOut
	Proof *wire.Proof `json:"proof"`
}

// ProvenEvent is one event read by id, with its proof (the answer is the
// event's JSON with a "proof" field added).
type ProvenEvent struct {
	Event events.Event
	Proof *wire.Proof
}

// ProvenAppend is an append's answer with its proof. The events are
// written even when the proof could not be built (ProofError says why:
// the node could not sign, or no checkpoint cosigned by the witness
// quorum covered them in time).
type ProvenAppend struct {
	wire.AppendOut
	Proof      *wire.Proof `json:"proof"`
	ProofError *wire.Error `json:"proof_error,omitempty"`
}

// ProvenCommand is a command's answer with the proof of the events it
// appended (see ProvenAppend for ProofError).
type ProvenCommand struct {
	wire.CommandOut
	Proof      *wire.Proof `json:"proof"`
	ProofError *wire.Error `json:"proof_error,omitempty"`
}

// ReadStreamProven reads a stream page with its proof.
func (c *Client) ReadStreamProven(ctx context.Context, stream string, o events.ReadOptions, q ProofQuery) (ProvenRead, error) {
	var out ProvenRead
	err := c.Do(ctx, http.MethodGet, "/v1/streams/"+url.PathEscape(stream)+provenQuery(o, q), nil, &out)
	return out, err
}

// ReadAllProven reads a page of the global log with its proof.
func (c *Client) ReadAllProven(ctx context.Context, o events.ReadOptions, q ProofQuery) (ProvenRead, error) {
	var out ProvenRead
	err := c.Do(ctx, http.MethodGet, "/v1/all"+provenQuery(o, q), nil, &out)
	return out, err
}

// EventProven reads one event by id with its proof.
func (c *Client) EventProven(ctx context.Context, id string, q ProofQuery) (ProvenEvent, error) {
	b, err := c.Get(ctx, "/v1/events/"+url.PathEscape(id)+"?"+q.values(nil).Encode())
	if err != nil {
		return ProvenEvent{}, err
	}
	var out ProvenEvent
	var p struct {
		Proof *wire.Proof `json:"proof"`
	}
	if err := json.Unmarshal(b, &out.Event); err != nil {
		return out, fmt.Errorf("GET /v1/events/%s: decode answer: %w", id, err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return out, fmt.Errorf("GET /v1/events/%s: decode answer: %w", id, err)
	}
	out.Proof = p.Proof
	return out, nil
}

// AppendProven appends to one stream and asks for the proof of the events
// written (strings that are not UTF-8 are refused before sending).
func (c *Client) AppendProven(ctx context.Context, stream string, expected events.Expected, evs []wire.EventIn, q ProofQuery) (ProvenAppend, error) {
	var out ProvenAppend
	if err := eventsTextError("events", evs); err != nil {
		return out, err
	}
	body := streamAppendBody(wire.StreamAppendIn{ExpectedVersion: expected, Events: evs}) // client/fastwire.go
	err := c.Do(ctx, http.MethodPost, "/v1/streams/"+url.PathEscape(stream)+"?"+q.values(nil).Encode(), body, &out)
	return out, err
}

// AppendMultiProven is AppendMulti asking for the proof of the events
// written.
func (c *Client) AppendMultiProven(ctx context.Context, in wire.AppendIn, q ProofQuery) (ProvenAppend, error) {
	var out ProvenAppend
	for i := range in.Appends {
		if err := textError(fmt.Sprintf("appends[%d].stream", i), in.Appends[i].Stream); err != nil {
			return out, err
		}
		if err := eventsTextError(fmt.Sprintf("appends[%d].events", i), in.Appends[i].Events); err != nil {
			return out, err
		}
	}
	err := c.Do(ctx, http.MethodPost, "/v1/append?"+q.values(nil).Encode(), in, &out)
	return out, err
}

// CommandProven sends a command and asks for the proof of the events it
// appended.
func (c *Client) CommandProven(ctx context.Context, in wire.CommandIn, q ProofQuery) (ProvenCommand, error) {
	var out ProvenCommand
	if err := commandTextError(&in); err != nil {
		return out, err
	}
	err := c.Do(ctx, http.MethodPost, "/v1/commands?"+q.values(nil).Encode(), in, &out)
	return out, err
}

// CheckpointWitnessed returns the newest checkpoint note that at least
// quorum of the node's witnesses cosigned, with their cosignatures (the
// latest one, with what it has, when none did).
func (c *Client) CheckpointWitnessed(ctx context.Context, quorum int) ([]byte, error) {
	return c.Get(ctx, "/v1/checkpoint?witness_quorum="+strconv.Itoa(quorum))
}

// provenQuery is readQuery with the proof's parameters.
func provenQuery(o events.ReadOptions, q ProofQuery) string {
	v, _ := url.ParseQuery(readQuery(o)[1:])
	return "?" + q.values(v).Encode()
}
