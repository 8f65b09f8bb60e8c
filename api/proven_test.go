package api_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// TestAPI_Proven: ?prove=1 adds the checkpoint and one inclusion proof per
// event of the answer, in the answer's order, from the trusted size asked;
// its parameters are refused with their field when malformed.
// client/verified checks the proofs themselves.
func TestAPI_Proven(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	for range 5 {
		if _, err := c.Append(t.Context(), "a", events.ExpectAny, []wire.EventIn{{Type: "T", Data: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := c.ReadAllProven(t.Context(), events.ReadOptions{From: 4, Limit: 3, Direction: events.Backward}, client.ProofQuery{Trusted: 2})
	if err != nil {
		t.Fatal(err)
	}
	p := out.Proof
	if p == nil || len(p.Entries) != 3 || p.Trusted != 2 || len(p.Consistency) == 0 {
		t.Fatalf("proof %+v, want 3 entries and a consistency proof from 2", p)
	}
	for i, want := range []uint64{4, 3, 2} {
		if p.Entries[i].Position != want || events.LeafHash(p.Entries[i].Entry) != out.Events[i].LeafHash {
			t.Fatalf("entry %d: position %d, want %d with the event's leaf hash", i, p.Entries[i].Position, want)
		}
	}
	// ?prove=range: the same page is one run, [2, 5), proven by the
	// compact ranges [0, 2) (one node) and [5, 5) (none: the checkpoint's
	// size is 5); the entries carry no hashes of their own.
	rp, err := c.ReadAllProven(t.Context(), events.ReadOptions{From: 4, Limit: 3, Direction: events.Backward}, client.ProofQuery{Range: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := rp.Proof.Range; r == nil || r.Begin != 2 || r.End != 5 || len(r.Left) != 1 || len(r.Right) != 0 {
		t.Fatalf("range proof %+v, want [2, 5) with one left hash and no right one", r)
	}
	for i, e := range rp.Proof.Entries {
		if len(e.Hashes) != 0 || e.Position != 4-uint64(i) {
			t.Fatalf("entry %d of a range-proven page: position %d, %d hashes", i, e.Position, len(e.Hashes))
		}
	}
	ap, err := c.AppendProven(t.Context(), "a", events.ExpectAny, []wire.EventIn{{Type: "T"}}, client.ProofQuery{})
	if err != nil || ap.Proof == nil || ap.ProofError != nil || len(ap.Proof.Entries) != 1 || ap.Proof.Entries[0].Position != 5 {
		t.Fatalf("proven append: %+v, %v", ap, err)
	}
	for _, tc := range []struct{ path, field string }{
		{"/v1/all?prove=yes", "prove"},
		{"/v1/all?prove=1&trusted=-1", "trusted"},
		{"/v1/all?prove=1&witness_quorum=101", "witness_quorum"},
		{"/v1/checkpoint?witness_quorum=x", "witness_quorum"},
	} {
		_, err := c.Get(t.Context(), tc.path)
		var ae *wire.Error
		if !errors.As(err, &ae) || ae.Code != "invalid_query" || ae.Status != 400 || ae.Field != tc.field {
			t.Fatalf("%s: %v, want 400 invalid_query on %s", tc.path, err, tc.field)
		}
	}
}

// TestAPI_RangeProofsOfEveryRange: on a log of 37 events (a tree with
// perfect subtrees of every height up to 5 and a ragged right edge), the
// range proof of every page the global log serves, forward, verifies
// against the checkpoint's root with the store's own node hashes
// (audit.VerifyRangeProof), and so does a backward page.
func TestAPI_RangeProofsOfEveryRange(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	const size = 37
	for range size {
		if _, err := c.Append(t.Context(), "r", events.ExpectAny, []wire.EventIn{{Type: "T", Data: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	root := n.store.Head().Root
	leaves := func(p *wire.Proof) [][]byte {
		out := make([][]byte, len(p.Entries))
		for i, e := range p.Entries {
			h := events.LeafHash(e.Entry)
			out[i] = h[:]
		}
		return out
	}
	for begin := uint64(0); begin < size; begin++ {
		for end := begin + 1; end <= size; end++ {
			out, err := c.ReadAllProven(t.Context(), events.ReadOptions{From: begin, Limit: int(end - begin)}, client.ProofQuery{Range: true})
			if err != nil {
				t.Fatal(err)
			}
			r := out.Proof.Range
			if r == nil || r.Begin != begin || r.End != end {
				t.Fatalf("page [%d, %d): range %+v", begin, end, r)
			}
			if err := audit.VerifyRangeProof(begin, end, size, leaves(out.Proof), r.Left, r.Right, root[:]); err != nil {
				t.Fatalf("page [%d, %d): %v", begin, end, err)
			}
		}
	}
	back, err := c.ReadAllProven(t.Context(), events.ReadOptions{From: 20, Limit: 7, Direction: events.Backward}, client.ProofQuery{Range: true})
	if err != nil {
		t.Fatal(err)
	}
	l := leaves(back.Proof)
	slices.Reverse(l)
	if r := back.Proof.Range; r == nil || r.Begin != 14 || r.End != 21 || audit.VerifyRangeProof(14, 21, size, l, r.Left, r.Right, root[:]) != nil {
		t.Fatalf("backward page of 7 from 20: range %+v does not prove [14, 21)", r)
	}
}
