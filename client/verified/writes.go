package verified

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Append appends to one stream and returns once the events written are
// proven included in a checkpoint the client trusts (cosigned by the
// witness quorum when one is required). The events are written when the
// proof fails: the error then says so, and names them.
func (v *Client) Append(ctx context.Context, stream string, expected events.Expected, evs []wire.EventIn) (wire.AppendOut, error) {
	q, sent := v.query()
	out, err := v.c.AppendProven(ctx, stream, expected, evs, q)
	if err != nil {
		return wire.AppendOut{}, err
	}
	in := []wire.StreamAppendIn{{Stream: stream, Events: evs}}
	return out.AppendOut, v.written(ctx, sent, out.Proof, out.ProofError, appended(out.AppendOut), in)
}

// AppendMulti is Append for an atomic append to several streams.
func (v *Client) AppendMulti(ctx context.Context, in wire.AppendIn) (wire.AppendOut, error) {
	q, sent := v.query()
	out, err := v.c.AppendMultiProven(ctx, in, q)
	if err != nil {
		return wire.AppendOut{}, err
	}
	return out.AppendOut, v.written(ctx, sent, out.Proof, out.ProofError, appended(out.AppendOut), in.Appends)
}

// Command sends a command and returns once the events it appended (or, for
// a command applied before, the original events) are proven included.
func (v *Client) Command(ctx context.Context, in wire.CommandIn) (wire.CommandOut, error) {
	q, sent := v.query()
	out, err := v.c.CommandProven(ctx, in, q)
	if err != nil {
		return wire.CommandOut{}, err
	}
	names := make([]named, len(out.Events))
	for i, e := range out.Events {
		names[i] = named{ID: e.ID, Stream: e.Stream, Version: e.Version, Position: e.Position, Type: e.Type, LeafHash: e.LeafHash}
	}
	return out.CommandOut, v.written(ctx, sent, out.Proof, out.ProofError, names, nil)
}

// named is a written event as the answer names it.
type named struct {
	ID       uuid.UUID
	Stream   string
	Version  uint64
	Position uint64
	Type     string // "" when the answer does not carry it (appends)
	LeafHash []byte
}

func appended(o wire.AppendOut) []named {
	out := make([]named, len(o.Events))
	for i, e := range o.Events {
		out[i] = named{ID: e.ID, Stream: e.Stream, Version: e.Version, Position: e.Position, LeafHash: e.LeafHash}
	}
	return out
}

// written checks the proof of written events. When the node answered
// without one (proof_error: it could not sign, or its witnesses did not
// cosign in time), it asks for it by reading the events back, proven,
// until ctx ends. sentIn, when given, is what was sent, which the proven
// events must carry (type, data, and the ids the caller chose).
func (v *Client) written(ctx context.Context, sent *audit.State, p *wire.Proof, perr *wire.Error, ns []named, sentIn []wire.StreamAppendIn) error {
	if len(ns) == 0 {
		return nil
	}
	var evs []events.Event
	if perr == nil {
		cp, err := v.accept(ctx, sent, p)
		if err != nil {
			return writtenError(ns, err)
		}
		pos := make([]uint64, len(ns))
		for i, n := range ns {
			pos[i] = n.Position
		}
		if evs, err = proven(cp, p, pos); err != nil {
			return writtenError(ns, err)
		}
	} else {
		var err error
		if evs, err = v.readBack(ctx, ns); err != nil {
			return writtenError(ns, fmt.Errorf("%w (the node's answer had no proof: %s: %s)", err, perr.Code, perr.Message))
		}
	}
	for i, n := range ns {
		e := evs[i]
		if e.ID != n.ID || e.Stream != n.Stream || e.Version != n.Version || (n.Type != "" && e.Type != n.Type) || (len(n.LeafHash) > 0 && !bytes.Equal(n.LeafHash, e.LeafHash[:])) {
			return writtenError(ns, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the event answered at position %d (%s@%d, id %s) is not the one proven there (%s@%d, id %s)", n.Position, n.Stream, n.Version, n.ID, e.Stream, e.Version, e.ID)})
		}
	}
	return checkSent(evs, sentIn)
}

// readBack reads the written events back from the global log, proven.
// An append's or a command's events are one batch: consecutive positions.
func (v *Client) readBack(ctx context.Context, ns []named) ([]events.Event, error) {
	first := ns[0].Position
	for i, n := range ns {
		if n.Position != first+uint64(i) {
			return nil, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the answer's events are not consecutive (position %d after %d)", n.Position, first+uint64(i)-1)}
		}
	}
	out, err := v.ReadAll(ctx, events.ReadOptions{From: first, Limit: len(ns)})
	if err != nil {
		return nil, err
	}
	if len(out.Events) != len(ns) {
		return nil, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the node holds %d of the %d events answered from position %d", len(out.Events), len(ns), first)}
	}
	return out.Events, nil
}

// checkSent checks that the proven events carry what was sent: the same
// streams, in order, each event's type and data (and id, when the caller
// chose it). A duplicate append answers the original events, which carry
// the same content (the node refuses a reused id with other content).
func checkSent(evs []events.Event, in []wire.StreamAppendIn) error {
	if in == nil {
		return nil
	}
	i := 0
	for _, a := range in {
		for _, s := range a.Events {
			if i >= len(evs) {
				return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the node answered %d event(s) for more sent", len(evs))}
			}
			e := evs[i]
			i++
			if e.Stream != a.Stream || e.Type != s.Type || (s.ID != "" && e.ID.String() != s.ID) || !sameJSON(e.Data, s.Data) {
				return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the event proven at position %d (%s %s, id %s) is not the one sent (%s %s)", e.Position, e.Stream, e.Type, e.ID, a.Stream, s.Type)}
			}
		}
	}
	return nil
}

// sameJSON compares data as sent with data as stored: the node stores an
// event's data as sent, whitespace aside.
func sameJSON(stored, sent []byte) bool {
	if len(sent) == 0 {
		return len(stored) == 0 || bytes.Equal(stored, []byte("{}")) || bytes.Equal(stored, []byte("null"))
	}
	var a, b bytes.Buffer
	if json.Compact(&a, stored) != nil || json.Compact(&b, sent) != nil {
		return false
	}
	return bytes.Equal(a.Bytes(), b.Bytes())
}

// writtenError says that the events were written but not proven.
func writtenError(ns []named, err error) error {
	return fmt.Errorf("%d event(s) written at positions %d to %d, not proven: %w", len(ns), ns[0].Position, ns[len(ns)-1].Position, err)
}
