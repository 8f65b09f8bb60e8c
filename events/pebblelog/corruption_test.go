package pebblelog_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/layout"
	"github.com/greffe/greffe/internal/faultfs"
)

// Damaged files and crashes in the middle of the store's own work (issue
// #13): a flipped byte in each kind of file, a zeroed tail, a power loss
// during the replay of the log and during a snapshot install. The store
// either keeps every acknowledged event or refuses to open naming the file
// and what is wrong: never a silent truncation, never a reused position.

// image is a store's folder after a crash, with what was acknowledged.
type image struct {
	fs    *vfs.MemFS
	cfg   pebblelog.Config
	acked map[uuid.UUID]uint64
	data  map[uuid.UUID][]byte
}

// writeImage appends n events with a lone writer (each append synced on
// its own), signing a checkpoint every 10, and leaves the folder as a
// crash would: power (only synced data) or a process crash (every write).
// With clean, the store is closed first (everything in tables).
func writeImage(t *testing.T, mode string, n int, small, power, clean bool) image {
	t.Helper()
	r := newRig(t, mode, errorfs.InjectorFunc(func(errorfs.Op) error { return nil }))
	r.cfg.FS = r.mem
	r.cfg.CheckpointInterval = -1
	r.cfg.CacheSize = 1 << 20
	if !small {
		r.cfg.MemTableSize, r.cfg.WALSegmentSize = 0, 0 // defaults: everything stays in the log
	}
	s, err := pebblelog.Open(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	im := image{cfg: r.cfg, acked: map[uuid.UUID]uint64{}, data: map[uuid.UUID][]byte{}}
	for i := range n {
		p := ev("I", fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("y", 300)))
		o, err := s.Append(t.Context(), one(fmt.Sprintf("im-%d", i%4), events.ExpectAny, p))
		if err != nil {
			t.Fatal(err)
		}
		im.acked[p.ID] = o.Events[0].Position
		im.data[p.ID] = p.Data
		if i%10 == 9 {
			if _, err := s.LatestCheckpoint(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if clean {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		im.fs = r.mem
		return im
	}
	pct := 100
	if power {
		pct = 0
	}
	im.fs = r.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: mathrand.New(mathrand.NewPCG(3, 3))})
	_ = s.Close()
	return im
}

// copyOf is an identical copy of the image's disk.
func (im image) copyOf() *vfs.MemFS {
	return im.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: mathrand.New(mathrand.NewPCG(1, 1))})
}

func (im image) open(t *testing.T, fs vfs.FS) (*pebblelog.Store, error) {
	t.Helper()
	cfg := im.cfg
	cfg.FS, cfg.OnFatal = fs, nil
	return pebblelog.Open(cfg)
}

// kept checks that s holds every acknowledged event, at its position, with
// its bytes; an event that does not read back must fail with a corruption
// error and fail the store, never come back different.
func (im image) kept(t *testing.T, s *pebblelog.Store) {
	t.Helper()
	if h := s.Head().Size; h < uint64(len(im.acked)) {
		t.Fatalf("head %d below the %d acknowledged events", h, len(im.acked))
	}
	damaged := 0
	for id, pos := range im.acked {
		e, err := s.EventByID(t.Context(), id)
		switch {
		case err != nil && isCorruption(err):
			// Every block is checksummed: what reads back is what was
			// written. One damaged block is enough to check the store's
			// answer to it (each read of it costs Pebble a search for the
			// flipped bit, about a second for a 32 KiB block).
			damaged++
		case err != nil:
			t.Fatalf("acknowledged event %s at %d: %v", id, pos, err)
		case e.Position != pos || !bytes.Equal(e.Data, im.data[id]):
			t.Fatalf("acknowledged event %s at %d came back at %d as %s", id, pos, e.Position, e.Data)
		}
		if damaged > 0 {
			break
		}
	}
	if damaged > 0 && s.Failure() == nil {
		t.Errorf("%d events did not read back and the store still accepts writes", damaged)
	}
}

func isCorruption(err error) bool { return errors.Is(err, events.ErrCorrupt) }

func readAll(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeAll(t *testing.T, fs vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// folderFiles maps every file under dir (sub-folders included) to its
// bytes, Pebble's LOCK file left out.
func folderFiles(t *testing.T, fs vfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		fi, err := fs.Stat(p)
		switch {
		case err != nil:
			t.Fatal(err)
		case fi.IsDir():
			for k, v := range folderFiles(t, fs, p) {
				out[k] = v
			}
		case n != "LOCK":
			out[p] = string(readAll(t, fs, p))
		}
	}
	return out
}

// files lists the store's files whose name ends with suffix, in order.
func files(t *testing.T, fs vfs.FS, dir, suffix string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, suffix) && !strings.HasPrefix(n, "free-") {
			out = append(out, fs.PathJoin(dir, n))
		}
	}
	slices.Sort(out)
	return out
}

// dataRecords returns the offsets of the data records of a segment of the
// store's log, read as docs/FORMAT.md lays them out: a 16-byte magic, then
// records with a 32-byte header (length at 4, seq at 16; seq 0 for the
// sync and segment records).
func dataRecords(b []byte) []int {
	var offs []int
	for off := 16; off+32 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[off+4:]))
		if binary.LittleEndian.Uint64(b[off+16:]) != 0 {
			offs = append(offs, off)
		}
		off += 32 + n
	}
	return offs
}

// TestStore_DamagedLogRecordRefusesToOpen is the black-box form of issue
// #13's second defect, on the store's own log: events acknowledged one by
// one, a process crash, one flipped byte inside the first, a middle or the
// last record of the newest segment. The store reopened at a head below
// the acknowledged one and gave new events positions already acknowledged
// (and signed); now it refuses to open and names the segment.
func TestStore_DamagedLogRecordRefusesToOpen(t *testing.T) {
	for _, which := range []string{"first", "middle", "last"} {
		t.Run(which, func(t *testing.T) {
			im := writeImage(t, pebblelog.WALGreffe, 83, false, false, false)
			segs := files(t, im.fs, "/ledger/greffe-wal", ".wal")
			seg := segs[len(segs)-1]
			b := readAll(t, im.fs, seg)
			offs := dataRecords(b)
			at := map[string]int{"first": offs[0], "middle": offs[len(offs)/2], "last": offs[len(offs)-1]}[which]
			b[at+32+5] ^= 0x01
			writeAll(t, im.fs, seg, b)
			before := folderFiles(t, im.fs, "/ledger")
			s, err := im.open(t, im.fs)
			if err == nil {
				defer s.Close()
				t.Fatalf("the store opened at head %d (%d acknowledged) with a damaged record", s.Head().Size, len(im.acked))
			}
			if !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", at)) {
				t.Errorf("open: %v; want a corruption error naming %s at offset %d", err, seg, at)
			}
			var de *inspect.DamageError
			if !errors.As(err, &de) || de.File != seg || de.Offset != int64(at) {
				t.Errorf("open: %#v; want a *inspect.DamageError of %s at offset %d", de, seg, at)
			}
			// Refused before Pebble opened the folder read-write (which
			// writes a new MANIFEST, OPTIONS and WAL file and removes the
			// old ones): the folder is as the damage left it.
			if d := cmp.Diff(before, folderFiles(t, im.fs, "/ledger")); d != "" {
				t.Errorf("the refused open changed the folder (-before +after):\n%s", d)
			}
		})
	}
}

// TestStore_PebbleLogDamage runs the same damage against Pebble's WAL
// (Config.WAL = WALPebble): Pebble reads ahead for a record whose header
// says the log was synced past the damage, as the store's log does, so a
// flipped byte before the last records refuses to open. Its last records
// have nothing after them that says so: there a flipped byte is taken for
// a torn write, and acknowledged events are dropped without a word. That
// is one reason the store keeps its own log by default (docs/FORMAT.md).
func TestStore_PebbleLogDamage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		at      func(size int) int
		refused bool
	}{
		{"early", func(int) int { return 600 }, true},
		{"middle", func(size int) int { return size / 2 }, true},
		{"last record", func(size int) int { return size - 40 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := writeImage(t, pebblelog.WALPebble, 83, false, false, false)
			logs := files(t, im.fs, "/ledger", ".log")
			var name string
			for _, l := range logs {
				if fi, err := im.fs.Stat(l); err == nil && fi.Size() > 0 {
					name = l
				}
			}
			b := readAll(t, im.fs, name)
			b[tc.at(len(b))] ^= 0x01
			writeAll(t, im.fs, name, b)
			s, err := im.open(t, im.fs)
			if tc.refused {
				if err == nil {
					s.Close()
					t.Fatal("Pebble opened its WAL with a damaged record before synced ones")
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer s.Close()
			if got := s.Head().Size; got >= uint64(len(im.acked)) {
				t.Fatalf("head %d: Pebble kept every acknowledged event; this test documents that it does not", got)
			}
			t.Logf("Pebble's WAL reopened at head %d of %d acknowledged events, without an error", s.Head().Size, len(im.acked))
		})
	}
}

// TestStore_DamagedTablesAndManifest flips a byte in each table, blob file
// and the MANIFEST of a store closed cleanly (everything in tables), on
// both logs. A damaged MANIFEST refuses to open, naming it, and nothing in
// the folder is touched (Pebble would have deleted the tables it no longer
// saw). A damaged table or blob file is found when it is read: the read
// fails with a corruption error naming it, the store stops writing, and no
// event ever comes back different.
func TestStore_DamagedTablesAndManifest(t *testing.T) {
	if raceEnabled {
		t.Skip("one goroutine reading damaged files: run without -race (CI runs it so first)")
	}
	for _, mode := range walModes {
		im := writeImage(t, mode, 1500, true, false, true)
		kinds := map[string][]string{
			"table":    files(t, im.fs, "/ledger", ".sst"),
			"blob":     files(t, im.fs, "/ledger", ".blob"),
			"manifest": nil,
		}
		names, _ := im.fs.List("/ledger")
		for _, n := range names {
			if strings.HasPrefix(n, "MANIFEST-") {
				kinds["manifest"] = append(kinds["manifest"], "/ledger/"+n)
			}
		}
		for kind, list := range kinds {
			if len(list) == 0 {
				t.Fatalf("%s: no %s file in the store", mode, kind)
			}
			// The first, a middle and the last file of each kind: enough
			// to hit event bytes, index keys, the state and the tree. Not
			// the last blob file: its blocks are the largest, and each
			// read of a damaged block costs Pebble a search for the
			// flipped bit, quadratic in the block's size (seconds).
			list = slices.Compact([]string{list[0], list[len(list)/2], list[len(list)-1]})
			if kind == "blob" {
				list = slices.Compact([]string{list[0], list[len(list)/2]})
			}
			for _, name := range list {
				for _, frac := range []float64{0.1, 0.5, 0.9} {
					t.Run(fmt.Sprintf("%s/%s/%s@%.0f%%", mode, kind, name[len("/ledger/"):], frac*100), func(t *testing.T) {
						fs := im.copyOf()
						b := readAll(t, fs, name)
						b[int(float64(len(b))*frac)] ^= 0x40
						writeAll(t, fs, name, b)
						before, _ := fs.List("/ledger")
						s, err := im.open(t, fs)
						if kind == "manifest" {
							if err == nil {
								s.Close()
								t.Fatalf("the store opened with a damaged MANIFEST")
							}
							after, _ := fs.List("/ledger")
							slices.Sort(before)
							slices.Sort(after)
							if !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), "MANIFEST") {
								t.Errorf("open: %v; want a corruption error naming the MANIFEST", err)
							}
							if diff := cmp.Diff(before, after); diff != "" {
								t.Errorf("the refused open changed the folder (-before +after):\n%s", diff)
							}
							return
						}
						if err != nil {
							if !isCorruption(err) {
								t.Fatalf("open: %v; want success or a corruption error", err)
							}
							return // the table held the store's state: refused
						}
						defer s.Close()
						im.kept(t, s)
					})
				}
			}
		}
	}
}

// TestStore_ZeroedTail: after a power loss some file systems leave zeros
// where unsynced data was to go. Nothing acknowledged was there: the store
// opens with every acknowledged event.
func TestStore_ZeroedTail(t *testing.T) {
	for _, mode := range walModes {
		t.Run(mode, func(t *testing.T) {
			im := writeImage(t, mode, 60, false, true, false)
			var name string
			if mode == pebblelog.WALGreffe {
				segs := files(t, im.fs, "/ledger/greffe-wal", ".wal")
				name = segs[len(segs)-1]
			} else {
				for _, l := range files(t, im.fs, "/ledger", ".log") {
					if fi, _ := im.fs.Stat(l); fi.Size() > 0 {
						name = l
					}
				}
			}
			writeAll(t, im.fs, name, append(readAll(t, im.fs, name), make([]byte, 8192)...))
			s, err := im.open(t, im.fs)
			if err != nil {
				t.Fatalf("open after a zeroed tail: %v", err)
			}
			defer s.Close()
			im.kept(t, s)
		})
	}
}

// crashAt simulates a power loss at the n-th write operation: it clones the
// disk keeping only synced data, then freezes the goroutine that was about
// to write, as if the machine had stopped there.
type crashAt struct {
	faultfs.CloneGate // cuts outside Pebble MemFS's Link, ReuseForWrite, Lock
	mem               *vfs.MemFS
	n                 int64
	count             atomic.Int64
	armed             atomic.Bool
	clone             atomic.Pointer[vfs.MemFS]
	crashed           chan struct{}
}

func newCrashAt(mem *vfs.MemFS, n int64) *crashAt {
	return &crashAt{mem: mem, n: n, crashed: make(chan struct{})}
}

func (c *crashAt) MaybeError(op errorfs.Op) error {
	if !c.armed.Load() || !slices.Contains(writeKinds, op.Kind) {
		return nil
	}
	if c.count.Add(1) == c.n {
		c.clone.Store(c.CrashClone(c.mem, vfs.CrashCloneCfg{}))
		close(c.crashed)
		select {} // the machine stopped
	}
	return nil
}

func (c *crashAt) String() string { return fmt.Sprintf("crash at write #%d", c.n) }

// run runs fn until it returns or the crash point is reached; it reports
// whether the crash happened.
func (c *crashAt) run(fn func()) bool {
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
		return false
	case <-c.crashed:
		return true
	}
}

// TestStore_CrashDuringReplay: a store stopped by a crash reopens by
// replaying its log into Pebble, flushing and dropping the segments; a power
// loss at any write of that work leaves a folder that still opens with
// every acknowledged event.
func TestStore_CrashDuringReplay(t *testing.T) {
	if raceEnabled {
		t.Skip("a reopen after each crash point, one goroutine at a time: run without -race (CI runs it so first)")
	}
	for _, mode := range walModes {
		t.Run(mode, func(t *testing.T) {
			im := writeImage(t, mode, 120, false, false, false)
			for n := int64(1); ; n++ {
				mem := im.copyOf()
				c := newCrashAt(mem, n)
				c.armed.Store(true)
				var s *pebblelog.Store
				var err error
				if !c.run(func() { s, err = im.open(t, faultfs.Wrap(mem, c)) }) {
					c.armed.Store(false)
					if err != nil {
						t.Fatalf("open without a crash: %v", err)
					}
					_ = s.Close()
					t.Logf("%d write points in the reopen", n-1)
					if n < 4 {
						t.Fatalf("only %d write points: the reopen did not replay anything", n-1)
					}
					return
				}
				r, err := im.open(t, c.clone.Load())
				if err != nil {
					t.Fatalf("power loss at write %d of the replay: reopen: %v", n, err)
				}
				im.kept(t, r)
				_ = r.Close()
			}
		})
	}
}

// TestStore_CrashDuringSnapshotInstall: a follower installs a leader's
// snapshot (Restore) and the power goes at any write of it; after Recover
// the follower holds either its old state or the snapshot's, whole. Its
// old state may have lost a tail of unsynced batches: replicated batches
// are applied without a sync, raft's log being their write-ahead log (raft
// replays them); what is left must still be a prefix at its applied index.
func TestStore_CrashDuringSnapshotInstall(t *testing.T) {
	leader := newRig(t, pebblelog.WALGreffe, errorfs.InjectorFunc(func(errorfs.Op) error { return nil }))
	leader.cfg.FS, leader.cfg.CheckpointInterval = leader.mem, -1
	ls, err := pebblelog.Open(leader.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	applyN(t, ls, 1, 300)
	snap := snapshotBytes(t, ls)
	want := rawAll(t, ls)
	for n := int64(1); ; n++ {
		mem := vfs.NewCrashableMem()
		c := newCrashAt(mem, n)
		cfg := leader.cfg
		cfg.FS, cfg.OnFatal = faultfs.Wrap(mem, c), nil
		f, err := pebblelog.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		applyN(t, f, 1, 20)
		old := rawAll(t, f)
		c.armed.Store(true)
		var rerr error
		if !c.run(func() { rerr = f.Restore(bytes.NewReader(snap)) }) {
			c.armed.Store(false)
			if rerr != nil {
				t.Fatalf("restore without a crash: %v", rerr)
			}
			if diff := cmp.Diff(want, rawAll(t, f)); diff != "" {
				t.Fatal("the restored follower differs from the leader")
			}
			_ = f.Close()
			t.Logf("%d write points in a snapshot install", n-1)
			return
		}
		clone := c.clone.Load()
		if err := pebblelog.Recover("/ledger", clone); err != nil {
			t.Fatalf("power loss at write %d of the install: recover: %v", n, err)
		}
		cfg.FS = clone
		r, err := pebblelog.Open(cfg)
		if err != nil {
			t.Fatalf("power loss at write %d of the install: reopen: %v", n, err)
		}
		got := rawAll(t, r)
		whole := slices.EqualFunc(got, want, bytes.Equal)
		prefix := len(got) <= len(old) && slices.EqualFunc(got, old[:len(got)], bytes.Equal)
		if !whole && !prefix {
			t.Fatalf("power loss at write %d of the install: the follower holds %d events, neither a prefix of its own %d nor the snapshot's %d", n, len(got), len(old), len(want))
		}
		if applied := r.AppliedIndex(); applied != uint64(len(got)/2) {
			t.Fatalf("power loss at write %d of the install: applied index %d for %d events (2 per index)", n, applied, len(got))
		}
		_ = r.Close()
	}
}

// TestStore_CheckpointAheadOfTheHeadRefusesToOpen: a signed checkpoint is
// synced after the events it covers, so a store whose newest stored
// checkpoint covers more events than it holds has lost acknowledged events
// (and would give a signed position to a new event). Open refuses it.
func TestStore_CheckpointAheadOfTheHeadRefusesToOpen(t *testing.T) {
	dir := t.TempDir() + "/ledger"
	s, _ := openStore(t, dir)
	for i := range 5 {
		if _, err := s.Append(t.Context(), one("c", events.ExpectAny, ev("C", fmt.Sprintf(`{"i":%d}`, i)))); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := s.LatestCheckpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The note of a checkpoint of 9 events, stored as this one was: the
	// store's own signature over a size its events no longer reach.
	skey, _, _ := note.GenerateKey(rand.Reader, events.Origin(testLedger))
	signer, _ := note.NewSigner(skey)
	ahead, err := events.SignCheckpoint(events.Origin(testLedger), 9, cp.Root, signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := pebblelog.SetKey(dir, layout.CheckpointKey(9), ahead.Note); err != nil {
		t.Fatal(err)
	}
	_, err = pebblelog.Open(pebblelog.Config{Dir: dir, LedgerID: testLedger, CheckpointInterval: -1})
	if !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), "covers 9 events, the store holds 5") {
		t.Fatalf("open with a checkpoint ahead of the head: %v; want a corruption error saying so", err)
	}
}
