package replicator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/internal/faultfs"
)

const snapDir = "/raft/snapshots"

var snapConf = raft.Configuration{Servers: []raft.Server{
	{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:7001"},
	{Suffrage: raft.Nonvoter, ID: "n2", Address: "127.0.0.1:7002"},
}}

// snapData is the state of a test snapshot at index: several buffers'
// worth, so that the state is written in more than one piece.
func snapData(index uint64) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "state at %d;", index), 40000)
}

// writeSnap writes one of the node's own snapshots (marked local, as
// FSMSnapshot.Persist marks its sink).
func writeSnap(t *testing.T, s *SnapshotStore, term, index uint64) string {
	t.Helper()
	return putSnap(t, s, term, index, true)
}

// putSnap writes a snapshot, the node's own (local) or one received from
// a leader.
func putSnap(t *testing.T, s *SnapshotStore, term, index uint64, local bool) string {
	t.Helper()
	sink, err := s.Create(1, index, term, snapConf, index-1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if local {
		markLocal(sink)
	}
	if _, err := sink.Write(snapData(index)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

// listed is what List says, reduced to what the test can predict.
type listed struct {
	Term, Index, ConfIndex, Size uint64
	Conf                         raft.Configuration
}

// checkSnaps lists s and opens every snapshot listed, checking its bytes.
func checkSnaps(s *SnapshotStore) ([]listed, error) {
	metas, err := s.List()
	if err != nil {
		return nil, err
	}
	var out []listed
	for _, m := range metas {
		om, rc, err := s.Open(m.ID)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", m.ID, err)
		}
		got, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", m.ID, err)
		}
		if !bytes.Equal(got, snapData(m.Index)) || om.ID != m.ID {
			return nil, fmt.Errorf("snapshot %s holds other bytes than were written", m.ID)
		}
		out = append(out, listed{Term: m.Term, Index: m.Index, ConfIndex: m.ConfigurationIndex, Size: uint64(m.Size), Conf: m.Configuration})
	}
	return out, nil
}

func want(termIndex ...uint64) []listed {
	var out []listed
	for i := 0; i < len(termIndex); i += 2 {
		idx := termIndex[i+1]
		out = append(out, listed{Term: termIndex[i], Index: idx, ConfIndex: idx - 1, Size: uint64(len(snapData(idx))), Conf: snapConf})
	}
	return out
}

// TestSnapshotStore_ListOpenRetain: snapshots are listed newest first (by
// term, then index), read back with their metadata, reaped beyond the
// retained count, and found again by a store opened on the same folder; a
// cancelled one never shows.
func TestSnapshotStore_ListOpenRetain(t *testing.T) {
	fs := vfs.NewMem()
	s, err := OpenSnapshotStore(snapDir, fs, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name        string
		term, index uint64
		want        []listed
	}{
		{"first", 1, 10, want(1, 10)},
		{"higher index", 1, 20, want(1, 20, 1, 10)},
		{"third reaps the oldest", 2, 15, want(2, 15, 1, 20)},
		{"same index, same term", 2, 15, want(2, 15, 2, 15)},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			writeSnap(t, s, st.term, st.index)
			got, err := checkSnaps(s)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(st.want, got); diff != "" {
				t.Fatalf("listed (-want +got):\n%s", diff)
			}
		})
	}
	sink, err := s.Create(1, 99, 9, snapConf, 98, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Cancel(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(2, 99, 9, snapConf, 98, nil); err == nil {
		t.Fatal("Create of snapshot version 2 succeeded")
	}
	reopened, err := OpenSnapshotStore(snapDir, fs, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkSnaps(reopened)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want(2, 15, 2, 15), got); diff != "" {
		t.Fatalf("listed after reopening (-want +got):\n%s", diff)
	}
	names, _ := fs.List(snapDir)
	if len(names) != 2 {
		t.Fatalf("the folder holds %q, want the two retained snapshots only", names)
	}
}

// TestSnapshotStore_Damage: a snapshot whose files do not read back as
// written is reported as damage naming the file, by List (metadata) or
// Open (contents), never skipped for an older one.
func TestSnapshotStore_Damage(t *testing.T) {
	cases := []struct {
		name   string
		damage func(fs vfs.FS, newest, older string) // the snapshots' folders
		file   string                                // the file named, relative to snapDir
		inOpen bool                                  // found by Open, not List
	}{
		{"meta.json cut short", func(fs vfs.FS, dir, older string) { truncate(fs, fs.PathJoin(dir, snapMetaFile), 20) }, "/meta.json", false},
		{"meta.json missing", func(fs vfs.FS, dir, older string) { _ = fs.Remove(fs.PathJoin(dir, snapMetaFile)) }, "/meta.json", false},
		{"meta.json of another snapshot", func(fs vfs.FS, dir, older string) {
			raw := readAll(fs, fs.PathJoin(older, snapMetaFile))
			writeAll(fs, fs.PathJoin(dir, snapMetaFile), raw)
		}, "/meta.json", false},
		{"state.bin cut short", func(fs vfs.FS, dir, older string) { truncate(fs, fs.PathJoin(dir, snapStateFile), 1000) }, "/state.bin", false},
		{"state.bin with a flipped byte", func(fs vfs.FS, dir, older string) {
			p := fs.PathJoin(dir, snapStateFile)
			raw := readAll(fs, p)
			raw[len(raw)/2] ^= 1
			writeAll(fs, p, raw)
		}, "/state.bin", true},
		{"a folder that is no snapshot", func(fs vfs.FS, dir, older string) { _ = fs.MkdirAll(fs.PathJoin(fs.PathDir(dir), "lost+found"), 0o700) }, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s, err := OpenSnapshotStore(snapDir, fs, 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			writeSnap(t, s, 1, 10)
			writeSnap(t, s, 1, 20)
			metas, err := s.List()
			if err != nil || len(metas) != 2 {
				t.Fatalf("List = %d snapshots, %v", len(metas), err)
			}
			newest, older := fs.PathJoin(snapDir, metas[0].ID), fs.PathJoin(snapDir, metas[1].ID)
			tc.damage(fs, newest, older)
			metas, err = s.List()
			if tc.inOpen {
				if err != nil {
					t.Fatalf("List: %v", err)
				}
				_, _, err = s.Open(metas[0].ID)
			}
			var de *inspect.DamageError
			if !errors.As(err, &de) || !errors.Is(err, events.ErrCorrupt) {
				t.Fatalf("got %v, want a DamageError", err)
			}
			wantFile := newest + tc.file
			if tc.file == "" {
				wantFile = fs.PathJoin(snapDir, "lost+found")
			}
			if de.File != wantFile {
				t.Fatalf("damage names %s, want %s", de.File, wantFile)
			}
		})
	}
}

func readAll(fs vfs.FS, path string) []byte {
	f, err := fs.Open(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	return b
}

func writeAll(fs vfs.FS, path string, b []byte) {
	if err := writeFileSynced(fs, path, b); err != nil {
		panic(err)
	}
}

func truncate(fs vfs.FS, path string, n int) { writeAll(fs, path, readAll(fs, path)[:n]) }

// TestSnapshotStore_PowerLoss cuts the power before every file-system
// operation of writing a snapshot (and reaping the oldest), keeping only
// what was synced (CrashClone): in every state, the store opens, lists
// either the snapshots it had or the new one with the newest older one,
// and every snapshot listed reads back whole. After Close returned, the
// new snapshot is there. Without the fsync of the .tmp folder before the
// rename (FileSnapshotStore does not do it), the folder can be in place
// and empty: List reports the damage.
func TestSnapshotStore_PowerLoss(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := OpenSnapshotStore(snapDir, mem, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeSnap(t, s, 1, 10)
	writeSnap(t, s, 1, 20)
	var clones []*vfs.MemFS
	var ops []string
	armed := false
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed {
			clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{}))
			ops = append(ops, fmt.Sprintf("%v %s", op.Kind, op.Path))
		}
		return nil
	})
	s, err = OpenSnapshotStore(snapDir, faultfs.Wrap(mem, inj), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	armed = true
	writeSnap(t, s, 2, 30)
	armed = false
	clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{}))
	ops = append(ops, "after Close returned")
	checkCrashPoints(t, snapDir, clones, ops, want(1, 20, 1, 10), want(2, 30, 1, 20), crashWords{
		undone: "the new snapshot is gone again", either: "the old or the new snapshots", missing: "the new snapshot is not there after Close returned"})
}

// crashWords say what a crash-point check found, in the words of its
// change.
type crashWords struct{ undone, either, missing string }

// checkCrashPoints opens the snapshot store of each crash clone, in the
// order of ops (what was about to happen when power was lost), and
// requires it to list before until some point and after from then on:
// the change is atomic, and durable once its call returned (the last
// clone).
func checkCrashPoints(t *testing.T, snapDir string, clones []*vfs.MemFS, ops []string, before, after []listed, w crashWords) {
	t.Helper()
	changed := false
	for i, c := range clones {
		cs, err := OpenSnapshotStore(snapDir, c, 2, nil)
		if err != nil {
			t.Fatalf("power lost before %s: open: %v", ops[i], err)
		}
		got, err := checkSnaps(cs)
		if err != nil {
			t.Fatalf("power lost before %s: %v", ops[i], err)
		}
		switch {
		case cmp.Equal(got, after):
			changed = true
		case changed:
			t.Fatalf("power lost before %s: %s: %+v", ops[i], w.undone, got)
		case !cmp.Equal(got, before):
			t.Fatalf("power lost before %s: listed %+v, want %s", ops[i], got, w.either)
		}
	}
	if !changed {
		t.Fatal(w.missing)
	}
	t.Logf("%d crash points", len(clones))
}

// scribbleFS's files overwrite what they were given to write once it is
// written, as vfs.File.Write may (Pebble's MemFS does in invariant builds,
// -race included).
type scribbleFS struct{ vfs.FS }

func (fs scribbleFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return scribbleFile{f}, err
}

type scribbleFile struct{ vfs.File }

func (f scribbleFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	for i := range p {
		p[i] ^= 0xff
	}
	return n, err
}

// TestSnapshotStore_FileMayModifyWrites: a file system whose writes modify
// the slice they are given neither changes the bytes the FSM hands the
// sink (an io.Writer must not) nor the CRC, which covers what was meant to
// be written. Found under -race, where MemFS does this: the sink hashed
// its buffer after writing it, and every Open failed its CRC check.
func TestSnapshotStore_FileMayModifyWrites(t *testing.T) {
	s, err := OpenSnapshotStore(snapDir, scribbleFS{vfs.NewMem()}, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := s.Create(1, 10, 1, snapConf, 9, nil)
	if err != nil {
		t.Fatal(err)
	}
	markLocal(sink)
	data := snapData(10) // larger than the sink's buffer: written in pieces
	for _, part := range [][]byte{data[:100], data[100:]} {
		if _, err := sink.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, snapData(10)) {
		t.Fatal("the sink modified the bytes it was given")
	}
	got, err := checkSnaps(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want(1, 10), got); diff != "" {
		t.Fatalf("listed (-want +got):\n%s", diff)
	}
}

// TestSnapshotStore_ReceivedHiddenUntilTaken: a snapshot received from a
// leader (a sink nothing marked local), named newer than every other, is
// in place but not listed, not counted by the reap and not told to stored
// until the ledger took it (accept); the FSM learns it is the one being
// restored once raft opened it (takeReceived); one the ledger refused is
// removed (discard) and was never listed. A store opened again (a restart) lists
// one that was neither taken nor removed: catchUpFromSnapshot checks it.
func TestSnapshotStore_ReceivedHiddenUntilTaken(t *testing.T) {
	fs := vfs.NewMem()
	s, err := OpenSnapshotStore(snapDir, fs, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	var told []uint64
	s.stored = func(m raft.SnapshotMeta) { told = append(told, m.Index) }
	writeSnap(t, s, 1, 10)
	writeSnap(t, s, 1, 20)
	folders := func() int {
		names, err := fs.List(snapDir)
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	listed := func(step string, want []listed) {
		t.Helper()
		got, err := checkSnaps(s)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: listed (-want +got):\n%s", step, diff)
		}
	}

	taken := putSnap(t, s, 5, 30, false)
	listed("received", want(1, 20, 1, 10))
	marked := func(step string, id string, want bool) {
		t.Helper()
		if got := s.received(id); got != want {
			t.Fatalf("%s: snapshot %s marked received: %v, want %v", step, id, got, want)
		}
	}
	marked("received", taken, true)
	own, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range own {
		marked("the node's own", m.ID, false)
	}
	if n := folders(); n != 3 {
		t.Fatalf("received: %d folders, want 3 (no reap before the ledger took it)", n)
	}
	if m, ok := s.takeReceived(); ok {
		t.Fatalf("takeReceived = %+v before raft opened it to restore; want none (listing opened only the listed ones)", m)
	}
	openToRestore(t, s, taken) // as raft's runFSM does, then calls the FSM's Restore
	m, ok := s.takeReceived()
	if !ok || m.ID != taken || m.Index != 30 || m.Term != 5 {
		t.Fatalf("takeReceived = %+v, %v; want snapshot %s (term 5, index 30)", m, ok, taken)
	}
	if _, ok := s.takeReceived(); ok {
		t.Fatal("takeReceived gave a snapshot twice")
	}
	listed("taken, not yet accepted", want(1, 20, 1, 10))
	if err := s.accept(m); err != nil {
		t.Fatal(err)
	}
	listed("accepted", want(5, 30, 1, 20))
	marked("accepted", taken, false)
	if n := folders(); n != 2 {
		t.Fatalf("accepted: %d folders, want 2 (the oldest reaped)", n)
	}

	refused := putSnap(t, s, 9, 40, false)
	openToRestore(t, s, refused)
	m, ok = s.takeReceived()
	if !ok || m.ID != refused {
		t.Fatalf("takeReceived = %+v, %v; want snapshot %s", m, ok, refused)
	}
	if err := s.discard(m.ID); err != nil {
		t.Fatal(err)
	}
	listed("refused", want(5, 30, 1, 20))
	if n := folders(); n != 2 {
		t.Fatalf("refused: %d folders, want 2", n)
	}
	if !cmp.Equal(told, []uint64{10, 20, 30}) {
		t.Fatalf("stored was told indexes %v, want 10, 20, 30 (never the refused 40)", told)
	}

	left := putSnap(t, s, 9, 50, false) // neither taken nor removed: a crash
	listed("received before a crash", want(5, 30, 1, 20))
	again, err := OpenSnapshotStore(snapDir, fs, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	s = again
	listed("after the restart", want(9, 50, 5, 30))
	// Still marked: catchUpFromSnapshot has the ledger check it.
	marked("after the restart", left, true)
	marked("after the restart", taken, false)
}

// TestSnapshotStore_VetBeforeInPlace: Close asks vet about a received
// snapshot (its name, and its state) before anything is in place; a
// refusal leaves nothing behind, not even the .tmp folder, and Close fails
// with it (raft answers the InstallSnapshot with it). The node's own
// snapshots are never vetted.
func TestSnapshotStore_VetBeforeInPlace(t *testing.T) {
	st, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir() + "/ledger", LedgerID: testLedger, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := &events.Batch{RecordedAt: time.Unix(1_700_000_000, 0).UTC(), Appends: []events.AppendRequest{{Streams: []events.StreamAppend{{
		Stream: "vet", Expected: events.ExpectAny, Events: []events.Proposed{{ID: uuid.New(), Type: "T", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}},
	}}}}}
	if _, err := st.ApplyReplicated(b, 7); err != nil {
		t.Fatal(err)
	}
	sn, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()
	var ledgerState bytes.Buffer
	if _, err := sn.WriteTo(&ledgerState); err != nil {
		t.Fatal(err)
	}

	errVet := errors.New("vet says no")
	type asked struct {
		Index, Term, Applied uint64
	}
	cases := []struct {
		name    string
		local   bool
		state   []byte
		verdict error
		want    error // Close's error
		asked   []asked
	}{
		{"allowed", false, ledgerState.Bytes(), nil, nil, []asked{{Index: 9, Term: 2, Applied: 7}}},
		{"refused", false, ledgerState.Bytes(), errVet, errVet, []asked{{Index: 9, Term: 2, Applied: 7}}},
		{"not a ledger snapshot", false, []byte("not a snapshot"), nil, pebblelog.ErrBadSnapshot, []asked{{Index: 9, Term: 2}}},
		{"the node's own", true, []byte("not a snapshot"), errVet, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s, err := OpenSnapshotStore(snapDir, fs, 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []asked
			// As vetReceived reads the state: its header.
			s.vet = func(m raft.SnapshotMeta, state io.Reader) error {
				info, err := pebblelog.ReadSnapshotInfo(state)
				got = append(got, asked{Index: m.Index, Term: m.Term, Applied: info.Applied})
				if err != nil {
					return err
				}
				return tc.verdict
			}
			sink, err := s.Create(1, 9, 2, snapConf, 8, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.local {
				markLocal(sink)
			}
			if _, err := sink.Write(tc.state); err != nil {
				t.Fatal(err)
			}
			err = sink.Close()
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Close: %v, want %v", err, tc.want)
			}
			if diff := cmp.Diff(tc.asked, got); diff != "" {
				t.Errorf("vet asked (-want +got):\n%s", diff)
			}
			names, err := fs.List(snapDir)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want != nil && len(names) != 0:
				t.Errorf("refused, the store holds %v; want nothing", names)
			case tc.want == nil && (len(names) != 1 || names[0] != sink.ID() || s.received(sink.ID()) == tc.local):
				t.Errorf("the store holds %v; want %s in place, marked received %v", names, sink.ID(), !tc.local)
			}
		})
	}
}

// openToRestore opens snapshot id and reads it whole, as raft does to
// restore it.
func openToRestore(t *testing.T, s *SnapshotStore, id string) {
	t.Helper()
	_, rc, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotStore_PowerLossDuringDiscard cuts the power before every
// file-system operation of removing a snapshot: in every state the store
// opens and lists either the snapshots it had or those without the
// removed one, each whole; after discard returned, it is gone.
func TestSnapshotStore_PowerLossDuringDiscard(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := OpenSnapshotStore(snapDir, mem, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeSnap(t, s, 1, 10)
	refused := putSnap(t, s, 9, 40, false)
	var clones []*vfs.MemFS
	var ops []string
	armed := false
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed {
			clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{}))
			ops = append(ops, fmt.Sprintf("%v %s", op.Kind, op.Path))
		}
		return nil
	})
	s, err = OpenSnapshotStore(snapDir, faultfs.Wrap(mem, inj), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	armed = true
	if err := s.discard(refused); err != nil {
		t.Fatal(err)
	}
	armed = false
	clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{}))
	ops = append(ops, "after discard returned")
	checkCrashPoints(t, snapDir, clones, ops, want(9, 40, 1, 10), want(1, 10), crashWords{
		undone: "the removed snapshot is back", either: "the snapshots with or without the removed one",
		missing: "the removed snapshot is still listed after discard returned"})
}
