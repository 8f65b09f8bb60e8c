package pebblelog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// copyTree copies the regular files of src into dst (a backup copy is
// hard links: the test opens a copy of it, as a restore would).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(filepath.Join(dst, rel))
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStore_BackupUnderLoad takes backups while writers append: each copy
// holds a consistent prefix (its recorded head is the live ledger's root at
// that size), comes with a checkpoint signed at exactly its size, keeps the
// node-local checkpoints, and opens as a store that continues the log.
// Release removes the copy, and RemoveBackupLeftovers what a crash left.
func TestStore_BackupUnderLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledger")
	s, verifier := openStore(t, dir)
	if _, err := s.Append(t.Context(), one("first", events.ExpectAny, ev("T", `{}`))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LatestCheckpoint(t.Context()); err != nil { // a node-local key the copy must keep
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				_, err := s.Append(ctx, one(fmt.Sprintf("load-%d", w), events.ExpectAny, ev("T", fmt.Sprintf(`{"i":%d}`, i)), ev("T", `{}`)))
				if err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var copies []*pebblelog.Backup
	for range 3 {
		// Wait for the writers to add something between two backups.
		h := s.Head().Size
		if err := s.Subscribe(t.Context(), h+50, events.Filter{}, func(events.Event) error { return errDone }); !errors.Is(err, errDone) {
			t.Fatal(err)
		}
		b, err := s.Backup(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		copies = append(copies, b)
	}
	stop()
	wg.Wait()

	for i, b := range copies {
		info := b.Info()
		if info.Head.Size == 0 || info.Head.Size > s.Head().Size || info.LedgerID != testLedger || info.Origin != s.Origin() {
			t.Fatalf("backup %d: %+v (live head %d)", i, info, s.Head().Size)
		}
		cp, _, err := events.OpenCheckpoint(info.Checkpoint.Note, s.Origin(), verifier)
		if err != nil || cp.Size != info.Head.Size || cp.Root != info.Head.Root {
			t.Fatalf("backup %d: checkpoint %+v %v, copy head %+v", i, cp, err, info.Head)
		}
		live, err := s.CheckpointAt(t.Context(), info.Head.Size)
		if err != nil || live.Root != info.Head.Root {
			t.Fatalf("backup %d: the live ledger's root at %d differs from the copy's: %v", i, info.Head.Size, err)
		}
		st, err := inspect.ReadLedgerState(b.Dir(), nil)
		if err != nil || st.Head != info.Head || st.Format != layout.StoreFormat {
			t.Fatalf("backup %d: state %+v %v, info %+v", i, st, err, info.Head)
		}

		restored := filepath.Join(t.TempDir(), "ledger")
		copyTree(t, b.Dir(), restored)
		b.Release()
		if _, err := os.Stat(b.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("backup %d: Release left %s: %v", i, b.Dir(), err)
		}
		r, _ := openStore(t, restored)
		if diff := cmp.Diff(info.Head, r.Head()); diff != "" {
			t.Fatalf("backup %d: restored head (-want +got):\n%s", i, diff)
		}
		var sizes []uint64
		if err := r.StoredCheckpoints(t.Context(), func(size uint64, _ []byte) error { sizes = append(sizes, size); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(sizes) == 0 || sizes[len(sizes)-1] > info.Head.Size {
			t.Fatalf("backup %d: stored checkpoints %v, copy size %d", i, sizes, info.Head.Size)
		}
		o, err := r.Append(t.Context(), one("after-restore", events.ExpectNoStream, ev("T", `{}`)))
		if err != nil || o.Events[0].Position != info.Head.Size {
			t.Fatalf("backup %d: append after restore: %+v %v", i, o, err)
		}
	}

	leftover, err := s.Backup(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pebblelog.RemoveBackupLeftovers(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(leftover.Dir())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("RemoveBackupLeftovers left %s: %v", filepath.Dir(leftover.Dir()), err)
	}
}

// TestStore_BackupNeedsASigner: a backup comes with a signed checkpoint,
// so a store without a signer refuses before copying anything.
func TestStore_BackupNeedsASigner(t *testing.T) {
	s, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Backup(t.Context()); !errors.Is(err, pebblelog.ErrNoSigner) {
		t.Fatalf("backup without a signer: %v", err)
	}
}

// TestStore_SeedAppliedIndex: a ledger that seeds a new cluster records
// the raft index of its first snapshot; it survives a reopen, entries up
// to it are recognised as applied, and it never goes backwards.
func TestStore_SeedAppliedIndex(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	if _, err := s.Append(t.Context(), one("local", events.ExpectAny, ev("T", `{}`), ev("T", `{}`))); err != nil {
		t.Fatal(err)
	}
	head := s.Head()
	if err := s.SeedAppliedIndex(7); err != nil {
		t.Fatal(err)
	}
	if err := s.SeedAppliedIndex(3); !errors.Is(err, pebblelog.ErrInvalidConfig) {
		t.Fatalf("seed below the applied index: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openStore(t, dir)
	if got := s.AppliedIndex(); got != 7 || s.Head() != head {
		t.Fatalf("after reopen: applied %d head %+v, want 7 and %+v", got, s.Head(), head)
	}
	if _, err := s.ApplyReplicated(&events.Batch{Appends: []events.AppendRequest{one("r", events.ExpectAny, ev("T", `{}`))}}, 7); !errors.Is(err, pebblelog.ErrAlreadyApplied) {
		t.Fatalf("index 7 after seeding at 7: %v", err)
	}
	applyN(t, s, 8, 9)
	if got := s.Head().Size; got != head.Size+2 {
		t.Fatalf("head %d after applying index 8, want %d", got, head.Size+2)
	}
}
