package pebblelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// prepared is a batch applied in memory: its Pebble writes and outcomes, and
// the sequencer state to install once Pebble has taken the writes.
type prepared struct {
	outcomes []events.Outcome
	wb       *pebble.Batch
	head     events.Head
	nEvents  int

	size         uint64
	rng          *events.Range
	lastRecorded int64
	applied      uint64
	streams      map[string]int64 // versions changed by this batch
	newIDs       []uuid.UUID
	index        []indexEntry // written, sorted, at seal
	keys         []byte       // the index entries' keys, end to end
	// tail holds the leaf hashes of the partial leaf tile (fewer than 256,
	// 32 bytes each), copied from the sequencer state.
	tail []byte
	// wait returns once the write-ahead log is synced through the batch
	// (writeAheadLog.start): the syncer calls it before acknowledging.
	wait func() error
}

// prepare applies b to the sequencer state without touching it: it checks
// conditions and idempotency, assigns positions and versions, encodes and
// hashes the events, grows the tree and writes every key into one Pebble
// batch. It is a deterministic function of the stored state and b: the only
// time it records is b.RecordedAt (or the last recorded time, whichever is
// later), so every replica produces identical bytes.
//
// REQUIRES: the caller is the single applier and holds s.dbMu for reading.
func (s *Store) prepare(b *events.Batch, raftIndex uint64) (*prepared, error) {
	bb := s.newBuilder(b.RecordedAt, raftIndex)
	for i := range b.Appends {
		if err := bb.add(&b.Appends[i]); err != nil {
			bb.abort()
			return nil, err
		}
	}
	return bb.seal()
}

// builder applies appends one by one into an open batch; prepare is
// newBuilder + add for each append + seal, and local group commit calls the
// same steps as requests arrive, so the work of preparing a batch overlaps
// the fsync of the previous one. The result is identical either way.
type builder struct {
	s *Store
	p *prepared
	a applyCtx
}

// newBuilder opens a batch recorded at `at`. REQUIRES: as prepare.
func (s *Store) newBuilder(at time.Time, raftIndex uint64) *builder {
	last := s.seq.last
	p := &prepared{
		wb: s.db.NewBatch(pebble.WithInitialSizeBytes(max(last.bytes+last.bytes/8, minBatchBytes)),
			pebble.WithMaxRetainedSizeBytes(maxRetainedBatchBytes)),
		newIDs:       make([]uuid.UUID, 0, last.events),
		index:        make([]indexEntry, 0, 2*last.events),
		keys:         make([]byte, 0, last.keyBytes),
		size:         s.seq.size,
		rng:          cloneRange(s.seq.rng),
		lastRecorded: max(at.UnixNano(), s.seq.lastRecorded),
		applied:      s.seq.applied,
		streams:      make(map[string]int64),
		tail:         append(make([]byte, 0, layout.TileWidth*32), s.seq.tail...),
	}
	if raftIndex != 0 {
		p.applied = raftIndex
	}
	bb := &builder{s: s, p: p}
	bb.a = applyCtx{s: s, p: p, ids: make(map[uuid.UUID]*events.Event, last.events), at: time.Unix(0, p.lastRecorded).UTC()}
	return bb
}

// batchSize is what one batch held, to size the next one's buffers.
type batchSize struct {
	bytes, events, keyBytes int
}

// minBatchBytes is the smallest initial batch buffer (Pebble's default);
// maxRetainedBatchBytes lets Pebble's batch pool keep the buffers of large
// batches for reuse (its default, 1 MiB, drops those of a thousand events).
const (
	minBatchBytes         = 1 << 10
	maxRetainedBatchBytes = 8 << 20
)

// add applies one append to the open batch and records its outcome. An error
// is a storage failure: the batch must be aborted.
func (bb *builder) add(r *events.AppendRequest) error {
	o, err := bb.a.apply(r)
	if err != nil {
		return err
	}
	bb.p.outcomes = append(bb.p.outcomes, o)
	return nil
}

func (bb *builder) abort() {
	bb.a.close()
	bb.p.wb.Close()
}

// seal writes the state key and computes the head after the batch.
func (bb *builder) seal() (*prepared, error) {
	bb.a.close()
	p, s := bb.p, bb.s
	if p.nEvents == 0 {
		// Nothing new (only refusals and duplicates): keep the recorded time
		// where it was so that such a batch changes no byte.
		p.lastRecorded = s.seq.lastRecorded
	}
	slices.SortFunc(p.index, func(x, y indexEntry) int { return bytes.Compare(p.key(x), p.key(y)) })
	var val [16]byte
	for _, e := range p.index {
		value := layout.AppendStreamRun(val[:0], e.pos, e.n) // an id's value is its position: a run of 1
		v := p.wb.SetDeferred(int(e.end-e.start), len(value))
		copy(v.Key, p.key(e))
		copy(v.Value, value)
		if err := v.Finish(); err != nil {
			p.wb.Close()
			return nil, err
		}
	}
	if err := p.wb.Set(metaState, layout.State{Size: p.size, LastRecorded: p.lastRecorded, Applied: p.applied, Range: p.rng.Hashes()}.Encode(), nil); err != nil {
		p.wb.Close()
		return nil, err
	}
	p.head = events.Head{Size: p.size, Root: events.EmptyRoot, RecordedAt: p.lastRecorded}
	if p.size > 0 {
		r, err := p.rng.GetRootHash(nil)
		if err != nil {
			p.wb.Close()
			return nil, fmt.Errorf("root: %w", err)
		}
		p.head.Root = [32]byte(r)
	}
	return p, nil
}

// install makes p the sequencer state. REQUIRES: Pebble has applied p.wb.
func (s *Store) install(p *prepared) {
	s.seq.last = batchSize{bytes: p.wb.Len(), events: p.nEvents, keyBytes: len(p.keys)}
	s.seq.size, s.seq.rng, s.seq.lastRecorded, s.seq.applied = p.size, p.rng, p.lastRecorded, p.applied
	s.seq.tail = p.tail
	if len(s.seq.streams)+len(p.streams) > maxStreamCache {
		clear(s.seq.streams)
	}
	for k, v := range p.streams {
		s.seq.streams[k] = v
	}
	for _, id := range p.newIDs {
		s.seq.ids.add(id)
	}
}

func cloneRange(r *events.Range) *events.Range {
	c, err := events.RangeFactory.NewRange(r.Begin(), r.End(), append([][]byte(nil), r.Hashes()...))
	if err != nil {
		panic(fmt.Sprintf("clone of a valid range failed: %v", err)) // invariant
	}
	return c
}

// applyCtx carries one prepare call's overlays: events and stream versions
// written earlier in the same batch, which Pebble does not see yet.
type applyCtx struct {
	s   *Store
	p   *prepared
	ids map[uuid.UUID]*events.Event
	at  time.Time
	it  *pebble.Iterator
	buf []byte
}

func (a *applyCtx) close() {
	if a.it != nil {
		_ = a.it.Close()
		a.it = nil
	}
}

// apply applies one atomic append. A refusal is an Outcome with Err set and
// writes nothing; a returned error is a storage failure that aborts the batch.
func (a *applyCtx) apply(r *events.AppendRequest) (events.Outcome, error) {
	// Idempotency first: a retry of an append that was written answers with
	// the original events, whatever the condition says now.
	var originals []events.Event
	found, total := 0, 0
	for _, sa := range r.Streams {
		for j := range sa.Events {
			total++
			prev, err := a.lookupID(sa.Events[j].ID)
			if errors.Is(err, events.ErrNotFound) {
				continue
			}
			if err != nil {
				return events.Outcome{}, err
			}
			found++
			if !sa.Events[j].SameContent(sa.Stream, prev) {
				return events.Outcome{Err: events.Refusef(events.CodeDuplicateEventID, "",
					"event id %s is already at position %d with other content; use a new id for a new event", prev.ID, prev.Position)}, nil
			}
			originals = append(originals, *prev)
		}
	}
	if found == total {
		return events.Outcome{Events: originals, Duplicate: true}, nil
	}
	if found > 0 {
		return events.Outcome{Err: events.Refusef(events.CodeDuplicateEventID, "",
			"%d of the %d events of this append are already in the log; retry the original append unchanged or use new ids", found, total)}, nil
	}
	// Conditions: all hold or nothing is written.
	versions := make([]int64, len(r.Streams))
	for i, sa := range r.Streams {
		v, err := a.streamVersion(sa.Stream)
		if err != nil {
			return events.Outcome{}, err
		}
		if !sa.Expected.Holds(v) {
			return events.Outcome{Err: &events.ConditionError{Stream: sa.Stream, Expected: sa.Expected, Actual: v}}, nil
		}
		versions[i] = v
	}
	out := make([]events.Event, 0, total)
	for i, sa := range r.Streams {
		v := versions[i]
		if len(sa.Events) > 0 {
			// One stream-index key maps the run of this stream's events
			// (layout): consecutive versions at consecutive positions.
			a.p.addIndex(a.p.size, uint64(len(sa.Events)), layout.AppendStreamKey(a.p.keys, sa.Stream, uint64(v+1)))
		}
		for j := range sa.Events {
			pr := &sa.Events[j]
			v++
			out = append(out, events.Event{
				Position: a.p.size, Stream: sa.Stream, Version: uint64(v), ID: pr.ID, Type: pr.Type,
				Data: pr.Data, Metadata: pr.Metadata, RecordedAt: a.at, CorrelationID: pr.CorrelationID,
				CausationID: pr.CausationID, Actor: pr.Actor, Envelope: pr.Envelope,
			})
			ev := &out[len(out)-1] // out never grows past total: the pointer stays valid
			if err := a.write(ev); err != nil {
				return events.Outcome{}, err
			}
			a.ids[ev.ID] = ev
			a.p.newIDs = append(a.p.newIDs, ev.ID)
		}
		if len(sa.Events) > 0 {
			a.p.streams[sa.Stream] = v
		}
	}
	a.p.nEvents += len(out)
	return events.Outcome{Events: out}, nil
}

// write encodes ev, sets its leaf hash, grows the tree and writes the event,
// its Merkle nodes and its index entries into the batch.
func (a *applyCtx) write(ev *events.Event) error {
	var err error
	a.buf, err = events.AppendEncoded(a.buf[:0], ev)
	if err != nil {
		return fmt.Errorf("encode position %d: %w", ev.Position, err)
	}
	ev.LeafHash = events.LeafHash(a.buf)
	wb := a.p.wb
	// Written in place, as layout.EventKey(ev.Position) would be, without a key
	// allocation per event.
	op := wb.SetDeferred(9, len(a.buf))
	op.Key[0] = byte(layout.SpaceEvents)
	binary.BigEndian.PutUint64(op.Key[1:], ev.Position)
	copy(op.Value, a.buf)
	if err := op.Finish(); err != nil {
		return err
	}
	var werr error
	if err := a.p.rng.Append(ev.LeafHash[:], func(id events.NodeID, hash []byte) {
		// Only tile bases above the leaves are stored (see layout).
		if id.Level > 0 && id.Level%layout.TileHeight == 0 {
			if e := wb.Set(layout.NodeKey(id.Level, id.Index), hash, nil); e != nil && werr == nil {
				werr = e
			}
		}
	}); err != nil {
		return fmt.Errorf("grow tree at %d: %w", ev.Position, err)
	}
	if werr != nil {
		return werr
	}
	a.p.tail = append(a.p.tail, ev.LeafHash[:]...)
	if len(a.p.tail) == layout.TileWidth*32 {
		if err := wb.Set(layout.LeafTileKey(ev.Position/layout.TileWidth), a.p.tail, nil); err != nil {
			return err
		}
		a.p.tail = a.p.tail[:0]
	}
	// Index entries are written at seal, sorted: the memtable's inserter
	// reuses its search path for ascending keys, and interleaving them with
	// the (already ascending) event keys would defeat that.
	a.p.addIndex(ev.Position, 1, layout.AppendIDKey(a.p.keys, ev.ID))
	a.p.size++
	return nil
}

// indexEntry is a stream-index or id-index key, keys[start:end] of its
// batch, and the position it maps to (n positions from pos for a stream
// run, 1 for an id). The keys share one buffer: a slice each was two
// allocations per event.
type indexEntry struct {
	start, end uint32
	pos, n     uint64
}

// addIndex records the key that keys grew into, to map it to pos (and the
// n-1 positions after it).
func (p *prepared) addIndex(pos, n uint64, keys []byte) {
	p.index = append(p.index, indexEntry{start: uint32(len(p.keys)), end: uint32(len(keys)), pos: pos, n: n})
	p.keys = keys
}

func (p *prepared) key(e indexEntry) []byte { return p.keys[e.start:e.end] }

// lookupID finds an event by id in this batch or in Pebble (which may hold
// applied events not yet acknowledged: they precede this batch in order).
func (a *applyCtx) lookupID(id uuid.UUID) (*events.Event, error) {
	if e, ok := a.ids[id]; ok {
		return e, nil
	}
	if !a.s.seq.ids.mayContain(id) {
		return nil, events.ErrNotFound
	}
	raw, err := a.s.get(layout.IDKey(id))
	if err != nil {
		return nil, err
	}
	if len(raw) != 8 {
		return nil, fmt.Errorf("id index for %s holds %d bytes: %w", id, len(raw), events.ErrCorrupt)
	}
	pos := binary.BigEndian.Uint64(raw)
	enc, err := a.s.get(layout.EventKey(pos))
	if err != nil {
		return nil, fmt.Errorf("id index for %s points to missing position %d: %w", id, pos, events.ErrCorrupt)
	}
	ev, err := events.DecodeNoHash(enc)
	if err != nil {
		return nil, fmt.Errorf("position %d: %w", pos, err)
	}
	ev.LeafHash = events.LeafHash(enc)
	return &ev, nil
}

// streamVersion returns the current version of stream (-1 when it has none),
// from this batch, the cache, or the stream index.
func (a *applyCtx) streamVersion(stream string) (int64, error) {
	if v, ok := a.p.streams[stream]; ok {
		return v, nil
	}
	if v, ok := a.s.seq.streams[stream]; ok {
		return v, nil
	}
	if a.it == nil {
		it, err := a.s.db.NewIter(spanOf(layout.SpaceStreams))
		if err != nil {
			return 0, err
		}
		a.it = it
	}
	lo, hi := layout.StreamBounds(stream)
	v := int64(-1)
	if a.it.SeekLT(hi) && len(a.it.Key()) == len(lo)+8 && string(a.it.Key()[:len(lo)]) == string(lo) {
		_, n, ok := layout.ParseStreamRun(a.it.Value())
		if !ok {
			return 0, fmt.Errorf("stream index of %q: value %x: %w", stream, a.it.Value(), events.ErrCorrupt)
		}
		v = int64(binary.BigEndian.Uint64(a.it.Key()[len(lo):]) + n - 1)
	}
	if err := a.it.Error(); err != nil {
		return 0, err
	}
	a.s.seq.streams[stream] = v
	return v, nil
}
