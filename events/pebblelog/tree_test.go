package pebblelog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"

	"github.com/greffe/greffe/events"
)

// TestTree_EdgeTileFollowsGrowth: proofs served while the partial leaf
// tile at the right edge fills (served from the edge cache, extended one
// event at a time) verify at every size, and the cache never serves a
// stale prefix once the tile is full.
func TestTree_EdgeTileFollowsGrowth(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, t.TempDir())
	var roots [][32]byte
	for i := range 300 {
		if _, err := s.Append(ctx, one(fmt.Sprintf("g-%d", i%2), events.ExpectAny, ev("G", fmt.Sprintf(`{"i":%d}`, i)))); err != nil {
			t.Fatal(err)
		}
		h := s.Head()
		roots = append(roots, h.Root)
		for _, idx := range []uint64{0, h.Size / 2, h.Size - 1} {
			p, err := events.InclusionProof(ctx, s, idx, h.Size)
			if err != nil {
				t.Fatal(err)
			}
			leaf, err := s.ReadHashes(ctx, leafIDs(idx))
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyInclusion(events.Hasher, idx, h.Size, leaf[0], p, h.Root[:]); err != nil {
				t.Fatalf("size %d, leaf %d: %v", h.Size, idx, err)
			}
		}
	}
	for size := uint64(1); size <= 300; size++ {
		r, err := events.RootAt(ctx, s, size)
		if err != nil {
			t.Fatal(err)
		}
		if r != roots[size-1] {
			t.Fatalf("root at %d differs from the head's when it was %d", size, size)
		}
	}
}

// BenchmarkInclusionProof measures serving inclusion proofs in process
// from the store: random positions of a 1,000,000-event log at its head
// size, every core asking (issue #3 asks >= 20,000 proofs/s):
//
//	go test ./events/pebblelog -run '^$' -bench InclusionProof -benchtime 3s
func BenchmarkInclusionProof(b *testing.B) {
	s := benchStore(b, "")
	ctx := context.Background()
	const n = 1_000_000
	for i := 0; i < n; i += 1000 {
		ps := make([]events.Proposed, 1000)
		for j := range ps {
			ps[j] = events.Proposed{ID: uuid.New(), Type: "Bench", Data: payload256, Metadata: json.RawMessage(`{}`)}
		}
		if _, err := s.Append(ctx, one(fmt.Sprintf("p-%d", i%97), events.ExpectAny, ps...)); err != nil {
			b.Fatal(err)
		}
	}
	// The head is not a multiple of 256 in real life: end mid-tile.
	if _, err := s.Append(ctx, one("p-edge", events.ExpectAny, ev("E", `{}`), ev("E", `{}`), ev("E", `{}`))); err != nil {
		b.Fatal(err)
	}
	size := s.Head().Size
	// Steady state: one proof per leaf tile warms Pebble's block cache and
	// the node cache, as a serving node's would be.
	for pos := uint64(0); pos < size; pos += 256 {
		if _, err := events.InclusionProof(ctx, s, pos, size); err != nil {
			b.Fatal(err)
		}
	}
	var seed atomic.Uint64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(seed.Add(1), 9))
		for pb.Next() {
			if _, err := events.InclusionProof(ctx, s, rng.Uint64N(size), size); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proofs/s")
}

func leafIDs(pos uint64) []compact.NodeID { return []compact.NodeID{compact.NewNodeID(0, pos)} }
