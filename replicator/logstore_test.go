package replicator

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

func entry(i uint64) *raft.Log {
	l := &raft.Log{Index: i, Term: 1 + i/10, Type: raft.LogCommand, Data: fmt.Appendf(nil, "entry %d", i),
		AppendedAt: time.Unix(1_700_000_000, int64(i)).UTC()}
	if i%3 == 0 {
		l.Extensions = []byte{byte(i)}
	}
	return l
}

// TestLogStore_Log stores, reads, truncates at both ends and reopens,
// checking the bounds and the entries raft would see after each step.
func TestLogStore_Log(t *testing.T) {
	type bounds struct{ First, Last uint64 }
	cases := []struct {
		name    string
		store   [2]uint64   // [lo, hi] stored first
		deletes [][2]uint64 // then deleted, inclusive
		want    bounds
	}{
		{"empty", [2]uint64{1, 0}, nil, bounds{0, 0}},
		{"stored", [2]uint64{1, 50}, nil, bounds{1, 50}},
		{"compacted prefix", [2]uint64{1, 50}, [][2]uint64{{1, 20}}, bounds{21, 50}},
		{"truncated suffix", [2]uint64{1, 50}, [][2]uint64{{40, 50}}, bounds{1, 39}},
		{"both ends", [2]uint64{5, 50}, [][2]uint64{{5, 9}, {45, 50}}, bounds{10, 44}},
		{"everything", [2]uint64{1, 50}, [][2]uint64{{1, 50}}, bounds{0, 0}},
		{"after a snapshot gap", [2]uint64{100, 120}, nil, bounds{100, 120}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "log")
			s, err := OpenLogStore(dir, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var batch []*raft.Log
			for i := tc.store[0]; i <= tc.store[1]; i++ {
				batch = append(batch, entry(i))
			}
			if err := s.StoreLogs(batch); err != nil {
				t.Fatal(err)
			}
			for _, d := range tc.deletes {
				if err := s.DeleteRange(d[0], d[1]); err != nil {
					t.Fatal(err)
				}
			}
			check := func(s *LogStore) {
				t.Helper()
				first, _ := s.FirstIndex()
				last, _ := s.LastIndex()
				if diff := cmp.Diff(tc.want, bounds{first, last}); diff != "" {
					t.Fatalf("bounds (-want +got):\n%s", diff)
				}
				for i := tc.store[0]; i <= tc.store[1]; i++ {
					var got raft.Log
					err := s.GetLog(i, &got)
					inside := tc.want.First != 0 && i >= tc.want.First && i <= tc.want.Last
					switch {
					case inside && err != nil:
						t.Fatalf("GetLog(%d): %v", i, err)
					case inside:
						if diff := cmp.Diff(entry(i), &got); diff != "" {
							t.Fatalf("entry %d (-want +got):\n%s", i, diff)
						}
					case !errors.Is(err, raft.ErrLogNotFound):
						t.Fatalf("GetLog(%d) of a deleted entry: %v, want ErrLogNotFound", i, err)
					}
				}
			}
			check(s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = OpenLogStore(dir, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			check(s)
		})
	}
}

// TestLogStore_Stable covers the stable store's contract for missing keys,
// round trips and a damaged number.
func TestLogStore_Stable(t *testing.T) {
	s, err := OpenLogStore(filepath.Join(t.TempDir(), "log"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Get([]byte("missing")); err != nil || v == nil || len(v) != 0 {
		t.Fatalf("Get(missing) = %q, %v; want an empty slice and no error", v, err)
	}
	if v, err := s.GetUint64([]byte("missing")); err != nil || v != 0 {
		t.Fatalf("GetUint64(missing) = %d, %v; want 0 and no error", v, err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	v, err := s.Get([]byte("LastVoteCand"))
	if err != nil || string(v) != "n2" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	n, err := s.GetUint64([]byte("CurrentTerm"))
	if err != nil || n != 7 {
		t.Fatalf("GetUint64 = %d, %v", n, err)
	}
	if _, err := s.GetUint64([]byte("LastVoteCand")); !errors.Is(err, errBadEntry) {
		t.Fatalf("GetUint64 of a 2-byte value: %v, want errBadEntry", err)
	}
	// Log keys and stable keys never collide.
	if err := s.StoreLogs([]*raft.Log{entry(1)}); err != nil {
		t.Fatal(err)
	}
	if last, _ := s.LastIndex(); last != 1 {
		t.Fatalf("last index %d, want 1", last)
	}
}

// TestLogStore_DamagedEntry: a stored entry that does not decode is
// reported, never returned as data.
func TestLogStore_DamagedEntry(t *testing.T) {
	s, err := OpenLogStore(filepath.Join(t.TempDir(), "log"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.db.Set(logKey(3), []byte{9, 9}, nil); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(3, &l); !errors.Is(err, errBadEntry) {
		t.Fatalf("GetLog of a damaged entry: %v, want errBadEntry", err)
	}
}

// TestLogStore_PowerLoss: after each write returns, a power loss that
// keeps only synced data (CrashClone) leaves exactly the log and stable
// values raft was told are stored: raft counts an entry as persisted, and
// a vote as cast, when the call returns.
func TestLogStore_PowerLoss(t *testing.T) {
	type state struct {
		First, Last uint64
		Term        uint64
	}
	mem := vfs.NewCrashableMem()
	s, err := OpenLogStore("/raft/log", mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	span := func(lo, hi uint64) []*raft.Log {
		var out []*raft.Log
		for i := lo; i <= hi; i++ {
			out = append(out, entry(i))
		}
		return out
	}
	steps := []struct {
		name string
		do   func() error
		want state
	}{
		{"append", func() error { return s.StoreLogs(span(1, 50)) }, state{1, 50, 0}},
		{"vote", func() error { return s.SetUint64([]byte("CurrentTerm"), 3) }, state{1, 50, 3}},
		{"compact after a snapshot", func() error { return s.DeleteRange(1, 20) }, state{21, 50, 3}},
		{"append one", func() error { return s.StoreLog(entry(51)) }, state{21, 51, 3}},
		{"truncate a conflicting suffix", func() error { return s.DeleteRange(45, 51) }, state{21, 44, 3}},
		{"append after the conflict", func() error { return s.StoreLogs(span(45, 47)) }, state{21, 47, 3}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.do(); err != nil {
				t.Fatal(err)
			}
			c, err := OpenLogStore("/raft/log", mem.CrashClone(vfs.CrashCloneCfg{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			first, _ := c.FirstIndex()
			last, _ := c.LastIndex()
			term, err := c.GetUint64([]byte("CurrentTerm"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(st.want, state{first, last, term}); diff != "" {
				t.Fatalf("after a power loss (-want +got):\n%s", diff)
			}
			for i := first; i <= last; i++ {
				var got raft.Log
				if err := c.GetLog(i, &got); err != nil {
					t.Fatalf("GetLog(%d): %v", i, err)
				}
				if diff := cmp.Diff(entry(i), &got); diff != "" {
					t.Fatalf("entry %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// walSyncFault fails the next sync of raft's Pebble write-ahead log once
// armed, and nothing after that one.
type walSyncFault struct {
	armed, fired atomic.Bool
}

func (f *walSyncFault) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if !strings.HasSuffix(op.Path, ".log") || !f.armed.Load() || !f.fired.CompareAndSwap(false, true) {
		return nil
	}
	return errorfs.ErrInjected
}

func (f *walSyncFault) String() string { return "raft WAL sync fault" }

// TestLogStore_SyncErrorIsFinal: a failed sync of raft's log ends the
// node (Pebble calls Fatalf on a failed commit, and the store's logger
// panics, naming the raft log and the error), so raft never counts an
// entry as persisted on a disk that lost a write, and nothing is retried
// on it (fsyncgate: a sync that succeeds after a failed one proves nothing
// about the pages the failed one dropped). The entries stored before the
// fault survive a power loss.
func TestLogStore_SyncErrorIsFinal(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fault := &walSyncFault{}
	s, err := OpenLogStore("/raft/log", errorfs.Wrap(mem, fault), nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(lo, hi uint64) []*raft.Log {
		var out []*raft.Log
		for i := lo; i <= hi; i++ {
			out = append(out, entry(i))
		}
		return out
	}
	if err := s.StoreLogs(batch(1, 10)); err != nil {
		t.Fatal(err)
	}
	fault.armed.Store(true)
	stored, ended := func() (stored bool, ended string) {
		defer func() {
			if r := recover(); r != nil {
				ended = fmt.Sprint(r)
			}
		}()
		return s.StoreLogs(batch(11, 12)) == nil, ""
	}()
	if !fault.fired.Load() {
		t.Fatal("the fault never fired")
	}
	if stored || !strings.Contains(ended, "raft log") || !strings.Contains(ended, "injected") {
		t.Fatalf("StoreLogs with a failed sync: stored %v, ended with %q; want the node ended, naming the raft log and the error", stored, ended)
	}
	// The node is gone (the panic); what its disk kept is what a restart
	// reads. s is not closed: Pebble's commit pipeline is broken.
	c, err := OpenLogStore("/raft/log", mem.CrashClone(vfs.CrashCloneCfg{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if first, _ := c.FirstIndex(); first != 1 {
		t.Fatalf("after a power loss, FirstIndex %d, want 1", first)
	}
	for i := uint64(1); i <= 10; i++ {
		var got raft.Log
		if err := c.GetLog(i, &got); err != nil {
			t.Fatalf("after a power loss, GetLog(%d): %v", i, err)
		}
		if diff := cmp.Diff(entry(i), &got); diff != "" {
			t.Fatalf("after a power loss, entry %d (-want +got):\n%s", i, diff)
		}
	}
}
