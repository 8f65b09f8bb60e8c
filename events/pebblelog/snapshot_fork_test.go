package pebblelog_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// applyForged applies batches at raft indexes [from, to) like applyN, but
// of another history: the same ledger id and the same shape (two events per
// index), different events. It is what a forger who knows the ledger id
// builds to rewrite a follower's history (issue #20, finding 3).
func applyForged(t *testing.T, s *pebblelog.Store, from, to uint64) {
	t.Helper()
	for idx := from; idx < to; idx++ {
		e1, e2 := ev("ApprovalGranted", fmt.Sprintf(`{"forged":%d,"approver":"owner"}`, idx)), ev("ApprovalGranted", `{}`)
		e1.ID = uuid.NewSHA1(uuid.NameSpaceURL, fmt.Appendf(nil, "forged/%d/1", idx))
		e2.ID = uuid.NewSHA1(uuid.NameSpaceURL, fmt.Appendf(nil, "forged/%d/2", idx))
		b := &events.Batch{RecordedAt: time.Unix(1_700_000_000+int64(idx), 0).UTC(), Appends: []events.AppendRequest{
			one(fmt.Sprintf("snap-%d", idx%3), events.ExpectAny, e1, e2),
		}}
		if _, err := s.ApplyReplicated(b, idx); err != nil {
			t.Fatalf("apply forged index %d: %v", idx, err)
		}
	}
}

// storeState is what a refused restore must leave exactly as it was.
type storeState struct {
	Head        events.Head
	Applied     uint64
	Raw         [][]byte
	Checkpoints map[uint64][]byte
}

func stateOf(t *testing.T, s *pebblelog.Store) storeState {
	t.Helper()
	st := storeState{Head: s.Head(), Applied: s.AppliedIndex(), Raw: rawAll(t, s), Checkpoints: map[uint64][]byte{}}
	if err := s.StoredCheckpoints(t.Context(), func(size uint64, n []byte) error {
		st.Checkpoints[size] = n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return st
}

// rewriteSnapshot re-encodes a snapshot stream (snapshot.go's format) with
// edit applied to each record's value, and a trailer recomputed over the
// result: what a forger who has an honest snapshot sends. edit returns the
// value unchanged to keep a record.
func rewriteSnapshot(t *testing.T, stream []byte, edit func(key, value []byte) []byte) []byte {
	t.Helper()
	const magic = "greffe-ledger-snapshot/1\n"
	if !bytes.HasPrefix(stream, []byte(magic)) {
		t.Fatal("not a snapshot stream")
	}
	in := stream[len(magic):]
	hl := int(binary.BigEndian.Uint16(in))
	out := append([]byte(magic), in[:2+hl]...)
	in = in[2+hl:]
	var count uint64
	for in[0] == 1 {
		in = in[1:]
		kl, n := binary.Uvarint(in)
		in = in[n:]
		key := in[:kl]
		in = in[kl:]
		vl, n := binary.Uvarint(in)
		in = in[n:]
		value := edit(key, in[:vl])
		in = in[vl:]
		out = append(out, 1)
		out = binary.AppendUvarint(out, uint64(len(key)))
		out = append(out, key...)
		out = binary.AppendUvarint(out, uint64(len(value)))
		out = append(out, value...)
		count++
	}
	out = append(out, 0)
	sum := sha256.Sum256(out)
	out = binary.BigEndian.AppendUint64(out, count)
	return append(out, sum[:]...)
}

// honestTreeForgedEvent is the snapshot of an honest store of indexes
// [1, to), with the bytes of the event at pos replaced by forged.
func honestTreeForgedEvent(t *testing.T, stores func(*testing.T) (*pebblelog.Store, string), to, pos uint64, forged []byte) []byte {
	t.Helper()
	h, _ := stores(t)
	applyN(t, h, 1, to)
	return rewriteSnapshot(t, snapshotBytes(t, h), func(key, value []byte) []byte {
		if bytes.Equal(key, eventKey(pos)) {
			return forged
		}
		return value
	})
}

// eventKey is the store's key of the event at pos (layout: 'e' position).
func eventKey(pos uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'e'}, pos) }

// TestStore_RestoreRefusesFork is the attack of issue #20, finding 3: one
// InstallSnapshot whose stream is a forged history of the same ledger id,
// longer than the follower's and at a higher raft index. Restore checked
// the ledger id, the index and the stream's own consistency, swapped the
// forged store in, and the node signed its head: two acknowledged events
// were replaced. Now a snapshot is installed only when a consistency proof
// from the store's head, and from every checkpoint it signed, to the
// snapshot's root verifies, and only when the snapshot's tree is the tree
// of its own events; anything else is refused, the staged folder removed,
// and the store keeps serving what it held.
func TestStore_RestoreRefusesFork(t *testing.T) {
	skey, _, err := note.GenerateKey(rand.Reader, events.Origin(testLedger))
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	// stores opens a fresh store of the test ledger in its own folder.
	stores := func(t *testing.T) (*pebblelog.Store, string) {
		dir := filepath.Join(t.TempDir(), "ledger")
		s, err := pebblelog.Open(pebblelog.Config{Dir: dir, LedgerID: testLedger, Signers: []note.Signer{signer}, CheckpointInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, dir
	}
	sign := func(t *testing.T, s *pebblelog.Store, size uint64) {
		t.Helper()
		if _, err := s.CheckpointAt(t.Context(), size); err != nil {
			t.Fatalf("sign checkpoint %d: %v", size, err)
		}
	}

	cases := []struct {
		name string
		// victim builds the follower's state, snapshot the stream it is sent.
		victim   func(t *testing.T, s *pebblelog.Store) uint64 // returns the next raft index
		snapshot func(t *testing.T) []byte
		want     error // nil: installed
	}{
		{
			name: "forged longer history",
			victim: func(t *testing.T, s *pebblelog.Store) uint64 {
				applyN(t, s, 1, 3) // two acknowledged batches, four events
				sign(t, s, 4)
				return 3
			},
			snapshot: func(t *testing.T) []byte {
				f, _ := stores(t)
				applyForged(t, f, 1, 5) // four batches, eight events, index 4
				return snapshotBytes(t, f)
			},
			want: pebblelog.ErrSnapshotForks,
		},
		{
			name: "forged after the last signed checkpoint",
			victim: func(t *testing.T, s *pebblelog.Store) uint64 {
				applyN(t, s, 1, 200) // past a full leaf tile
				sign(t, s, 300)
				applyN(t, s, 200, 260) // acknowledged, not yet signed
				return 260
			},
			snapshot: func(t *testing.T) []byte {
				f, _ := stores(t)
				applyN(t, f, 1, 200)
				applyForged(t, f, 200, 400)
				return snapshotBytes(t, f)
			},
			want: pebblelog.ErrSnapshotForks,
		},
		{
			name: "fewer events at a higher index",
			victim: func(t *testing.T, s *pebblelog.Store) uint64 {
				applyN(t, s, 1, 20)
				return 20
			},
			snapshot: func(t *testing.T) []byte {
				f, _ := stores(t)
				applyN(t, f, 1, 5)
				if _, err := f.ApplyReplicated(&events.Batch{RecordedAt: time.Unix(1_700_000_100, 0)}, 100); err != nil {
					t.Fatal(err)
				}
				return snapshotBytes(t, f)
			},
			want: pebblelog.ErrSnapshotForks,
		},
		{
			// The honest tree, with the bytes of an acknowledged event
			// replaced: a consistency proof read from the tree alone would
			// hold, the events served would not be the ones it proves.
			name: "honest tree, forged acknowledged event",
			victim: func(t *testing.T, s *pebblelog.Store) uint64 {
				applyN(t, s, 1, 10)
				sign(t, s, 18)
				return 10
			},
			snapshot: func(t *testing.T) []byte {
				f, _ := stores(t)
				applyForged(t, f, 1, 3)
				return honestTreeForgedEvent(t, stores, 40, 3, rawAll(t, f)[3])
			},
			want: pebblelog.ErrSnapshotForks,
		},
		{
			// The same beyond the follower's head: not a fork of what it
			// holds, but a snapshot whose tree is not its events' (the
			// event falls in a full leaf tile, which must be its hashes).
			name: "honest tree, forged event beyond the head",
			victim: func(t *testing.T, s *pebblelog.Store) uint64 {
				applyN(t, s, 1, 10)
				return 10
			},
			snapshot: func(t *testing.T) []byte {
				f, _ := stores(t)
				applyForged(t, f, 1, 160)
				return honestTreeForgedEvent(t, stores, 300, 300, rawAll(t, f)[300])
			},
			want: pebblelog.ErrBadSnapshot,
		},
		{
			// A checkpoint this node signed of a history the snapshot does
			// not extend, below the newest one (a node forked before): the
			// head and the newest checkpoint agree with the snapshot, this
			// one does not.
			name: "an older signed checkpoint contradicts it",
			victim: func(t *testing.T, s *pebblelog.Store) uint64 {
				applyN(t, s, 1, 20)
				sign(t, s, 38)
				return 20
			},
			snapshot: nil, // set below: it needs the victim's folder
			want:     pebblelog.ErrSnapshotForks,
		},
		{
			name: "honest extension is installed",
			victim: func(t *testing.T, s *pebblelog.Store) uint64 {
				applyN(t, s, 1, 40)
				sign(t, s, 20)
				sign(t, s, 78)
				return 40
			},
			snapshot: func(t *testing.T) []byte {
				l, _ := stores(t)
				applyN(t, l, 1, 600)
				return snapshotBytes(t, l)
			},
		},
		{
			name:   "an empty store takes any snapshot of its ledger",
			victim: func(t *testing.T, s *pebblelog.Store) uint64 { return 1 },
			snapshot: func(t *testing.T) []byte {
				f, _ := stores(t)
				applyForged(t, f, 1, 5)
				return snapshotBytes(t, f)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := stores(t)
			next := tc.victim(t, s)
			var stream []byte
			if tc.snapshot != nil {
				stream = tc.snapshot(t)
			} else {
				// The victim's folder gets a signed checkpoint at size 6 of
				// a forged history, as a restore without the check left it.
				f, _ := stores(t)
				applyForged(t, f, 1, 4)
				cp, err := events.SignCheckpoint(events.Origin(testLedger), 6, f.Head().Root, signer)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if err := pebblelog.SetKey(dir, binary.BigEndian.AppendUint64([]byte{'c'}, 6), cp.Note); err != nil {
					t.Fatal(err)
				}
				s, err = pebblelog.Open(pebblelog.Config{Dir: dir, LedgerID: testLedger, Signers: []note.Signer{signer}, CheckpointInterval: -1})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				h, _ := stores(t)
				applyN(t, h, 1, 60)
				stream = snapshotBytes(t, h)
			}
			info, err := pebblelog.ReadSnapshotInfo(bytes.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			before := stateOf(t, s)

			err = s.Restore(bytes.NewReader(stream))

			if tc.want == nil {
				if err != nil {
					t.Fatalf("Restore: %v, want it installed", err)
				}
				if diff := cmp.Diff(info.Head, s.Head()); diff != "" {
					t.Fatalf("head after the install (-snapshot +store):\n%s", diff)
				}
				// The node's own checkpoints stay with it.
				after := stateOf(t, s)
				if diff := cmp.Diff(before.Checkpoints, after.Checkpoints); diff != "" {
					t.Fatalf("signed checkpoints changed (-before +after):\n%s", diff)
				}
				applyN(t, s, info.Applied+1, info.Applied+2)
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Restore: %v, want %v", err, tc.want)
			}
			if errors.Is(tc.want, pebblelog.ErrSnapshotForks) {
				// The sentence names both histories: sizes and roots.
				for _, part := range []string{
					fmt.Sprint(info.Head.Size), fmt.Sprintf("%x", info.Head.Root),
				} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("refusal %q does not name %s", err, part)
					}
				}
			}
			if diff := cmp.Diff(before, stateOf(t, s)); diff != "" {
				t.Fatalf("refused restore changed the store (-before +after):\n%s", diff)
			}
			if _, err := os.Stat(dir + ".restore"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the staged folder %s.restore is still there (%v)", dir, err)
			}
			// Still serving and applying.
			applyN(t, s, next, next+1)
			if got, want := s.Head().Size, before.Head.Size+2; got != want {
				t.Fatalf("head %d after one more batch, want %d", got, want)
			}
			if _, err := s.LatestCheckpoint(t.Context()); err != nil {
				t.Fatalf("signing after the refusal: %v", err)
			}
		})
	}
}
