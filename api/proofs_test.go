package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/testonly"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

// fill appends n events in appends of up to 1,000 and returns the
// reference tree (transparency-dev/merkle/testonly) of the stored bytes.
func fill(t *testing.T, s *pebblelog.Store, n int) *testonly.Tree {
	t.Helper()
	ctx := t.Context()
	for i := 0; i < n; i += 1000 {
		ps := make([]events.Proposed, min(1000, n-i))
		for j := range ps {
			ps[j] = events.Proposed{ID: uuid.New(), Type: "P", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i+j)), Metadata: json.RawMessage(`{}`)}
		}
		if _, err := s.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: fmt.Sprintf("p-%d", i%3), Events: ps}}}); err != nil {
			t.Fatal(err)
		}
	}
	raws, err := s.ReadRaw(ctx, 0, uint64(n))
	if err != nil {
		t.Fatal(err)
	}
	ref := testonly.New(events.Hasher)
	ref.AppendData(raws...)
	return ref
}

// checkInclusion compares the store's inclusion proof with the reference
// tree's and verifies it with transparency-dev/merkle.
func checkInclusion(t *testing.T, s *pebblelog.Store, ref *testonly.Tree, i, size uint64) {
	t.Helper()
	got, err := events.InclusionProof(context.Background(), s, i, size)
	if err != nil {
		t.Fatalf("inclusion %d/%d: %v", i, size, err)
	}
	want, err := ref.InclusionProof(i, size)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		want = [][]byte{}
	}
	if !slices.EqualFunc(want, got, bytes.Equal) { // cmp.Diff only to report: it is slow on 90,000 proofs
		t.Fatalf("inclusion %d/%d (-want +got):\n%s", i, size, cmp.Diff(want, got))
	}
	if err := proof.VerifyInclusion(events.Hasher, i, size, ref.LeafHash(i), got, ref.HashAt(size)); err != nil {
		t.Fatalf("inclusion %d/%d does not verify: %v", i, size, err)
	}
}

func checkConsistency(t *testing.T, s *pebblelog.Store, ref *testonly.Tree, size1, size2 uint64) {
	t.Helper()
	got, err := events.ConsistencyProof(context.Background(), s, size1, size2)
	if err != nil {
		t.Fatalf("consistency %d->%d: %v", size1, size2, err)
	}
	want, err := ref.ConsistencyProof(size1, size2)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		want = [][]byte{}
	}
	if !slices.EqualFunc(want, got, bytes.Equal) {
		t.Fatalf("consistency %d->%d (-want +got):\n%s", size1, size2, cmp.Diff(want, got))
	}
	root1 := events.EmptyRoot[:]
	if size1 > 0 {
		root1 = ref.HashAt(size1)
	}
	if err := proof.VerifyConsistency(events.Hasher, size1, size2, got, root1, ref.HashAt(size2)); err != nil {
		t.Fatalf("consistency %d->%d does not verify: %v", size1, size2, err)
	}
}

// TestProofs_EveryPairSmallTree: every inclusion (position, size) and
// every consistency (size1, size2) pair of a 300-event log (a full tile and
// a partial one), against the reference tree.
func TestProofs_EveryPairSmallTree(t *testing.T) {
	n := startNode(t, nil)
	const size = 300
	ref := fill(t, n.store, size)
	for s := uint64(1); s <= size; s++ {
		for i := uint64(0); i < s; i++ {
			checkInclusion(t, n.store, ref, i, s)
		}
		for s1 := uint64(0); s1 <= s; s1++ {
			checkConsistency(t, n.store, ref, s1, s)
		}
	}
}

// TestProofs_RandomPairsLargeTree: random pairs on a 66,000-event log
// (two levels of stored nodes, partial tiles at each level).
func TestProofs_RandomPairsLargeTree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 66,000-event log")
	}
	n := startNode(t, nil)
	const size = 66_000
	ref := fill(t, n.store, size)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		s := 1 + rng.Uint64N(size)
		checkInclusion(t, n.store, ref, rng.Uint64N(s), s)
		checkConsistency(t, n.store, ref, rng.Uint64N(s+1), s)
	}
	for _, s := range []uint64{65_536, 65_535, 65_537, size} {
		checkInclusion(t, n.store, ref, s-1, s)
		checkInclusion(t, n.store, ref, 0, s)
		checkConsistency(t, n.store, ref, 256, s)
		checkConsistency(t, n.store, ref, 0, s)
	}
}

// TestProofs_HTTP checks the proof routes on every pair of a small log,
// and size 0 explicitly: from the empty tree the consistency proof is
// empty and its root is SHA-256 of the empty string; the empty tree has no
// inclusion proof.
func TestProofs_HTTP(t *testing.T) {
	n := startNode(t, nil)
	const size = 40
	ref := fill(t, n.store, size)
	c := client.New(n.url, "")
	ctx := t.Context()
	root := func(s uint64) []byte {
		if s == 0 {
			return events.EmptyRoot[:]
		}
		return ref.HashAt(s)
	}
	for s := uint64(0); s <= size; s++ {
		for i := uint64(0); i < s; i++ {
			var out wire.InclusionOut
			if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/proof/inclusion?position=%d&size=%d", i, s), nil, &out); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Root, root(s)) || !bytes.Equal(out.LeafHash, ref.LeafHash(i)) {
				t.Fatalf("inclusion %d/%d: root or leaf differs", i, s)
			}
			if err := proof.VerifyInclusion(events.Hasher, i, s, out.LeafHash, out.Hashes, root(s)); err != nil {
				t.Fatalf("inclusion %d/%d: %v", i, s, err)
			}
		}
		for s1 := uint64(0); s1 <= s; s1++ {
			var out wire.ConsistencyOut
			if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/proof/consistency?from=%d&to=%d", s1, s), nil, &out); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.RootFrom, root(s1)) || !bytes.Equal(out.RootTo, root(s)) {
				t.Fatalf("consistency %d->%d: roots differ", s1, s)
			}
			if err := proof.VerifyConsistency(events.Hasher, s1, s, out.Hashes, out.RootFrom, out.RootTo); err != nil {
				t.Fatalf("consistency %d->%d: %v", s1, s, err)
			}
			if (s1 == 0 || s1 == s) && out.Hashes == nil {
				t.Fatalf("consistency %d->%d: hashes must be [] not null", s1, s)
			}
		}
	}

	tests := []struct {
		name string
		path string
		code string
	}{
		{"the empty tree has no leaves", "/v1/proof/inclusion?position=0&size=0", events.CodeNotFound},
		{"position beyond size", "/v1/proof/inclusion?position=5&size=5", events.CodeNotFound},
		{"size beyond head", "/v1/proof/inclusion?position=0&size=41", events.CodeNotFound},
		{"position missing", "/v1/proof/inclusion", "invalid_query"},
		{"from above to", "/v1/proof/consistency?from=6&to=5", events.CodeNotFound},
		{"to beyond head", "/v1/proof/consistency?from=0&to=41", events.CodeNotFound},
		{"from not a number", "/v1/proof/consistency?from=x", "invalid_query"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Do(ctx, http.MethodGet, tc.path, nil, &struct{}{})
			if got := client.CodeOf(err); got != tc.code {
				t.Errorf("code %q (%v), want %q", got, err, tc.code)
			}
		})
	}
	// The empty tree, with to defaulting to the head.
	var out wire.ConsistencyOut
	if err := c.Do(ctx, http.MethodGet, "/v1/proof/consistency?from=0", nil, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wire.ConsistencyOut{From: 0, To: size, RootFrom: events.EmptyRoot[:], RootTo: ref.HashAt(size), Hashes: [][]byte{}}, out); diff != "" {
		t.Errorf("from the empty tree (-want +got):\n%s", diff)
	}
}
