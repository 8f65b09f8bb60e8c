package pebblelog_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/internal/faultfs"
)

// Issue #20, finding 4: a failed restore lost the ledger. When reopening
// the restored store after the swap failed, the process stopped with the
// good store in ledger.old, and the next start's Recover deleted it; and
// Recover ran before the folder's lock was taken, so a second node started
// on a live folder deleted the first's in-progress restore and snapshots.

// reopenFault fails every file open in the store's folder from the moment
// the restored store is renamed into it until that folder is renamed away:
// the restored store does not open, the old one does once it is back.
type reopenFault struct {
	dir     string
	swapped atomic.Bool
	fired   atomic.Int64
}

func (f *reopenFault) MaybeError(op errorfs.Op) error {
	switch {
	case op.Kind == errorfs.OpRename && op.Path == f.dir+".restore":
		f.swapped.Store(true)
	case op.Kind == errorfs.OpRename && op.Path == f.dir:
		f.swapped.Store(false)
	case op.Kind == errorfs.OpOpen && f.swapped.Load() && strings.HasPrefix(op.Path, f.dir+"/"):
		f.fired.Add(1)
		return syscall.EIO
	}
	return nil
}

func (f *reopenFault) String() string { return "reopen fault" }

// memStoreConfig is a store of the test ledger in /ledger on fs.
func memStoreConfig(fs vfs.FS) pebblelog.Config {
	return pebblelog.Config{Dir: "/ledger", LedgerID: testLedger, FS: fs, CheckpointInterval: -1}
}

// leaderSnapshot is the snapshot of an honest store of indexes [1, to),
// with the store's state, to compare a restored store with.
func leaderSnapshot(t *testing.T, to uint64) ([]byte, storeState) {
	t.Helper()
	l, _ := openStore(t, filepath.Join(t.TempDir(), "ledger"))
	applyN(t, l, 1, to)
	return snapshotBytes(t, l), stateOf(t, l)
}

func memExists(fs vfs.FS, path string) bool {
	_, err := fs.Stat(path)
	return err == nil
}

// TestStore_RestoreReopenFails: the restored store is in place and does
// not open. Before, the store called OnFatal (the process stopped) with the
// old ledger left in ledger.old, for the next start's Recover to delete.
// Now the old ledger is moved back and reopened: Restore fails, the store
// goes on serving and applying what it held, and a restart finds it.
func TestStore_RestoreReopenFails(t *testing.T) {
	mem := vfs.NewCrashableMem()
	inj := &reopenFault{dir: "/ledger"}
	cfg := memStoreConfig(faultfs.Wrap(mem, inj))
	fatal := make(chan error, 1)
	cfg.OnFatal = func(err error) {
		fatal <- err
		select {} // the process would have ended here
	}
	s, err := pebblelog.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	applyN(t, s, 1, 30)
	before := stateOf(t, s)
	stream, _ := leaderSnapshot(t, 300)

	done := make(chan error, 1)
	go func() { done <- s.Restore(bytes.NewReader(stream)) }()
	select {
	case err = <-done:
	case err := <-fatal:
		t.Fatalf("the store stopped the process (OnFatal: %v) with the ledger in %s.old, which the next start deleted", err, cfg.Dir)
	case <-time.After(time.Minute):
		t.Fatal("Restore did not return")
	}
	defer s.Close()
	if inj.fired.Load() == 0 {
		t.Fatal("the reopen fault never fired: the test tests nothing")
	}
	if err == nil || errors.Is(err, pebblelog.ErrSnapshotForks) || errors.Is(err, pebblelog.ErrBadSnapshot) {
		t.Fatalf("Restore: %v, want the reopen's error", err)
	}
	if f := s.Failure(); f != nil {
		t.Fatalf("the store failed: %v", f)
	}
	if diff := cmp.Diff(before, stateOf(t, s)); diff != "" {
		t.Fatalf("the store after the failed swap (-before +after):\n%s", diff)
	}
	if memExists(mem, "/ledger.old") {
		t.Fatal("/ledger.old still there: the old ledger was not moved back")
	}
	applyN(t, s, 30, 31)
	want := stateOf(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The next start.
	r, err := pebblelog.Open(memStoreConfig(mem))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close()
	if diff := cmp.Diff(want, stateOf(t, r)); diff != "" {
		t.Fatalf("the store after a restart (-before +after):\n%s", diff)
	}
}

// crashPoints clones the disk (keeping only what was synced) before every
// operation that changes what a power loss leaves: each clone is the disk
// of a crash at that point. then, when set, injects after.
type crashPoints struct {
	gate  faultfs.CloneGate
	mem   *vfs.MemFS
	then  errorfs.Injector
	armed atomic.Bool
	// stagingSeen is set at the first operation inside the staged folder.
	stagingSeen atomic.Bool

	mu     sync.Mutex
	clones []crashClone
}

type crashClone struct {
	before string // the operation the power was cut before
	fs     *vfs.MemFS
}

func (c *crashPoints) MaybeError(op errorfs.Op) error {
	if c.armed.Load() && !c.staging(op) {
		switch op.Kind {
		case errorfs.OpCreate, errorfs.OpLink, errorfs.OpRemove, errorfs.OpRemoveAll, errorfs.OpRename,
			errorfs.OpMkdirAll, errorfs.OpReuseForWrite, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			clone := c.gate.CrashClone(c.mem, vfs.CrashCloneCfg{})
			c.mu.Lock()
			c.clones = append(c.clones, crashClone{before: fmt.Sprintf("op %d %s", op.Kind, op.Path), fs: clone})
			c.mu.Unlock()
		}
	}
	if c.then != nil {
		return c.then.MaybeError(op)
	}
	return nil
}

// staging reports an operation of Pebble building the staged store, past
// the first one: a crash anywhere there leaves an incomplete staged folder
// beside the untouched store, one state, and cutting the power at each of
// its dozens of file operations made the test slow (90 s under -race)
// without reaching another state. The folder's own renames, removals and
// syncs are always crash points.
func (c *crashPoints) staging(op errorfs.Op) bool {
	if !strings.HasPrefix(op.Path, "/ledger.restore/") {
		return false
	}
	return !c.stagingSeen.CompareAndSwap(false, true)
}

func (c *crashPoints) Hold(op errorfs.Op) func() { return c.gate.Hold(op) }

func (c *crashPoints) String() string { return "crash points" }

// damageManifest overwrites the MANIFEST of the store in dir on fs, if
// there is one: that store no longer opens.
func damageManifest(t *testing.T, fs vfs.FS, dir string) bool {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		return false
	}
	damaged := false
	for _, n := range names {
		if !strings.HasPrefix(n, "MANIFEST-") {
			continue
		}
		f, err := fs.Create(fs.PathJoin(dir, n), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(bytes.Repeat([]byte{0xa5}, 4096)); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			t.Fatal(err)
		}
		damaged = true
	}
	return damaged
}

// TestStore_RestoreCrashPoints cuts the power before every operation of a
// Restore that changes what the disk holds (and after it), in a swap that
// works and in one whose reopen fails and is rolled back. At every point
// the next start must open either the old ledger or the snapshot's, whole,
// with nothing left beside it. And where the old ledger is still on the
// disk beside the new one, a new one that turns out damaged must give the
// old one back: the only good copy is never deleted.
func TestStore_RestoreCrashPoints(t *testing.T) {
	if raceEnabled {
		t.Skip("two reopens after each crash point, one goroutine at a time: run without -race (CI runs it so first)")
	}
	for _, tc := range []struct {
		name        string
		reopenFails bool
	}{{"swap", false}, {"swap whose reopen fails", true}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			points := &crashPoints{mem: mem}
			if tc.reopenFails {
				points.then = &reopenFault{dir: "/ledger"}
			}
			s, err := pebblelog.Open(memStoreConfig(faultfs.Wrap(mem, points)))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			applyN(t, s, 1, 30)
			// Replicated batches are not synced (raft's log is their
			// write-ahead log): a flush makes them what a crash keeps.
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			oldState := stateOf(t, s)
			stream, newState := leaderSnapshot(t, 140)  // past a full leaf tile
			newState.Checkpoints = oldState.Checkpoints // node-local: they stay

			points.armed.Store(true)
			err = s.Restore(bytes.NewReader(stream))
			points.armed.Store(false)
			if tc.reopenFails != (err != nil) {
				t.Fatalf("Restore: %v", err)
			}
			points.clones = append(points.clones, crashClone{before: "nothing (after Restore returned)", fs: mem.CrashClone(vfs.CrashCloneCfg{})})
			if len(points.clones) < 10 {
				t.Fatalf("only %d crash points: the test tests nothing", len(points.clones))
			}

			outcomes := map[string]int{}
			sawNew := false
			for i, c := range points.clones {
				// A copy of the disk with the snapshot's store damaged,
				// wherever the old ledger is still beside it.
				damaged := c.fs.CrashClone(vfs.CrashCloneCfg{})
				oldThere := memExists(damaged, "/ledger.old")
				r, err := pebblelog.Open(memStoreConfig(c.fs))
				if err != nil {
					t.Fatalf("crash %d (before %s): the next start fails: %v", i, c.before, err)
				}
				got := stateOf(t, r)
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				switch {
				case cmp.Equal(oldState, got):
					outcomes["old"]++
					if sawNew && !tc.reopenFails {
						t.Errorf("crash %d (before %s): the old ledger is back after an earlier crash point had the new one", i, c.before)
					}
				case cmp.Equal(newState, got):
					outcomes["new"]++
					sawNew = true
				default:
					t.Fatalf("crash %d (before %s): the store holds neither ledger: head %+v", i, c.before, got.Head)
				}
				for _, left := range []string{"/ledger.old", "/ledger.restore", "/ledger.snapshots"} {
					if memExists(c.fs, left) {
						t.Errorf("crash %d (before %s): %s left after the start", i, c.before, left)
					}
				}
				if !oldThere {
					continue
				}
				hit := damageManifest(t, damaged, "/ledger.restore")
				if memExists(damaged, "/ledger") && damageManifest(t, damaged, "/ledger") {
					hit = true
				}
				if !hit {
					continue
				}
				r, err = pebblelog.Open(memStoreConfig(damaged))
				if err != nil {
					t.Fatalf("crash %d (before %s), the snapshot's store damaged: the next start fails, the old ledger is lost: %v", i, c.before, err)
				}
				got = stateOf(t, r)
				_ = r.Close()
				if diff := cmp.Diff(oldState, got); diff != "" {
					t.Fatalf("crash %d (before %s), the snapshot's store damaged: not the old ledger (-old +got):\n%s", i, c.before, diff)
				}
				outcomes["damaged new, old back"]++
			}
			t.Logf("%d crash points: %v", len(points.clones), outcomes)
			if outcomes["old"] == 0 || !tc.reopenFails && outcomes["new"] == 0 || outcomes["damaged new, old back"] == 0 {
				t.Fatalf("outcomes %v: some state of the swap was never reached", outcomes)
			}
		})
	}
}

// storeFolders builds two closed stores of the test ledger, an old one
// (indexes 1-9) and a new one (1-29), to lay out as a crash left them.
func storeFolders(t *testing.T) (oldDir, newDir string, oldState, newState storeState) {
	t.Helper()
	root := t.TempDir()
	build := func(name string, to uint64) (string, storeState) {
		dir := filepath.Join(root, name)
		s, _ := openStore(t, dir)
		applyN(t, s, 1, to)
		st := stateOf(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return dir, st
	}
	oldDir, oldState = build("old", 10)
	newDir, newState = build("new", 30)
	return oldDir, newDir, oldState, newState
}

// TestOpen_SettlesInterruptedRestore lays out, with real stores on disk,
// each state a crash or a failed swap can leave, and opens the store.
// Before, Recover removed ledger.old whenever ledger existed, opened or
// not, and ran outside the folder's lock.
func TestOpen_SettlesInterruptedRestore(t *testing.T) {
	oldDir, newDir, oldState, newState := storeFolders(t)
	type folder struct {
		suffix string // "", ".restore", ".old", ...
		from   string // "old", "new", "broken new", "empty"
	}
	cases := []struct {
		name    string
		present []folder
		want    string   // "old", "new", or "" for a refusal
		left    []string // suffixes that must remain beside the store
	}{
		{"nothing to settle", []folder{{"", "old"}}, "old", nil},
		{"incomplete restore dropped", []folder{{"", "old"}, {".restore", "new"}}, "old", nil},
		{"crash between the renames: the swap is finished", []folder{{".restore", "new"}, {".old", "old"}}, "new", nil},
		{"crash after the store was moved aside: put back", []folder{{".old", "old"}}, "old", nil},
		{"swap done, old ledger not yet removed", []folder{{"", "new"}, {".old", "old"}}, "new", nil},
		{"restored store does not open: old ledger put back", []folder{{"", "broken new"}, {".old", "old"}}, "old", []string{".failed-restore"}},
		{"restored store does not verify (an event changed): old ledger put back", []folder{{"", "tampered new"}, {".old", "old"}}, "old", []string{".failed-restore"}},
		{"staged store does not open: old ledger put back", []folder{{".restore", "broken new"}, {".old", "old"}}, "old", []string{".failed-restore"}},
		{"snapshot leftovers removed", []folder{{"", "old"}, {".snapshots", "empty"}}, "old", nil},
		{"removal of the old ledger interrupted", []folder{{"", "new"}, {".old.reap", "old"}}, "new", nil},
		{"only a staged store: refused, nothing deleted", []folder{{".restore", "new"}}, "", []string{".restore"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ledger")
			for _, f := range tc.present {
				dst := dir + f.suffix
				switch f.from {
				case "empty":
					if err := os.MkdirAll(filepath.Join(dst, "0123"), 0o700); err != nil {
						t.Fatal(err)
					}
					continue
				case "old":
					err := os.CopyFS(dst, os.DirFS(oldDir))
					if err != nil {
						t.Fatal(err)
					}
				default:
					if err := os.CopyFS(dst, os.DirFS(newDir)); err != nil {
						t.Fatal(err)
					}
				}
				switch f.from {
				case "broken new":
					if !damageManifest(t, vfs.Default, dst) {
						t.Fatal("no MANIFEST to damage")
					}
				case "tampered new":
					// Opens (the state is intact), but event 3 is not the
					// one its tree holds.
					if err := pebblelog.SetKey(dst, eventKey(3), newState.Raw[4]); err != nil {
						t.Fatal(err)
					}
				}
			}
			s, err := pebblelog.Open(pebblelog.Config{Dir: dir, LedgerID: testLedger, CheckpointInterval: -1})
			if tc.want == "" {
				if err == nil {
					s.Close()
					t.Fatal("Open succeeded, want a refusal")
				}
				if !strings.Contains(err.Error(), dir+".restore") {
					t.Errorf("refusal %q does not name %s.restore", err, dir)
				}
			} else {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				got := stateOf(t, s)
				_ = s.Close()
				want := map[string]storeState{"old": oldState, "new": newState}[tc.want]
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("the store opened is not the %s ledger (-want +got):\n%s", tc.want, diff)
				}
			}
			for _, suffix := range []string{".restore", ".old", ".snapshots", ".old.reap", ".failed-restore"} {
				_, err := os.Stat(dir + suffix)
				kept := slices.Contains(tc.left, suffix)
				if kept && err != nil {
					t.Errorf("%s was removed: %v", suffix, err)
				}
				if !kept && err == nil {
					t.Errorf("%s left behind", suffix)
				}
			}
		})
	}
}

// TestOpen_SecondOpenerDeletesNothing: a store is live, with a snapshot
// checkpoint held for raft and a restore being streamed in. A second
// opener of the same folder (another node started on it) must fail on the
// folder's lock before it touches anything. Before, Recover, which a node
// runs before opening the store, deleted both folders.
func TestOpen_SecondOpenerDeletesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledger")
	s, _ := openStore(t, dir)
	applyN(t, s, 1, 50)
	before := stateOf(t, s)
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()

	stream, _ := leaderSnapshot(t, 300)
	pr, pw := io.Pipe()
	restored := make(chan error, 1)
	go func() { restored <- s.Restore(pr) }()
	// The header first (magic, length, header); the second write returns
	// once Restore reads records, which it does into the staged folder it
	// opened.
	const magic = len("greffe-ledger-snapshot/1\n")
	hdr := magic + 2 + int(binary.BigEndian.Uint16(stream[magic:]))
	if _, err := pw.Write(stream[:hdr]); err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write(stream[hdr : len(stream)/2]); err != nil {
		t.Fatal(err)
	}
	inProgress := func() []string {
		var out []string
		for _, p := range []string{dir + ".restore", dir + ".snapshots"} {
			if names, err := os.ReadDir(p); err == nil && len(names) > 0 {
				out = append(out, p)
			}
		}
		return out
	}
	want := []string{dir + ".restore", dir + ".snapshots"}
	if diff := cmp.Diff(want, inProgress()); diff != "" {
		t.Fatalf("in-progress folders before the second opener (-want +got):\n%s", diff)
	}

	if _, err := pebblelog.Open(pebblelog.Config{Dir: dir, LedgerID: testLedger, CheckpointInterval: -1}); !errors.Is(err, inspect.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if err := pebblelog.Recover(dir, nil); !errors.Is(err, inspect.ErrLocked) {
		t.Errorf("Recover on a live folder: %v, want ErrLocked", err)
	}
	if diff := cmp.Diff(want, inProgress()); diff != "" {
		t.Fatalf("in-progress folders after the second opener (-want +got):\n%s", diff)
	}
	// The held snapshot still streams whole.
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatalf("the held snapshot after the second opener: %v", err)
	}
	// The restore goes on to the end and is installed.
	if _, err := pw.Write(stream[len(stream)/2:]); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	if err := <-restored; err != nil {
		t.Fatalf("the restore in progress: %v", err)
	}
	if s.Head().Size <= before.Head.Size {
		t.Fatalf("head %d after the restore, was %d", s.Head().Size, before.Head.Size)
	}
}
