package verify

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/greffe/greffe/audit"
)

// Checking the indexes against the replayed events. Each index is scanned
// once in key order while the events are being replayed (the scans are
// independent, so they overlap), its entries are collected compactly, and
// once the replay is done they are compared with per-position arrays: the
// stream index in the order it was scanned (sequential in the per-stream
// position lists), the event-id index split over two goroutines.

// maxLocates bounds the linear searches that attribute a bad id-index entry
// to the event it should point to; past it, faults name the entry's
// position.
const maxLocates = 16

// bitset is a fixed-size set of small integers. Not safe for concurrent
// writes.
type bitset []uint64

func newBitset(n uint64) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i uint64)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) or(o bitset) {
	for i := range b {
		b[i] |= o[i]
	}
}

// noPos marks a (stream, version) that no event has.
const noPos = ^uint64(0)

// versionSlack bounds how far beyond its event count a stream's versions
// are laid out: a tampered version of 2^60 must not allocate.
const versionSlack = 1024

// streamOrder lays positions out by (stream, version): order[start[s]+v]
// is the position of the event of stream s with version v, or noPos. A
// counting sort: O(events), no per-stream allocation. Versions are the
// events' own (checked contiguous by the replay), so one missing event
// leaves one hole, not a shift of every later version.
func (r *Replayed) streamOrder() (start, order []uint64) {
	width := make([]uint64, len(r.names))
	for s, n := range r.counts {
		width[s] = n
	}
	for p, s := range r.streamOf {
		if s < missingSlot {
			if v := r.versionOf[p]; v >= width[s] && v < r.counts[s]+versionSlack {
				width[s] = v + 1
			}
		}
	}
	start = make([]uint64, len(r.names)+1)
	for s, w := range width {
		start[s+1] = start[s] + w
	}
	order = make([]uint64, start[len(r.names)])
	for i := range order {
		order[i] = noPos
	}
	for p, s := range r.streamOf {
		if s >= missingSlot {
			continue
		}
		if v := r.versionOf[p]; v < width[s] && order[start[s]+v] == noPos {
			order[start[s]+v] = uint64(p)
		}
	}
	return start, order
}

// StreamEntries collects stream-index entries in key order (stream, then
// version), as a source scans them (Add), for CheckStreamIndex. Names are
// interned as they come: keys of one stream are adjacent.
type StreamEntries struct {
	names []string
	ents  []streamEntry
}

type streamEntry struct {
	name    uint32 // index into names
	version uint64
	pos     uint64
}

// Grow makes room for n more entries (a source that knows how many to
// expect: the recorded head).
func (s *StreamEntries) Grow(n uint64) { s.ents = slices.Grow(s.ents, int(n)) }

// Add records the entry mapping stream@version to position pos.
func (s *StreamEntries) Add(stream []byte, version, pos uint64) {
	if n := len(s.names); n == 0 || s.names[n-1] != string(stream) {
		s.names = append(s.names, string(stream))
	}
	s.ents = append(s.ents, streamEntry{name: uint32(len(s.names) - 1), version: version, pos: pos})
}

// CheckStreamIndex compares the collected stream-index entries with the
// replayed events: each entry must point to the event of its stream and
// version, and every event must have an entry. Safe to run beside
// CheckIDIndex.
func (run *Run) CheckStreamIndex(r *Replayed, se *StreamEntries) {
	fs := run.faults
	start, order := r.streamOrder()
	covered := newBitset(uint64(len(order)))
	sids := make([]int64, len(se.names))
	for i, name := range se.names {
		sids[i] = -1
		if s, ok := r.byName[name]; ok {
			sids[i] = int64(s)
		}
	}
	for _, e := range se.ents {
		name := se.names[e.name]
		sid := sids[e.name]
		if sid < 0 {
			fs.add(audit.Fault{Kind: audit.KindStreamIndexMismatch, Position: BlamePosition(e.pos),
				Detail: fmt.Sprintf("stream index entry %s@%d points to position %d, but no event of stream %q exists", name, e.version, e.pos, name)})
			continue
		}
		s := uint64(sid)
		want := noPos
		if e.version < start[s+1]-start[s] {
			k := start[s] + e.version
			covered.set(k)
			want = order[k]
		}
		switch {
		case want == noPos && e.pos < r.Size() && r.streamOf[e.pos] == missingSlot:
			// The entry points to an event that is missing: reported as such.
		case want == noPos:
			fs.add(audit.Fault{Kind: audit.KindStreamIndexMismatch, Position: BlamePosition(e.pos),
				Detail: fmt.Sprintf("stream index entry %s@%d points to position %d, but no event %s@%d exists", name, e.version, e.pos, name, e.version)})
		case e.pos != want:
			fs.add(audit.Fault{Kind: audit.KindStreamIndexMismatch, Position: int64(want),
				Detail: fmt.Sprintf("stream index entry %s@%d points to position %d, but %s@%d is at position %d", name, e.version, e.pos, name, e.version, want)})
		}
	}
	for s := range r.names {
		for k := start[s]; k < start[s+1]; k++ {
			if order[k] != noPos && !covered.has(k) {
				fs.add(audit.Fault{Kind: audit.KindStreamIndexMissing, Position: int64(order[k]),
					Detail: fmt.Sprintf("no stream index entry for %s@%d", r.names[s], k-start[s])})
			}
		}
	}
}

// IDEntry is an entry of the event-id index: the event with ID is at
// position Pos.
type IDEntry struct {
	ID  [16]byte
	Pos uint64
}

// idChecker compares event-id index entries with the replayed events.
type idChecker struct {
	r       *Replayed
	fs      *faults
	locates atomic.Int32
}

// CheckIDIndex compares the collected event-id index entries with the
// replayed events, on two goroutines: each entry must point to the event
// with its id, and every event must have an entry. Safe to run beside
// CheckStreamIndex.
func (run *Run) CheckIDIndex(r *Replayed, ents []IDEntry) {
	c := &idChecker{r: r, fs: run.faults}
	halves := [2][]IDEntry{ents[:len(ents)/2], ents[len(ents)/2:]}
	covered := [2]bitset{newBitset(r.Size()), newBitset(r.Size())}
	var wg sync.WaitGroup
	for i := range halves {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, e := range halves[i] {
				c.entry(e.ID, e.Pos, covered[i])
			}
		}()
	}
	wg.Wait()
	covered[0].or(covered[1])
	c.finish(covered[0])
}

func (c *idChecker) entry(id [16]byte, pos uint64, covered bitset) {
	if pos < c.r.Size() && c.r.Decoded(pos) && c.r.idOf[pos] == id {
		covered.set(pos)
		return
	}
	at, found := c.locate(id, -1)
	switch {
	case found:
		c.fs.add(audit.Fault{Kind: audit.KindIDIndexMismatch, Position: int64(at),
			Detail: fmt.Sprintf("event-id index entry %s points to position %d, but that event is at position %d", uuid.UUID(id), pos, at)})
	case pos < c.r.Size():
		c.fs.add(audit.Fault{Kind: audit.KindIDIndexMismatch, Position: int64(pos),
			Detail: fmt.Sprintf("event-id index entry %s points to position %d, which holds another event", uuid.UUID(id), pos)})
	default:
		c.fs.add(audit.Fault{Kind: audit.KindIDIndexMismatch, Position: BlamePosition(pos),
			Detail: fmt.Sprintf("event-id index entry %s points to position %d, beyond the log", uuid.UUID(id), pos)})
	}
}

// locate finds the first decodable event with id other than at skip, by a
// linear search (at most maxLocates per verification).
func (c *idChecker) locate(id [16]byte, skip int64) (uint64, bool) {
	if c.locates.Add(1) > maxLocates {
		return 0, false
	}
	for p := range c.r.idOf {
		if int64(p) != skip && c.r.Decoded(uint64(p)) && c.r.idOf[p] == id {
			return uint64(p), true
		}
	}
	return 0, false
}

// finish reports every event no entry pointed to: a duplicate id when
// another event has the same id (the later one is the duplicate), a
// missing entry otherwise.
func (c *idChecker) finish(covered bitset) {
	for p := uint64(0); p < c.r.Size(); p++ {
		if !c.r.Decoded(p) || covered.has(p) {
			continue
		}
		if q, found := c.locate(c.r.idOf[p], int64(p)); found {
			first, dup := min(p, q), max(p, q)
			c.fs.add(audit.Fault{Kind: audit.KindDuplicateEventID, Position: int64(dup),
				Detail: fmt.Sprintf("event id %s is already the id of the event at position %d", uuid.UUID(c.r.idOf[p]), first)})
			continue
		}
		c.fs.add(audit.Fault{Kind: audit.KindIDIndexMissing, Position: int64(p),
			Detail: fmt.Sprintf("no event-id index entry for %s", uuid.UUID(c.r.idOf[p]))})
	}
}
