package verify

import (
	"bytes"
	"context"

	"github.com/transparency-dev/merkle/compact"

	"github.com/greffe/greffe/events"
)

// Replayed is what the replay leaves for the index, tree, checkpoint and
// state checks: the recomputed tree and, per position, the stream, version
// and event id. Read-only once Replay returned: safe for concurrent reads.
type Replayed struct {
	tree      *tree
	streamOf  []uint32   // per position: stream number, or noStream
	versionOf []uint64   // per position: the event's stream version
	idOf      [][16]byte // per position
	names     []string   // stream number -> name
	byName    map[string]uint32
	counts    []uint64 // per stream: events seen
	lastAt    int64    // recorded_at of the last decodable event
	sigs      int      // signatures checked
	dropped   uint64   // events beyond maxSlots, not replayed
}

// Size returns the number of positions replayed.
func (r *Replayed) Size() uint64 { return uint64(len(r.streamOf)) }

// Streams returns the number of distinct streams of the decodable events.
func (r *Replayed) Streams() int { return len(r.names) }

// Signatures returns the number of event signatures checked.
func (r *Replayed) Signatures() int { return r.sigs }

// Dropped returns the number of events fed at or beyond
// ReplayConfig.MaxSlots, which were not replayed.
func (r *Replayed) Dropped() uint64 { return r.dropped }

// LastRecorded returns the recorded_at, in Unix nanoseconds, of the last
// decodable event (0 when none).
func (r *Replayed) LastRecorded() int64 { return r.lastAt }

// Decoded reports whether position p holds a decodable event.
func (r *Replayed) Decoded(p uint64) bool { return r.streamOf[p] < missingSlot }

// Missing reports whether nothing was stored at position p (its fault is
// reported as a missing event).
func (r *Replayed) Missing(p uint64) bool { return r.streamOf[p] == missingSlot }

// Stream returns the stream number of the decodable event at p: the same
// number for every event of one stream (StreamName names it).
func (r *Replayed) Stream(p uint64) uint32 { return r.streamOf[p] }

// StreamName returns the name of stream number s.
func (r *Replayed) StreamName(s uint32) string { return r.names[s] }

// Version returns the stream version of the decodable event at p.
func (r *Replayed) Version(p uint64) uint64 { return r.versionOf[p] }

// ID returns the id of the decodable event at p.
func (r *Replayed) ID(p uint64) [16]byte { return r.idOf[p] }

// Root returns the root of the tree of the first size positions.
// REQUIRES: size <= Size().
func (r *Replayed) Root(size uint64) [32]byte { return r.tree.root(size) }

// Node returns the hash of the complete node (l, i) of the recomputed
// tree, or nil when the tree has no such node. Level 0 are the leaf hashes.
func (r *Replayed) Node(l uint, i uint64) []byte { return r.tree.node(l, i) }

// LeafHashes returns the leaf hashes of positions [lo, hi), concatenated
// (aliased, not copied). REQUIRES: lo <= hi <= Size().
func (r *Replayed) LeafHashes(lo, hi uint64) []byte { return r.tree.levels[0][32*lo : 32*hi : 32*hi] }

// ConsistencyProof builds the RFC 6962 proof from size from to size to
// from the recomputed tree: the Prover of a source that holds no proof of
// its own.
func (r *Replayed) ConsistencyProof(ctx context.Context, from, to uint64) ([][]byte, error) {
	return events.ConsistencyProof(ctx, r.tree, from, to)
}

// CompareRange compares a compact range [0, size) with the recomputed
// tree's and returns the coverage of the first node that differs.
func (r *Replayed) CompareRange(size uint64, hashes [][]byte) (lo, hi uint64, differs bool) {
	ids := compact.RangeNodes(0, size, nil)
	if len(ids) != len(hashes) {
		return 0, size, true
	}
	for i, id := range ids {
		if !bytes.Equal(r.tree.node(id.Level, id.Index), hashes[i]) {
			lo, hi := id.Coverage()
			return lo, hi, true
		}
	}
	return 0, 0, false
}
