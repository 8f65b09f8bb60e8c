package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	tessera "github.com/transparency-dev/tessera/client"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
)

// TestTesseraClient_Interop: an off-the-shelf C2SP tlog-tiles client
// (transparency-dev/tessera/client), with no greffe code on its side,
// audits a running node: it opens the signed checkpoint with the node's
// published verifier key, builds inclusion proofs from the hash tiles,
// hashes the entries of the entry bundles itself, and follows the log's
// growth with a consistency-checking state tracker. The harness only
// appends events and hands the client the node's URL, origin and key.
func TestTesseraClient_Interop(t *testing.T) {
	ctx := t.Context()
	n := ledgerNode(t, t.TempDir(), "")
	grow := func(from, to int) {
		t.Helper()
		for i := from; i < to; i += 1000 {
			ps := make([]events.Proposed, min(1000, to-i))
			for j := range ps {
				ps[j] = events.Proposed{ID: uuid.New(), Type: "Interop", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i+j)), Metadata: json.RawMessage(`{}`)}
			}
			if _, err := n.Store.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: fmt.Sprintf("interop-%d", i%5), Events: ps}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	grow(0, 70_000) // two levels of tiles, partial tiles at every level
	origin, vkey := n.Store.Origin(), n.Keys.Verifiers[0]

	// --- From here on, only the standard client and libraries. ---
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	root, err := url.Parse(n.URL() + "/tlog/")
	if err != nil {
		t.Fatal(err)
	}
	f, err := tessera.NewHTTPFetcher(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, cpRaw, _, err := tessera.FetchCheckpoint(ctx, f.ReadCheckpoint, verifier, origin)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size != 70_000 {
		t.Fatalf("checkpoint of size %d, want 70000", cp.Size)
	}
	pb, err := tessera.NewProofBuilder(ctx, cp.Size, f.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint64{0, 1, 255, 256, 4095, 65535, 65536, 69_999, 12_345} {
		ip, err := pb.InclusionProof(ctx, i)
		if err != nil {
			t.Fatalf("inclusion proof of %d: %v", i, err)
		}
		bundle, err := tessera.GetEntryBundle(ctx, f.ReadEntryBundle, i/256, cp.Size)
		if err != nil {
			t.Fatalf("entry bundle of %d: %v", i, err)
		}
		leaf := rfc6962.DefaultHasher.HashLeaf(bundle.Entries[i%256])
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, cp.Size, leaf, ip, cp.Hash); err != nil {
			t.Errorf("inclusion of %d: %v", i, err)
		}
	}

	tracker, err := tessera.NewLogStateTracker(ctx, f.ReadTile, cpRaw, verifier, origin, tessera.UnilateralConsensus(f.ReadCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	grow(70_000, 70_300)
	_, cproof, newRaw, err := tracker.Update(ctx) // checks the consistency proof itself
	if err != nil {
		t.Fatalf("tracker update: %v", err)
	}
	if got := tracker.Latest().Size; got != 70_300 || len(cproof) == 0 || len(newRaw) == 0 {
		t.Fatalf("tracker at %d with a proof of %d hashes", got, len(cproof))
	}
	pb2, err := tessera.NewProofBuilder(ctx, 70_300, f.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{1, 256, 4096, 65_536, 69_999, 70_000} {
		cp1, err := pb2.ConsistencyProof(ctx, from, 70_300)
		if err != nil {
			t.Fatal(err)
		}
		r1, err := pb2.ConsistencyProof(ctx, from, from) // empty: r1 comes from the tiles below
		if err != nil || len(r1) != 0 {
			t.Fatalf("consistency %d->%d: %v %d", from, from, err, len(r1))
		}
		rootFrom := rootFromTiles(ctx, t, f, from)
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, from, 70_300, cp1, rootFrom, tracker.Latest().Hash); err != nil {
			t.Errorf("consistency %d -> 70300: %v", from, err)
		}
	}
}

// rootFromTiles computes the root of the first size leaves from the hash
// tiles, with the standard client only.
func rootFromTiles(ctx context.Context, t *testing.T, f *tessera.HTTPFetcher, size uint64) []byte {
	t.Helper()
	hashes, err := tessera.FetchRangeNodes(ctx, size, f.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	// Fold the compact range right to left: the RFC 6962 root.
	root := hashes[len(hashes)-1]
	for i := len(hashes) - 2; i >= 0; i-- {
		root = rfc6962.DefaultHasher.HashChildren(hashes[i], root)
	}
	return root
}
