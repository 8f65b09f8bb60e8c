package pebblelog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// applyN applies replicated batches at raft indexes [from, to), each one
// append of two events to one of three streams. The batch of an index is
// the same on every store (ids derive from it), as raft would deliver it.
func applyN(t *testing.T, s *pebblelog.Store, from, to uint64) {
	t.Helper()
	for idx := from; idx < to; idx++ {
		e1, e2 := ev("Snap", fmt.Sprintf(`{"i":%d}`, idx)), ev("Snap", `{}`)
		e1.ID = uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d/1", idx))
		e2.ID = uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d/2", idx))
		b := &events.Batch{RecordedAt: time.Unix(1_700_000_000+int64(idx), 0).UTC(), Appends: []events.AppendRequest{
			one(fmt.Sprintf("snap-%d", idx%3), events.ExpectAny, e1, e2),
		}}
		if _, err := s.ApplyReplicated(b, idx); err != nil {
			t.Fatalf("apply index %d: %v", idx, err)
		}
	}
}

func snapshotBytes(t *testing.T, s *pebblelog.Store) []byte {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func rawAll(t *testing.T, s *pebblelog.Store) [][]byte {
	t.Helper()
	raws, err := s.ReadRaw(t.Context(), 0, s.Head().Size)
	if err != nil {
		t.Fatal(err)
	}
	return raws
}

// TestStore_SnapshotRestore installs a leader's snapshot on a follower that
// is behind: the follower ends with identical bytes and head, keeps its own
// signed checkpoints, refuses re-applied indexes, goes on applying, and a
// subscription that was running across the restore sees every event once.
func TestStore_SnapshotRestore(t *testing.T) {
	leader, _ := openStore(t, filepath.Join(t.TempDir(), "ledger"))
	followerDir := filepath.Join(t.TempDir(), "ledger")
	follower, _ := openStore(t, followerDir)
	applyN(t, leader, 1, 600) // more than two full leaf tiles
	applyN(t, follower, 1, 40)
	ownCP, err := follower.LatestCheckpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	// A subscriber from position 0, running across the restore.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	want := leader.Head().Size + 2
	got := make(chan []uint64, 1)
	go func() {
		var seen []uint64
		_ = follower.Subscribe(ctx, 0, events.Filter{}, func(e events.Event) error {
			seen = append(seen, e.Position)
			if uint64(len(seen)) == want {
				got <- seen
				return errors.New("done")
			}
			return nil
		})
	}()

	if err := follower.Restore(bytes.NewReader(snapshotBytes(t, leader))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(leader.Head(), follower.Head()); diff != "" {
		t.Fatalf("head after restore (-leader +follower):\n%s", diff)
	}
	if follower.AppliedIndex() != 599 {
		t.Fatalf("applied index %d after restore, want 599", follower.AppliedIndex())
	}
	if !cmp.Equal(rawAll(t, leader), rawAll(t, follower)) {
		t.Fatal("restored event bytes differ from the leader's")
	}
	// The follower's own checkpoint survived; the leader's did not travel.
	var sizes []uint64
	if err := follower.StoredCheckpoints(t.Context(), func(size uint64, note []byte) error {
		sizes = append(sizes, size)
		if size == ownCP.Size && !bytes.Equal(note, ownCP.Note) {
			t.Errorf("checkpoint %d changed across the restore", size)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{ownCP.Size}, sizes); diff != "" {
		t.Fatalf("stored checkpoints (-want +got):\n%s", diff)
	}
	if _, err := follower.ApplyReplicated(&events.Batch{}, 599); !errors.Is(err, pebblelog.ErrAlreadyApplied) {
		t.Fatalf("re-applied index 599: %v, want ErrAlreadyApplied", err)
	}
	applyN(t, leader, 600, 601)
	applyN(t, follower, 600, 601)
	if diff := cmp.Diff(leader.Head(), follower.Head()); diff != "" {
		t.Fatalf("head after one more batch (-leader +follower):\n%s", diff)
	}
	select {
	case seen := <-got:
		for i, p := range seen {
			if p != uint64(i) {
				t.Fatalf("subscription delivered position %d at index %d: gap or duplicate", p, i)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscription did not reach the head after the restore")
	}
	// Reopening finds the restored store.
	if err := follower.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, _ := openStore(t, followerDir)
	if diff := cmp.Diff(leader.Head(), reopened.Head()); diff != "" {
		t.Fatalf("head after reopen (-leader +follower):\n%s", diff)
	}
}

// TestStore_RestoreRefusals covers the snapshots Restore must not apply.
// Each case leaves the store as it was and serving.
func TestStore_RestoreRefusals(t *testing.T) {
	src, _ := openStore(t, filepath.Join(t.TempDir(), "ledger"))
	applyN(t, src, 1, 50)
	good := snapshotBytes(t, src)
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40

	other, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(t.TempDir(), "ledger"), LedgerID: "00000000-0000-4000-8000-000000000002", CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	applyN(t, other, 1, 3)

	cases := []struct {
		name      string
		stream    []byte
		applied   uint64 // the target's state before the restore
		want      error  // nil: accepted without change
		wantHeadN uint64
	}{
		{"flipped byte", flipped, 10, pebblelog.ErrBadSnapshot, 18},
		{"truncated", good[:len(good)-7], 10, pebblelog.ErrBadSnapshot, 18},
		{"trailing hash missing", good[:len(good)-32], 10, pebblelog.ErrBadSnapshot, 18},
		{"not a snapshot", []byte("hello"), 10, pebblelog.ErrBadSnapshot, 18},
		{"another ledger", snapshotBytes(t, other), 10, pebblelog.ErrIncompatible, 18},
		{"not newer than the store", good, 60, nil, 118},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst, _ := openStore(t, filepath.Join(t.TempDir(), "ledger"))
			applyN(t, dst, 1, tc.applied)
			before := dst.Head()
			err := dst.Restore(bytes.NewReader(tc.stream))
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Restore: %v, want %v", err, tc.want)
			}
			if diff := cmp.Diff(before, dst.Head()); diff != "" {
				t.Fatalf("head changed (-before +after):\n%s", diff)
			}
			if dst.Head().Size != tc.wantHeadN {
				t.Fatalf("head %d, want %d", dst.Head().Size, tc.wantHeadN)
			}
			applyN(t, dst, tc.applied, tc.applied+1) // still applying
		})
	}
}

// TestRecover settles each state a crash can leave during a Restore, with
// the deprecated Recover (Open settles the folder itself, and only Open,
// having opened the store, removes the one a restore replaced: before
// issue #20 Recover removed it whether or not the store in place opened).
func TestRecover(t *testing.T) {
	cases := []struct {
		name    string
		present []string // among "", ".restore", ".old", ".snapshots"
		want    string   // which folder ends up as the store: its marker
		kept    []string // folders Recover leaves beside it
	}{
		{"nothing to do", []string{""}, "", nil},
		{"incomplete restore dropped", []string{"", ".restore"}, "", nil},
		{"complete restore finished", []string{".restore", ".old"}, ".restore", []string{".old"}},
		{"old store put back", []string{".old"}, ".old", nil},
		{"leftovers removed, the replaced store kept for Open", []string{"", ".old", ".snapshots"}, "", []string{".old"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ledger")
			for _, suffix := range tc.present {
				if err := os.MkdirAll(dir+suffix, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir+suffix, "marker"), []byte(suffix), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := pebblelog.Recover(dir, nil); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "marker"))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("store folder came from %q, want %q", b, tc.want)
			}
			for _, suffix := range []string{".restore", ".old", ".snapshots"} {
				_, err := os.Stat(dir + suffix)
				switch kept := slices.Contains(tc.kept, suffix); {
				case kept && err != nil:
					t.Errorf("%s removed: %v", suffix, err)
				case !kept && err == nil:
					t.Errorf("%s left behind", suffix)
				}
			}
		})
	}
}

// TestStore_SnapshotRestoreFlushed is TestStore_SnapshotRestore's transfer
// with data below the memtable: flushed sstables whose event bytes live in
// separated blob files must travel in the snapshot and read back the same.
func TestStore_SnapshotRestoreFlushed(t *testing.T) {
	leader, _ := openStore(t, filepath.Join(t.TempDir(), "ledger"))
	follower, _ := openStore(t, filepath.Join(t.TempDir(), "ledger"))
	applyN(t, leader, 1, 400)
	if err := leader.Flush(); err != nil {
		t.Fatal(err)
	}
	applyN(t, leader, 400, 700)
	if err := leader.Flush(); err != nil {
		t.Fatal(err)
	}
	applyN(t, leader, 700, 750) // and a memtable tail
	if err := follower.Restore(bytes.NewReader(snapshotBytes(t, leader))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(leader.Head(), follower.Head()); diff != "" {
		t.Fatalf("head after restore (-leader +follower):\n%s", diff)
	}
	if !cmp.Equal(rawAll(t, leader), rawAll(t, follower)) {
		t.Fatal("restored event bytes differ from the leader's")
	}
	evs, err := follower.ReadStream(t.Context(), "snap-1", events.ReadOptions{From: 100, Limit: 3})
	if err != nil || len(evs) != 3 {
		t.Fatalf("stream read after restore: %d events, %v", len(evs), err)
	}
}
