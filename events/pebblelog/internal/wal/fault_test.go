package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
)

// errseq models how Linux reports a writeback error: once, to the first
// fsync of the file that completes after the error happened (the kernel's
// errseq_t); every later fsync returns 0 although the pages are gone. The
// first fsync of a segment is held until release is closed, to order it
// against others; it learns its outcome when it starts (decideFirst) or
// when it returns.
type errseq struct {
	decideFirst bool
	mu          sync.Mutex
	happened    bool // a writeback error occurred
	reported    bool // and one fsync returned it
	calls       int
	entered     chan struct{} // closed when the held fsync starts
	release     chan struct{} // the held fsync returns once this is closed
}

func newErrseq() *errseq {
	return &errseq{entered: make(chan struct{}), release: make(chan struct{})}
}

func (e *errseq) writebackFails() {
	e.mu.Lock()
	e.happened = true
	e.mu.Unlock()
}

func (e *errseq) MaybeError(op errorfs.Op) error {
	if op.Kind != errorfs.OpFileSyncData || !strings.HasSuffix(op.Path, suffix) {
		return nil
	}
	e.mu.Lock()
	e.calls++
	first := e.calls == 1
	e.mu.Unlock()
	if !first {
		return e.outcome()
	}
	var err error
	if e.decideFirst {
		err = e.outcome()
	}
	close(e.entered)
	<-e.release
	if !e.decideFirst {
		err = e.outcome()
	}
	return err
}

func (e *errseq) outcome() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.happened && !e.reported {
		e.reported = true
		return syscall.EIO
	}
	return nil
}

func (e *errseq) String() string { return "errseq" }

// waitBriefly waits for done, or gives up after a moment: in the fixed log
// the goroutine behind done waits for the held fsync (fileMu), so it cannot
// finish before release; in the log this test was written against, it did.
func waitBriefly(done <-chan struct{}) {
	select {
	case <-done:
	case <-time.After(500 * time.Millisecond):
	}
}

// async runs fn on a goroutine; wait returns its error, done is closed when
// it returned.
func async(fn func() error) (done chan struct{}, wait func() error) {
	done = make(chan struct{})
	var err error
	go func() { err = fn(); close(done) }()
	return done, func() error { <-done; return err }
}

// TestLog_RotationSyncErrorIsNotAcknowledged is the first defect of issue
// #13: SyncTo checked the failure before its fsync and not after, and a
// segment rotation (Append, under mu) fsynced the same file outside syncMu.
// The writeback error happens while SyncTo's fsync is in flight; the
// rotation's fsync reports it, SyncTo's returns 0, and SyncTo acknowledged
// records that may be lost.
func TestLog_RotationSyncErrorIsNotAcknowledged(t *testing.T) {
	es := newErrseq()
	o := Options{FS: errorfs.Wrap(vfs.NewMem(), es), Dir: "/wal", SegmentSize: 256}
	l, _ := collect(t, o, 0)
	defer l.Close()
	_, endA, err := l.Append([]byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	_, synced := async(func() error { return l.SyncTo(endA) })
	<-es.entered
	es.writebackFails() // while SyncTo's fsync is in flight
	rotating, rotated := async(func() error {
		_, _, err := l.Append(bytes.Repeat([]byte("b"), 300)) // past the segment size: rotation
		return err
	})
	waitBriefly(rotating)
	close(es.release)
	if err := synced(); err == nil {
		t.Fatal("SyncTo returned nil although a writeback error happened during its fsync")
	}
	if err := rotated(); !errors.Is(err, ErrFailed) && !errors.Is(err, syscall.EIO) {
		t.Errorf("the rotating Append: %v, want a failure", err)
	}
	if _, _, err := l.Append([]byte("c")); !errors.Is(err, ErrFailed) {
		t.Errorf("Append after the failure: %v, want ErrFailed", err)
	}
	if err := l.SyncTo(endA); !errors.Is(err, ErrFailed) {
		t.Errorf("SyncTo after the failure: %v, want ErrFailed", err)
	}
}

// TestLog_FailedSyncThenRotationIsNotAcknowledged is the reverse order:
// SyncTo's fsync reported the error and, before SyncTo recorded it, a
// rotation's fsync of the same file returned 0 (the error was reported
// once) and advanced the synced position; a later SyncTo then took the
// fast path and acknowledged records whose writeback had failed.
func TestLog_FailedSyncThenRotationIsNotAcknowledged(t *testing.T) {
	es := newErrseq()
	es.decideFirst = true
	o := Options{FS: errorfs.Wrap(vfs.NewMem(), es), Dir: "/wal", SegmentSize: 256}
	l, _ := collect(t, o, 0)
	defer l.Close()
	_, endA, err := l.Append([]byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	_, endB, err := l.Append([]byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	es.writebackFails()
	_, synced := async(func() error { return l.SyncTo(endB) })
	<-es.entered // SyncTo's fsync has its EIO and has not returned yet
	rotating, rotated := async(func() error {
		_, _, err := l.Append(bytes.Repeat([]byte("c"), 300))
		return err
	})
	waitBriefly(rotating)
	close(es.release)
	if err := synced(); err == nil {
		t.Error("SyncTo(b) returned nil although its fsync failed")
	}
	_ = rotated()
	if err := l.SyncTo(endA); err == nil {
		t.Error("SyncTo(a) returned nil after a sync failed: the fast path acknowledged records whose writeback failed")
	}
}

// syncedLog appends n records, syncing after each one as the store does for
// a lone writer, and returns the file system as a crash at that moment
// leaves it: process (the page cache survives: every write is there) or
// power (only what was synced).
func syncedLog(t *testing.T, n int, power bool) vfs.FS {
	t.Helper()
	fs := vfs.NewCrashableMem()
	o := Options{FS: fs, Dir: "/wal"}
	l, _ := collect(t, o, 0)
	for i := 1; i <= n; i++ {
		_, end, err := l.Append(payload(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SyncTo(end); err != nil {
			t.Fatal(err)
		}
	}
	pct := 100
	if power {
		pct = 0
	}
	c := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(1, 1))})
	_ = l.Close()
	return c
}

// recordOffsets returns the offset of every data record of a segment.
func recordOffsets(t *testing.T, b []byte) []int {
	t.Helper()
	var offs []int
	for off := magicSize; ; {
		r, ok := parseRecord(b, off, 1, headerSize)
		if !ok {
			return offs
		}
		if r.seq != 0 {
			offs = append(offs, off)
		}
		off = r.end
	}
}

func flipByte(t *testing.T, fs vfs.FS, name string, at int) {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x10
	w, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(w.Sync(), w.Close()); err != nil {
		t.Fatal(err)
	}
}

func segmentBytes(t *testing.T, fs vfs.FS, name string) []byte {
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

// TestLog_DamageIsNotATornTail is the second defect of issue #13: a flipped
// byte inside a synced record ended the replay there, as a torn write
// would, and the store reopened with the records after it gone (and gave
// their positions to new events). Now Open refuses, naming the segment and
// the offset, whenever a later record says the damaged one was synced.
func TestLog_DamageIsNotATornTail(t *testing.T) {
	const n = 10
	name := "/wal/" + segmentName(1)
	for _, tc := range []struct {
		name   string
		record int // 0-based data record to damage
		at     func(off int, data []byte) int
	}{
		{"first record's payload", 0, func(off int, _ []byte) int { return off + headerSize + 2 }},
		{"first record's length", 0, func(off int, _ []byte) int { return off + 5 }},
		{"first record's segment number", 0, func(off int, _ []byte) int { return off + 8 }},
		{"first record's checksum", 0, func(off int, _ []byte) int { return off }},
		{"middle record's payload", n / 2, func(off int, _ []byte) int { return off + headerSize + 1 }},
		{"middle record's seq", n / 2, func(off int, _ []byte) int { return off + 16 }},
		{"last record's payload", n - 1, func(off int, _ []byte) int { return off + headerSize }},
		{"the magic", 0, func(int, []byte) int { return 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := syncedLog(t, n, false) // a process crash: nothing torn
			offs := recordOffsets(t, segmentBytes(t, fs, name))
			if len(offs) != n {
				t.Fatalf("%d records in the segment, want %d", len(offs), n)
			}
			at := tc.at(offs[tc.record], nil)
			flipByte(t, fs, name, at)
			var got []string
			_, err := Open(Options{FS: fs, Dir: "/wal"}, 0, func(r Record) error {
				got = append(got, string(r.Data))
				return nil
			})
			if tc.name == "the magic" {
				// Nothing is lost: every record reads back.
				if err != nil || len(got) != n {
					t.Fatalf("a damaged magic: err %v, %d records, want all %d", err, len(got), n)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open after a flipped byte at %d: %v (replayed %d of %d records), want ErrCorrupt", at, err, len(got), n)
			}
			for _, want := range []string{segmentName(1), fmt.Sprintf("offset %d", offs[tc.record])} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not name %q: %v", want, err)
				}
			}
		})
	}
}

// TestLog_PowerLossThenDamageInTheLastRecordIsReported: after a power loss
// the sync record that vouched for the last record may be gone, and a
// damaged last record cannot be told from a torn write (Pebble's WAL has the
// same limit). It is then dropped, never in silence: the log says which
// file and how many bytes.
func TestLog_PowerLossThenDamageInTheLastRecordIsReported(t *testing.T) {
	fs := syncedLog(t, 5, true)
	name := "/wal/" + segmentName(1)
	offs := recordOffsets(t, segmentBytes(t, fs, name))
	flipByte(t, fs, name, offs[4]+headerSize+1)
	var logged bytes.Buffer
	var got int
	l, err := Open(Options{FS: fs, Dir: "/wal", Logger: slog.New(slog.NewTextHandler(&logged, nil))}, 0, func(Record) error { got++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if got != 4 {
		t.Errorf("replayed %d records, want the 4 before the damaged last one", got)
	}
	for _, want := range []string{"torn tail", segmentName(1), fmt.Sprintf("offset=%d", offs[4])} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log does not say %q: %s", want, logged.String())
		}
	}
}

// TestLog_PowerLossIsNeverTakenForDamage: a power loss keeps a random set
// of the unsynced 4 KiB blocks (CrashClone), so an unsynced record can
// survive after a lost one. Such a record never vouches for the lost one
// (it was written before any sync covered it): Open must replay every
// synced record and never report damage.
func TestLog_PowerLossIsNeverTakenForDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 30 {
		fs := vfs.NewCrashableMem()
		o := Options{FS: fs, Dir: "/wal", SegmentSize: 64 << 10}
		l, _ := collect(t, o, 0)
		var synced int
		for i := 1; i <= 400; i++ {
			_, end, err := l.Append(bytes.Repeat([]byte{byte(i)}, 100+rng.IntN(900)))
			if err != nil {
				t.Fatal(err)
			}
			if rng.IntN(10) == 0 {
				if err := l.SyncTo(end); err != nil {
					t.Fatal(err)
				}
				synced = i
			}
		}
		c := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 20 + rng.IntN(60), RNG: rng})
		_ = l.Close()
		var got int
		l2, err := Open(Options{FS: c, Dir: "/wal", SegmentSize: 64 << 10}, 0, func(Record) error { got++; return nil })
		if err != nil {
			t.Fatalf("round %d: Open after a power loss: %v", round, err)
		}
		_ = l2.Close()
		if got < synced {
			t.Fatalf("round %d: replayed %d records, %d were synced", round, got, synced)
		}
	}
}

// TestLog_DamageInRecordsTheTablesHold is not refused: Pebble's tables hold
// those records (seq <= after), nothing is lost, and the replay goes on
// from the next intact record.
func TestLog_DamageInRecordsTheTablesHold(t *testing.T) {
	fs := syncedLog(t, 10, false)
	name := "/wal/" + segmentName(1)
	offs := recordOffsets(t, segmentBytes(t, fs, name))
	flipByte(t, fs, name, offs[2]+headerSize)
	var got []string
	l, err := Open(Options{FS: fs, Dir: "/wal"}, 5, func(r Record) error {
		got = append(got, fmt.Sprintf("%d:%s", r.Seq, r.Data))
		return nil
	})
	if err != nil {
		t.Fatalf("Open after 5 with record 3 damaged: %v", err)
	}
	_ = l.Close()
	if diff := cmp.Diff(want(6, 10), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestLog_ReadsVersion1Segments: a store stopped uncleanly by a binary
// older than the magic left segments of version 1; they replay.
func TestLog_ReadsVersion1Segments(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/wal", 0o700); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for i := 1; i <= 3; i++ {
		data := payload(i)
		h := make([]byte, headerSizeV1)
		binary.LittleEndian.PutUint32(h[4:], uint32(len(data)))
		binary.LittleEndian.PutUint64(h[8:], 1)
		binary.LittleEndian.PutUint64(h[16:], uint64(i))
		binary.LittleEndian.PutUint32(h, crc32.Update(crc32.Checksum(h[4:], castagnoli), castagnoli, data))
		b = append(append(b, h...), data...)
	}
	f, err := fs.Create("/wal/"+segmentName(1), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	l, got := collect(t, Options{FS: fs, Dir: "/wal"}, 0)
	if diff := cmp.Diff(want(1, 3), got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// New records go to a new segment of version 2, after the old ones.
	if err := l.SyncTo(appendN(t, l, 4, 5)); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	_, got = collect(t, Options{FS: fs, Dir: "/wal"}, 0)
	if diff := cmp.Diff(want(1, 5), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestLog_DamageAtTheEndOfACompleteSegment: a complete segment was synced
// in full before the next one took writes, and the next one's segment
// record says how long it was. A flipped byte in its last record (here a
// data record, then the sync record after it) is damage: Read, for
// auditors, reports both; Open refuses the first (a data record lost) and
// logs the second (nothing lost).
func TestLog_DamageAtTheEndOfACompleteSegment(t *testing.T) {
	build := func(t *testing.T) vfs.FS {
		fs := vfs.NewCrashableMem()
		o := Options{FS: fs, Dir: "/wal", SegmentSize: 1 << 10}
		l, _ := collect(t, o, 0)
		for i := 1; i <= 40; i++ {
			_, end, err := l.Append(payload(i))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.SyncTo(end); err != nil {
				t.Fatal(err)
			}
		}
		c := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		_ = l.Close()
		return c
	}
	name := "/wal/" + segmentName(1)
	for _, tc := range []struct {
		name      string
		at        func(b []byte) int
		openFails bool
	}{
		{"its last data record", func(b []byte) int { offs := recordOffsets(t, b); return offs[len(offs)-1] + headerSize }, true},
		{"its sync record", func(b []byte) int { return len(b) - 1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := build(t)
			flipByte(t, fs, name, tc.at(segmentBytes(t, fs, name)))
			if err := Read(fs, "/wal", 0, func(Record) error { return nil }); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), segmentName(1)) {
				t.Errorf("Read: %v, want ErrCorrupt naming %s", err, segmentName(1))
			}
			var logged bytes.Buffer
			l, err := Open(Options{FS: fs, Dir: "/wal", Logger: slog.New(slog.NewTextHandler(&logged, nil))}, 0, func(Record) error { return nil })
			if tc.openFails {
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("Open: %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v, want a log that lost nothing", err)
			}
			_ = l.Close()
			if !strings.Contains(logged.String(), "loses nothing") {
				t.Errorf("Open did not log the damage: %s", logged.String())
			}
		})
	}
}

// TestLog_DamagedMagic loses nothing, and Read still reports it.
func TestLog_DamagedMagic(t *testing.T) {
	fs := syncedLog(t, 5, false)
	flipByte(t, fs, "/wal/"+segmentName(1), 2)
	if err := Read(fs, "/wal", 0, func(Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Read: %v, want ErrCorrupt", err)
	}
	var n int
	l, err := Open(Options{FS: fs, Dir: "/wal"}, 0, func(Record) error { n++; return nil })
	if err != nil || n != 5 {
		t.Fatalf("Open: %v, %d records, want all 5", err, n)
	}
	_ = l.Close()
}

// TestLog_CheckJudgesAsOpen: Check, which the store runs before it changes
// anything in its folder, gives the verdict Open gives on the same log
// (damage refused, a torn tail and damage that loses nothing read past),
// replays the same records, and writes nothing.
func TestLog_CheckJudgesAsOpen(t *testing.T) {
	const n = 10
	name := "/wal/" + segmentName(1)
	for _, tc := range []struct {
		name    string
		power   bool
		after   uint64
		at      func(offs []int) int
		corrupt bool
	}{
		{"a synced record's payload", false, 0, func(offs []int) int { return offs[n/2] + headerSize + 1 }, true},
		{"the last record's payload, its sync record after it", false, 0, func(offs []int) int { return offs[n-1] + headerSize }, true},
		{"the last record's payload after a power loss (torn)", true, 0, func(offs []int) int { return offs[n-1] + headerSize }, false},
		{"a record the tables hold", false, 3, func(offs []int) int { return offs[1] + headerSize }, false},
		{"the magic", false, 0, func([]int) int { return 3 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := syncedLog(t, n, tc.power)
			flipByte(t, fs, name, tc.at(recordOffsets(t, segmentBytes(t, fs, name))))
			before := folderBytes(t, fs, "/wal")
			var checked, opened []string
			cerr := Check(fs, "/wal", tc.after, func(r Record) error { checked = append(checked, string(r.Data)); return nil })
			if d := cmp.Diff(before, folderBytes(t, fs, "/wal")); d != "" {
				t.Errorf("Check changed the folder (-before +after):\n%s", d)
			}
			l, oerr := Open(Options{FS: fs, Dir: "/wal"}, tc.after, func(r Record) error { opened = append(opened, string(r.Data)); return nil })
			if oerr == nil {
				_ = l.Close()
			}
			if errors.Is(cerr, ErrCorrupt) != tc.corrupt || fmt.Sprint(cerr) != fmt.Sprint(oerr) {
				t.Errorf("Check: %v; Open: %v; want both corrupt: %t", cerr, oerr, tc.corrupt)
			}
			if d := cmp.Diff(opened, checked); d != "" {
				t.Errorf("records (-Open +Check):\n%s", d)
			}
		})
	}
}

// folderBytes maps every file of dir to its bytes.
func folderBytes(t *testing.T, fs vfs.FS, dir string) map[string]string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		out[n] = string(segmentBytes(t, fs, fs.PathJoin(dir, n)))
	}
	return out
}

// TestLog_AppendLeavesTheCallersBytes: vfs.File.Write may modify what it is
// given (Pebble's MemFS does in invariant builds), and the store applies the
// batch it logged to Pebble right after: Append must never hand the
// caller's bytes to Write. The file system here scribbles over every
// buffer it writes, as MemFS may.
func TestLog_AppendLeavesTheCallersBytes(t *testing.T) {
	o := Options{FS: scribbleFS{vfs.NewMem()}, Dir: "/wal"}
	l, _ := collect(t, o, 0)
	defer l.Close()
	for _, n := range []int{10, 40 << 10, 3 << 20} {
		data := bytes.Repeat([]byte{'d'}, n)
		if _, _, err := l.Append(data); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, bytes.Repeat([]byte{'d'}, n)) {
			t.Fatalf("Append of %d bytes let the file system modify them", n)
		}
	}
}

type scribbleFS struct{ vfs.FS }

func (f scribbleFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return scribbleFile{file}, err
}

type scribbleFile struct{ vfs.File }

func (f scribbleFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	for i := range p {
		p[i] = 0xAA
	}
	return n, err
}
