package verified

import (
	"context"
	"errors"
	"fmt"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
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

// ReadStream reads a stream page, proven: its versions follow each other
// from o.From (forward) or down to it (backward), and where the page
// claims the stream's end (a forward page without Next, a backward page
// that starts below o.From, an empty page) the claim is proven by reading
// what follows the page's newest event up to the checkpoint's size
// (omission.go). A node's not_found (no such stream) is proven the same
// way before it is returned. An omission is an *OmissionError; an end that
// would take more than Config.MaxStreamEndScan events to prove, an
// *UnprovenEndError.
func (v *Client) ReadStream(ctx context.Context, stream string, o events.ReadOptions) (wire.ReadOut, error) {
	var ref uint64
	for try := 0; ; try++ {
		res, cp, absent, err := v.readStreamOnce(ctx, stream, o)
		if err != nil {
			return wire.ReadOut{}, fmt.Errorf("stream %s: %w", stream, err)
		}
		if try == 0 {
			ref = cp.Size
		}
		if absent != nil {
			// "No such stream": the stream said empty, proven as such.
			err = v.proveEnd(ctx, stream, -1, 0, ref, wire.ReadOut{Events: []events.Event{}})
		} else {
			err = v.streamComplete(ctx, stream, o, res, ref)
		}
		if isOmission(err) && try == 0 {
			continue // read again: the node may have raced itself (omission.go)
		}
		if err != nil {
			return wire.ReadOut{}, fmt.Errorf("stream %s: %w", stream, err)
		}
		if absent != nil {
			return wire.ReadOut{}, absent // the node's not_found, proven
		}
		return res, nil
	}
}

// readStreamOnce is one proven stream read, checked but for completeness.
// A node's not_found ("no such stream") is returned as absent, with the
// checkpoint of a proven read of the global log to prove it against.
func (v *Client) readStreamOnce(ctx context.Context, stream string, o events.ReadOptions) (_ wire.ReadOut, _ events.Checkpoint, absent, err error) {
	q, sent := v.query()
	out, err := v.c.ReadStreamProven(ctx, stream, o, q)
	if client.CodeOf(err) == events.CodeNotFound {
		_, cp, cerr := v.readAllOnce(ctx, events.ReadOptions{Limit: 1})
		return wire.ReadOut{}, cp, err, cerr
	}
	if err != nil {
		return wire.ReadOut{}, events.Checkpoint{}, nil, err
	}
	res, cp, err := v.page(ctx, sent, out, func(e events.Event) uint64 { return e.Version }, o)
	if err != nil {
		return wire.ReadOut{}, cp, nil, err
	}
	for _, e := range res.Events {
		if e.Stream != stream {
			return wire.ReadOut{}, cp, nil, &audit.ProofError{Kind: audit.KindProofInvalid,
				Detail: fmt.Sprintf("the event at position %d is of stream %s", e.Position, e.Stream)}
		}
	}
	return res, cp, nil, nil
}

// ReadAll reads a page of the global log, proven: its positions follow
// each other from o.From, and it holds every event its checkpoint proves
// exists in the range asked (omission.go), else an *OmissionError. A
// forward page that ends below the checkpoint's size has a Next, even
// when the node gave none.
func (v *Client) ReadAll(ctx context.Context, o events.ReadOptions) (wire.ReadOut, error) {
	res, cp, err := v.readAllOnce(ctx, o)
	if err != nil {
		return wire.ReadOut{}, fmt.Errorf("global log: %w", err)
	}
	ref := cp.Size
	err = globalComplete(res, o, ref)
	if isOmission(err) { // read again: the node may have raced itself (omission.go)
		if res, cp, err = v.readAllOnce(ctx, o); err == nil {
			err = globalComplete(res, o, ref)
		}
	}
	if err != nil {
		return wire.ReadOut{}, fmt.Errorf("global log: %w", err)
	}
	if o.Direction != events.Backward && res.Next == nil {
		if end := o.From + uint64(len(res.Events)); end < cp.Size {
			res.Next = &end // the checkpoint proves events from end on
		}
	}
	return res, nil
}

// readAllOnce is one proven read of the global log, checked but for
// completeness.
func (v *Client) readAllOnce(ctx context.Context, o events.ReadOptions) (wire.ReadOut, events.Checkpoint, error) {
	q, sent := v.query()
	out, err := v.c.ReadAllProven(ctx, o, q)
	if err != nil {
		return wire.ReadOut{}, events.Checkpoint{}, err
	}
	return v.page(ctx, sent, out, func(e events.Event) uint64 { return e.Position }, o)
}

func isOmission(err error) bool {
	var oe *OmissionError
	return errors.As(err, &oe)
}

// streamComplete checks what a stream page claims of the stream's end
// against the checkpoint of size ref (omission.go); its versions already
// follow each other (step).
func (v *Client) streamComplete(ctx context.Context, stream string, o events.ReadOptions, page wire.ReadOut, ref uint64) error {
	evs, k, lim := page.Events, uint64(len(page.Events)), uint64(o.EffectiveLimit())
	if o.Direction != events.Backward {
		if k == 0 {
			switch {
			case page.Next != nil:
				return &OmissionError{Stream: stream, From: o.From, To: o.From + 1, Position: -1, Checkpoint: ref} // "more follows", and nothing
			case o.From == 0:
				return v.proveEnd(ctx, stream, -1, 0, ref, page) // the stream said empty
			}
			// Versions from o.From said absent: any version at or above it
			// the node shows, proven, is one it left out; else its newest
			// must be proven the newest.
			newest, cp, absent, err := v.readStreamOnce(ctx, stream, events.ReadOptions{From: events.FromEnd, Direction: events.Backward, Limit: 1})
			switch {
			case err != nil:
				return err
			case absent != nil || len(newest.Events) == 0:
				return v.proveEnd(ctx, stream, -1, 0, ref, page)
			}
			e := newest.Events[0]
			if e.Version >= o.From {
				return &OmissionError{Stream: stream, From: o.From, To: e.Version + 1, Position: int64(e.Position), Checkpoint: cp.Size}
			}
			return v.proveEnd(ctx, stream, int64(e.Position), e.Version+1, ref, page)
		}
		last := evs[k-1]
		if page.Next != nil {
			if *page.Next != last.Version+1 {
				return nextError(page.Next, last.Version+1, ref, stream)
			}
			return nil // a page that says where it goes on claims no end
		}
		return v.proveEnd(ctx, stream, int64(last.Position), last.Version+1, ref, page)
	}
	if k == 0 {
		if page.Next != nil {
			return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: "an empty backward page says where it goes on"}
		}
		return v.proveEnd(ctx, stream, -1, 0, ref, page) // no version at or below o.From: the stream said empty
	}
	first, last := evs[0], evs[k-1]
	if first.Version > o.From {
		return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("a backward page from version %d starts at version %d", o.From, first.Version)}
	}
	if err := backwardTail(page, k, first.Version, last.Version, lim, ref, stream); err != nil {
		return err
	}
	if first.Version < o.From {
		return v.proveEnd(ctx, stream, int64(first.Position), first.Version+1, ref, page) // first said the newest
	}
	return nil
}

// proveEnd proves that no event of stream lies after position after (-1:
// none) in the checkpoint of size ref, by reading the global log there,
// proven and complete; version is the version the next event of the
// stream would have. At most v.maxScan events are read: beyond, an
// *UnprovenEndError carrying page.
func (v *Client) proveEnd(ctx context.Context, stream string, after int64, version, ref uint64, page wire.ReadOut) error {
	start := uint64(after + 1)
	if start >= ref {
		return nil // the page's newest is the checkpoint's last event
	}
	if ref-start > uint64(v.maxScan) {
		return &UnprovenEndError{Stream: stream, After: after, Checkpoint: ref, Bound: v.maxScan, Page: page}
	}
	for pos := start; pos < ref; {
		out, err := v.ReadAll(ctx, events.ReadOptions{From: pos, Limit: int(min(ref-pos, events.MaxReadLimit))})
		if err != nil {
			return fmt.Errorf("proving the end of stream %s: %w", stream, err)
		}
		if len(out.Events) == 0 { // ReadAll refuses it below its checkpoint, at least ref
			return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("no event at position %d, below the checkpoint of size %d", pos, ref)}
		}
		for _, e := range out.Events {
			if e.Stream != stream || e.Position >= ref {
				continue
			}
			if e.Version < version {
				return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("version %d of stream %s is at position %d, after the page's version %d at position %d", e.Version, stream, e.Position, version-1, after)}
			}
			return &OmissionError{Stream: stream, From: version, To: e.Version + 1, Position: int64(e.Position), Checkpoint: ref}
		}
		pos += uint64(len(out.Events))
	}
	return nil
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

// page checks a proven page and returns it with the proven events and the
// checkpoint they are proven against. seq is the page's order (versions or
// positions), which must step by one; what the page leaves out is checked
// by its caller (omission.go).
func (v *Client) page(ctx context.Context, sent *audit.State, out client.ProvenRead, seq func(events.Event) uint64, o events.ReadOptions) (wire.ReadOut, events.Checkpoint, error) {
	cp, err := v.accept(ctx, sent, out.Proof)
	if err != nil {
		return wire.ReadOut{}, cp, err
	}
	want := make([]uint64, len(out.Events))
	for i, e := range out.Events {
		want[i] = e.Position
	}
	evs, err := proven(cp, out.Proof, want)
	if err != nil {
		return wire.ReadOut{}, cp, err
	}
	for i := range evs {
		if err := same(out.Events[i], evs[i]); err != nil {
			return wire.ReadOut{}, cp, err
		}
		if err := step(evs, i, seq, o); err != nil {
			return wire.ReadOut{}, cp, err
		}
	}
	return wire.ReadOut{Events: evs, Next: out.Next}, cp, nil
}

// step checks that the i-th event follows the one before it (or, for the
// first of a forward page, starts where the page was asked from): a node
// that leaves an event out of the middle of a page is caught here, one
// that leaves out its start (backward) or its end by globalComplete and
// streamComplete.
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
