package verified

import (
	"context"
	"fmt"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
)

// Event reads one event by id, proven.
func (v *Client) Event(ctx context.Context, id string) (events.Event, error) {
	q, sent := v.query()
	out, err := v.c.EventProven(ctx, id, q)
	if err != nil {
		return events.Event{}, err
	}
	cp, err := v.accept(ctx, sent, out.Proof)
	if err != nil {
		return events.Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	evs, err := proven(cp, out.Proof, []uint64{out.Event.Position})
	if err != nil {
		return events.Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	if err := same(out.Event, evs[0]); err != nil {
		return events.Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	if evs[0].ID.String() != id {
		return events.Event{}, fmt.Errorf("event %s: %w", id, &audit.ProofError{Kind: audit.KindProofInvalid,
			Detail: fmt.Sprintf("the node answered with the event at position %d, whose id is %s", evs[0].Position, evs[0].ID)})
	}
	return evs[0], nil
}

// ReadStream reads a stream page, proven; its versions must follow each
// other from o.From (forward) or down to it (backward).
func (v *Client) ReadStream(ctx context.Context, stream string, o events.ReadOptions) (client.ReadOut, error) {
	q, sent := v.query()
	out, err := v.c.ReadStreamProven(ctx, stream, o, q)
	if err != nil {
		return client.ReadOut{}, err
	}
	res, err := v.page(ctx, sent, out, func(e events.Event) uint64 { return e.Version }, o)
	if err != nil {
		return client.ReadOut{}, fmt.Errorf("stream %s: %w", stream, err)
	}
	for _, e := range res.Events {
		if e.Stream != stream {
			return client.ReadOut{}, fmt.Errorf("stream %s: %w", stream, &audit.ProofError{Kind: audit.KindProofInvalid,
				Detail: fmt.Sprintf("the event at position %d is of stream %s", e.Position, e.Stream)})
		}
	}
	return res, nil
}

// ReadAll reads a page of the global log, proven; its positions must follow
// each other from o.From.
func (v *Client) ReadAll(ctx context.Context, o events.ReadOptions) (client.ReadOut, error) {
	q, sent := v.query()
	out, err := v.c.ReadAllProven(ctx, o, q)
	if err != nil {
		return client.ReadOut{}, err
	}
	res, err := v.page(ctx, sent, out, func(e events.Event) uint64 { return e.Position }, o)
	if err != nil {
		return client.ReadOut{}, fmt.Errorf("global log: %w", err)
	}
	return res, nil
}

// ProvingEvent reads, proven, the event a projection cites (an approval's,
// a mission's or a measurement's "event"), by its position, and checks it
// is the one cited: a projection is derived and served by the node, the
// event it cites is in the ledger everyone sees.
func (v *Client) ProvingEvent(ctx context.Context, ref aggregates.EventRef) (events.Event, error) {
	out, err := v.ReadAll(ctx, events.ReadOptions{From: ref.Position, Limit: 1})
	if err != nil {
		return events.Event{}, fmt.Errorf("the event cited at position %d: %w", ref.Position, err)
	}
	if len(out.Events) != 1 {
		return events.Event{}, fmt.Errorf("the event cited at position %d: %w", ref.Position, &audit.ProofError{Kind: audit.KindProofInvalid,
			Detail: fmt.Sprintf("the node holds no event at position %d", ref.Position)})
	}
	e := out.Events[0]
	if e.ID != ref.ID || e.Stream != ref.Stream || e.Version != ref.Version || e.Type != ref.Type {
		return events.Event{}, &audit.ProofError{Kind: audit.KindProofInvalid,
			Detail: fmt.Sprintf("the projection cites %s %s@%d (id %s) at position %d; the ledger holds %s %s@%d (id %s) there",
				ref.Type, ref.Stream, ref.Version, ref.ID, ref.Position, e.Type, e.Stream, e.Version, e.ID)}
	}
	return e, nil
}

// page checks a proven page and returns it with the proven events. seq is
// the page's order (versions or positions), which must step by one.
func (v *Client) page(ctx context.Context, sent *audit.State, out client.ProvenRead, seq func(events.Event) uint64, o events.ReadOptions) (client.ReadOut, error) {
	cp, err := v.accept(ctx, sent, out.Proof)
	if err != nil {
		return client.ReadOut{}, err
	}
	want := make([]uint64, len(out.Events))
	for i, e := range out.Events {
		want[i] = e.Position
	}
	evs, err := proven(cp, out.Proof, want)
	if err != nil {
		return client.ReadOut{}, err
	}
	for i := range evs {
		if err := same(out.Events[i], evs[i]); err != nil {
			return client.ReadOut{}, err
		}
		if err := step(evs, i, seq, o); err != nil {
			return client.ReadOut{}, err
		}
	}
	return client.ReadOut{Events: evs, Next: out.Next}, nil
}

// step checks that the i-th event follows the one before it (or, for the
// first, starts where the page was asked from): a node that leaves an
// event out of a page is caught here.
func step(evs []events.Event, i int, seq func(events.Event) uint64, o events.ReadOptions) error {
	back := o.Direction == events.Backward
	got := seq(evs[i])
	var want uint64
	switch {
	case i == 0 && back:
		return nil // a backward page starts at the last event at or below From
	case i == 0:
		want = o.From
	case back:
		want = seq(evs[i-1]) - 1
	default:
		want = seq(evs[i-1]) + 1
	}
	if got != want {
		return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the page holds %d at place %d, where %d follows: an event is missing or out of place (position %d)", got, i, want, evs[i].Position)}
	}
	return nil
}
