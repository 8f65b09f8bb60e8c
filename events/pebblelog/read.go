package pebblelog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// ReadAll reads acknowledged events in global order. Forward reads start at
// o.From; backward reads start at o.From (or the last event for FromEnd) and
// go down. An empty page is not an error. With o.MaxBytes the page stops
// before the event that would take its stored bytes above it (it keeps
// the events nearest o.From, in either direction).
func (s *Store) ReadAll(ctx context.Context, o events.ReadOptions) (_ []events.Event, err error) {
	defer s.noteDamage(&err)
	size := s.Head().Size
	limit := uint64(o.EffectiveLimit())
	var lo, hi uint64
	if o.Direction == events.Forward {
		if o.From >= size {
			return nil, nil
		}
		lo, hi = o.From, min(size, o.From+limit)
	} else {
		if size == 0 {
			return nil, nil
		}
		top := min(o.From, size-1)
		hi = top + 1
		lo = hi - min(hi, limit)
		if o.MaxBytes > 0 {
			// The page keeps the top of [lo, hi): find how far down its
			// bytes reach before decoding anything.
			if lo, err = s.bytesBelow(ctx, lo, hi, o.MaxBytes); err != nil {
				return nil, err
			}
		}
	}
	maxBytes := o.MaxBytes
	if o.Direction == events.Backward {
		maxBytes = 0 // bytesBelow cut the range already
	}
	evs, _, err := s.readRangeMatching(ctx, lo, hi, true, nil, maxBytes)
	if err != nil {
		return nil, err
	}
	if o.Direction == events.Backward {
		for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
			evs[i], evs[j] = evs[j], evs[i]
		}
	}
	return evs, nil
}

// bytesBelow returns the lowest position p of [lo, hi) such that the
// events [p, hi) take at most maxBytes stored bytes (hi-1 when the top
// event alone is larger: a page holds at least one). It reads the values'
// lengths only, not their bytes (Pebble's lazy values).
func (s *Store) bytesBelow(ctx context.Context, lo, hi uint64, maxBytes int) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if lo >= hi {
		return lo, nil
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: layout.EventKey(lo), UpperBound: layout.EventKey(hi)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	total, low := 0, hi
	for ok := it.Last(); ok; ok = it.Prev() {
		pos := binary.BigEndian.Uint64(it.Key()[1:])
		if pos != low-1 {
			return 0, fmt.Errorf("position %d missing (found %d): %w", low-1, pos, events.ErrCorrupt)
		}
		lv := it.LazyValue()
		if total += lv.Len(); total > maxBytes && low < hi {
			return low, it.Error()
		}
		low = pos
	}
	if err := it.Error(); err != nil {
		return 0, err
	}
	if low != lo {
		return 0, fmt.Errorf("position %d missing: %w", lo, events.ErrCorrupt)
	}
	return lo, nil
}

// readRangeMatching decodes the events [lo, hi) that f matches (nil: all)
// in position order, judged on their stored bytes before anything is
// copied or decoded: a subscription to a few streams reads past the rest
// for the price of an iterator step. All event bytes of the page share one
// allocation. maxBytes > 0 bounds the page's stored bytes (of the events
// it keeps): it stops before the event that would take them above
// maxBytes, keeping at least one. end is where the next read of the range
// starts: hi, or the position of the first event left out.
func (s *Store) readRangeMatching(ctx context.Context, lo, hi uint64, hash bool, f *events.Filter, maxBytes int) (_ []events.Event, end uint64, _ error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: layout.EventKey(lo), UpperBound: layout.EventKey(hi)})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	n := hi - lo
	if f != nil {
		n = min(n, 64) // most of a filtered page is skipped
	}
	out := make([]events.Event, 0, n)
	// Arenas hold the page's bytes (events alias them). The first is small
	// and each next one twice the last, so a subscription woken for a few
	// events does not pay for a large buffer; with maxBytes, never more
	// than the bytes the page may still take, so that the page's arenas
	// stay within about maxBytes (doubling alone allocates up to four
	// times what it keeps).
	var arena []byte
	kept := 0    // stored bytes of the events kept
	cut := false // stopped by maxBytes
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		pos := binary.BigEndian.Uint64(it.Key()[1:])
		if pos != want {
			return nil, 0, fmt.Errorf("position %d missing (found %d): %w", want, pos, events.ErrCorrupt)
		}
		if maxBytes > 0 && len(out) > 0 {
			lv := it.LazyValue()
			if kept+lv.Len() > maxBytes {
				cut = true // the page is full in bytes; it resumes at want
				break
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, 0, err
		}
		if f != nil && !f.MatchRaw(v) {
			want++
			continue
		}
		kept += len(v)
		if cap(arena)-len(arena) < len(v) {
			grow := max(2*cap(arena), 4<<10)
			if maxBytes > 0 {
				grow = min(grow, maxBytes-kept)
			}
			arena = make([]byte, 0, max(len(v), grow))
		}
		start := len(arena)
		arena = append(arena, v...)
		raw := arena[start:len(arena):len(arena)]
		ev, err := events.DecodeShared(raw) // the arena is never written again
		if err != nil {
			return nil, 0, fmt.Errorf("position %d: %w", pos, err)
		}
		if ev.Position != pos {
			return nil, 0, fmt.Errorf("key position %d holds event of position %d: %w", pos, ev.Position, events.ErrCorrupt)
		}
		out = append(out, ev)
		want++
	}
	if err := it.Error(); err != nil {
		return nil, 0, err
	}
	if want != hi && !cut {
		return nil, 0, fmt.Errorf("position %d missing: %w", want, events.ErrCorrupt)
	}
	if hash && len(out) > 0 {
		// Leaf hashes come from the stored tiles (one read per 256 events)
		// rather than from hashing every event again.
		r := s.treeReader(s.Head().Size)
		leaves, err := r.leaves(lo, want)
		if err != nil {
			return nil, 0, err
		}
		for i := range out {
			out[i].LeafHash = [32]byte(leaves[out[i].Position-lo])
		}
	}
	return out, want, nil
}

// ReadRaw returns the stored bytes of events [lo, hi), which must be
// acknowledged. The tlog-tiles entry bundles and offline verification use
// it: the bytes are exactly what is hashed.
func (s *Store) ReadRaw(ctx context.Context, lo, hi uint64) ([][]byte, error) {
	out := make([][]byte, 0, hi-min(lo, hi))
	err := s.ScanRaw(ctx, lo, hi, func(_ uint64, b []byte) error {
		out = append(out, bytes.Clone(b))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScanRaw calls fn with the stored bytes of each event of [lo, hi), in
// order; the range must be acknowledged. b is valid only during fn (it is
// Pebble's memory): copy what must outlive it. It holds a read lock and an
// iterator while it runs: keep fn short (no I/O), and the range bounded — the
// API's streaming read copies a few thousand events at a time into its
// buffer, then writes them to the network outside it.
func (s *Store) ScanRaw(ctx context.Context, lo, hi uint64, fn func(pos uint64, b []byte) error) (err error) {
	defer s.noteDamage(&err)
	if hi > s.Head().Size || lo > hi {
		return fmt.Errorf("raw range [%d, %d) beyond head %d: %w", lo, hi, s.Head().Size, events.ErrNotFound)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: layout.EventKey(lo), UpperBound: layout.EventKey(hi)})
	if err != nil {
		return err
	}
	defer it.Close()
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		if pos := binary.BigEndian.Uint64(it.Key()[1:]); pos != want {
			return fmt.Errorf("position %d missing: %w", want, events.ErrCorrupt)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := fn(want, v); err != nil {
			return err
		}
		want++
	}
	if err := it.Error(); err != nil {
		return err
	}
	if want != hi {
		return fmt.Errorf("position %d missing: %w", want, events.ErrCorrupt)
	}
	return nil
}

// ReadStream reads a stream's acknowledged events by version. A stream with
// no acknowledged event returns events.ErrNotFound.
func (s *Store) ReadStream(ctx context.Context, stream string, o events.ReadOptions) (_ []events.Event, err error) {
	defer s.noteDamage(&err)
	if err := events.ValidateStreamName("stream", stream); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	size := s.Head().Size
	limit := o.EffectiveLimit()
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	lo, hi := layout.StreamBounds(stream)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	// Each key is a run: versions [first, first+n) at positions [pos, pos+n)
	// (layout). A run is written by one batch, so it is acknowledged whole
	// or not at all; positions at or past size are skipped all the same.
	run := func() (first, pos, n uint64, err error) {
		pos, n, ok := layout.ParseStreamRun(it.Value())
		if !ok || len(it.Key()) != len(lo)+8 {
			return 0, 0, 0, fmt.Errorf("stream index of %q: entry %x -> %x: %w", stream, it.Key(), it.Value(), events.ErrCorrupt)
		}
		return binary.BigEndian.Uint64(it.Key()[len(lo):]), pos, n, nil
	}
	type indexed struct{ version, pos uint64 }
	var found []indexed
	var exists bool
	// collect takes version first+i of a run, and says whether to go on.
	collect := func(first, pos, i uint64) bool {
		if pos+i >= size {
			return true // not acknowledged yet: skip
		}
		exists = true
		found = append(found, indexed{first + i, pos + i})
		return len(found) < limit
	}
	if o.Direction == events.Forward {
		// Start at the run holding o.From, or the first run after it.
		ok := it.SeekLT(layout.StreamKey(stream, o.From))
		if ok {
			first, _, n, err := run()
			if err != nil {
				return nil, err
			}
			if first+n <= o.From {
				ok = it.Next()
			}
		} else {
			ok = it.First()
		}
	forward:
		for ; ok; ok = it.Next() {
			first, pos, n, err := run()
			if err != nil {
				return nil, err
			}
			for i := o.From - min(o.From, first); i < n; i++ {
				if !collect(first, pos, i) {
					break forward
				}
			}
		}
	} else {
		var ok bool
		if o.From == events.FromEnd {
			ok = it.Last()
		} else {
			ok = it.SeekLT(layout.StreamKey(stream, o.From+1))
		}
	backward:
		for ; ok; ok = it.Prev() {
			first, pos, n, err := run()
			if err != nil {
				return nil, err
			}
			end := n // the run's versions first+[0, end), read last to first
			if o.From != events.FromEnd {
				end = min(end, o.From-first+1)
			}
			for i := end; i > 0; i-- {
				if !collect(first, pos, i-1) {
					break backward
				}
			}
		}
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if !exists {
		// Distinguish "no such stream" from "past the end of a stream".
		if !it.First() || binary.BigEndian.Uint64(it.Value()) >= size {
			return nil, fmt.Errorf("stream %q: %w", stream, events.ErrNotFound)
		}
		return nil, nil
	}
	out := make([]events.Event, 0, len(found))
	kept := 0 // stored bytes of out, for o.MaxBytes
	for _, f := range found {
		raw, err := s.rawAtLocked(f.pos)
		if err != nil {
			return nil, err
		}
		if kept += len(raw); o.MaxBytes > 0 && kept > o.MaxBytes && len(out) > 0 {
			break // full in bytes: the next page starts at this version
		}
		ev, err := decodeAt(f.pos, raw)
		if err != nil {
			return nil, err
		}
		if ev.Stream != stream || ev.Version != f.version {
			return nil, fmt.Errorf("stream index of %q maps version %d to position %d, which holds version %d of stream %q: %w",
				stream, f.version, f.pos, ev.Version, ev.Stream, events.ErrCorrupt)
		}
		out = append(out, ev)
	}
	return out, nil
}

// eventAtLocked reads one event. REQUIRES: s.dbMu held for reading.
func (s *Store) eventAtLocked(pos uint64) (events.Event, error) {
	raw, err := s.rawAtLocked(pos)
	if err != nil {
		return events.Event{}, err
	}
	return decodeAt(pos, raw)
}

// rawAtLocked reads the stored bytes of one indexed event (a copy).
// REQUIRES: s.dbMu held for reading.
func (s *Store) rawAtLocked(pos uint64) ([]byte, error) {
	raw, err := s.get(layout.EventKey(pos))
	if errors.Is(err, events.ErrNotFound) {
		return nil, fmt.Errorf("indexed position %d missing: %w", pos, events.ErrCorrupt)
	}
	return raw, err
}

// decodeAt decodes the stored bytes of the event at pos.
func decodeAt(pos uint64, raw []byte) (events.Event, error) {
	ev, err := events.Decode(raw)
	if err != nil {
		return events.Event{}, fmt.Errorf("position %d: %w", pos, err)
	}
	return ev, nil
}

// EventByID returns the acknowledged event with id, or events.ErrNotFound.
func (s *Store) EventByID(ctx context.Context, id uuid.UUID) (_ events.Event, err error) {
	defer s.noteDamage(&err)
	if err := ctx.Err(); err != nil {
		return events.Event{}, err
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	// Every id the store holds was added to the filter before its event
	// was acknowledged: "certainly absent" needs no Pebble lookup, which
	// costs a memtable seek and a filter probe per sstable.
	if !s.seq.ids.mayContain(id) {
		return events.Event{}, fmt.Errorf("event %s: %w", id, events.ErrNotFound)
	}
	raw, err := s.get(layout.IDKey(id))
	if err != nil {
		return events.Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	pos := binary.BigEndian.Uint64(raw)
	if pos >= s.Head().Size {
		return events.Event{}, fmt.Errorf("event %s: %w", id, events.ErrNotFound)
	}
	return s.eventAtLocked(pos)
}

// subscribePage is how many events a subscription reads from disk at once,
// and subscribePageBytes how many of their stored bytes: a subscriber
// whose consumer is slow holds its page until the consumer takes it (an
// SSE client that stops reading holds it until the API drops it), so a
// page of 1,024 events of 64 KiB (64 MiB) per subscriber was what let 40
// stalled subscribers take 2 GB (issue #20). 512 KiB still carries 1,024
// typical events (a few hundred bytes each) per read.
const (
	subscribePage      = 1024
	subscribePageBytes = 512 << 10
)

// Subscribe implements events.Subscriber. It reads pages from Pebble up to
// the acknowledged head, then waits for the head to move. Writers only close
// a channel when the head advances, so a slow subscriber costs them nothing.
func (s *Store) Subscribe(ctx context.Context, from uint64, f events.Filter, fn func(events.Event) error) error {
	return s.SubscribeProgress(ctx, from, f, fn, nil)
}

// SubscribeProgress is Subscribe that also tells how far it has read:
// progress(next) is called after the events below next were delivered (or
// skipped by the filter), from the subscribing goroutine, once per page. A
// reader that filters but must know the position it has reached (the key
// ring answers "the keys as of position P") uses it instead of
// subscribing to everything. progress may be nil.
func (s *Store) SubscribeProgress(ctx context.Context, from uint64, f events.Filter, fn func(events.Event) error, progress func(next uint64)) (err error) {
	defer s.noteDamage(&err)
	var match *events.Filter
	if f.StreamPrefix != "" || len(f.Types) > 0 {
		match = &f
	}
	next := from
	for {
		// Take the wake-up channel before reading the head so that an
		// advance between the two is never missed.
		ch := s.headChanged()
		if s.closed.Load() {
			return events.ErrClosed
		}
		size := s.Head().Size
		if next < size {
			hi := min(size, next+subscribePage)
			evs, end, err := s.readRangeMatching(ctx, next, hi, true, match, subscribePageBytes)
			if err != nil {
				return err
			}
			hi = end
			for i := range evs {
				if f.Match(&evs[i]) {
					if err := fn(evs[i]); err != nil {
						return err
					}
				}
			}
			next = hi
			if progress != nil {
				progress(next)
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
