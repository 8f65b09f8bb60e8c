package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
)

func payload(i int) []byte { return []byte(fmt.Sprintf("record %d %s", i, strings.Repeat("x", i%97))) }

// collect opens the log and returns what it replays after `after`.
func collect(t *testing.T, o Options, after uint64) (*Log, []string) {
	t.Helper()
	var got []string
	l, err := Open(o, after, func(r Record) error {
		got = append(got, fmt.Sprintf("%d:%s", r.Seq, r.Data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, got
}

func want(from, to int) []string {
	var w []string
	for i := from; i <= to; i++ {
		w = append(w, fmt.Sprintf("%d:%s", i, payload(i)))
	}
	return w
}

func appendN(t *testing.T, l *Log, from, to int) uint64 {
	t.Helper()
	var end uint64
	for i := from; i <= to; i++ {
		seq, e, err := l.Append(payload(i))
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i) {
			t.Fatalf("record %d got seq %d", i, seq)
		}
		end = e
	}
	return end
}

func TestLog_ReplaysInOrderAcrossSegments(t *testing.T) {
	o := Options{Dir: t.TempDir(), SegmentSize: 1 << 10}
	l, got := collect(t, o, 0)
	if len(got) != 0 {
		t.Fatalf("a new log replayed %v", got)
	}
	end := appendN(t, l, 1, 200)
	if err := l.SyncTo(end); err != nil {
		t.Fatal(err)
	}
	if n := l.Segments(); n < 10 {
		t.Fatalf("%d segments for 200 records in 1 KiB segments, want many", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, after := range []uint64{0, 1, 150, 200, 500} {
		l, got := collect(t, o, after)
		w := want(int(after)+1, 200)
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("after %d (-want +got):\n%s", after, diff)
		}
		if next := l.LastSeq() + 1; next != max(201, after+1) {
			t.Errorf("after %d: next seq %d, want %d", after, next, max(201, after+1))
		}
		_ = l.Close()
	}
}

// TestLog_TornTail cuts the last segment inside its last record, as a crash
// during a write would: replay stops at the record before, and the log goes
// on with the next seq in a new segment.
func TestLog_TornTail(t *testing.T) {
	o := Options{Dir: t.TempDir(), SegmentSize: 1 << 20}
	l, _ := collect(t, o, 0)
	if err := l.SyncTo(appendN(t, l, 1, 10)); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	name := filepath.Join(o.Dir, segmentName(1))
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	// The file ends with the sync record written after the sync; cut it and
	// the last 3 bytes of record 10.
	if err := os.Truncate(name, fi.Size()-headerSize-3); err != nil {
		t.Fatal(err)
	}
	l, got := collect(t, o, 0)
	if diff := cmp.Diff(want(1, 9), got); diff != "" {
		t.Fatalf("after a torn tail (-want +got):\n%s", diff)
	}
	if err := l.SyncTo(appendN(t, l, 10, 12)); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	_, got = collect(t, o, 0)
	if diff := cmp.Diff(want(1, 12), got); diff != "" {
		t.Errorf("after appending past the torn tail (-want +got):\n%s", diff)
	}
}

// TestLog_CrashKeepsSyncedRecords runs on Pebble's crashable in-memory file
// system: a crash keeps only what was synced, file contents and names.
func TestLog_CrashKeepsSyncedRecords(t *testing.T) {
	fs := vfs.NewCrashableMem()
	o := Options{FS: fs, Dir: "/wal", SegmentSize: 2 << 10}
	l, _ := collect(t, o, 0)
	synced := appendN(t, l, 1, 120) // several rotations
	if err := l.SyncTo(synced); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 121, 130) // written, not synced
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(1, 2))})
	_ = l.Close()
	o.FS = crashed
	l, got := collect(t, o, 0)
	defer l.Close()
	if len(got) < 120 || len(got) > 130 {
		t.Fatalf("replayed %d records after the crash, want the 120 synced (and maybe some of the 10 others)", len(got))
	}
	if diff := cmp.Diff(want(1, len(got)), got); diff != "" {
		t.Errorf("replayed records are not the ones written, in order (-want +got):\n%s", diff)
	}
}

// TestLog_DropAndReuse drops segments, reuses their files for later ones,
// and never replays what a reused file held before.
func TestLog_DropAndReuse(t *testing.T) {
	o := Options{Dir: t.TempDir(), SegmentSize: 1 << 10}
	l, _ := collect(t, o, 0)
	appendN(t, l, 1, 100)
	if err := l.DropThrough(100, true); err != nil {
		t.Fatal(err)
	}
	if n := l.Segments(); n != 0 {
		t.Fatalf("%d segments left after dropping everything", n)
	}
	files := func() (free, live int) {
		names, _ := os.ReadDir(o.Dir)
		for _, n := range names {
			if strings.HasPrefix(n.Name(), freePrefix) {
				free++
			} else {
				live++
			}
		}
		return free, live
	}
	if free, live := files(); free != maxFree || live != 0 {
		t.Fatalf("after the drop: %d free and %d live files, want %d and 0", free, live, maxFree)
	}
	// Short records in reused 1 KiB files: what follows them in each file
	// is an older segment's records.
	for i := 101; i <= 103; i++ {
		if _, _, err := l.Append([]byte("short")); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SyncTo(l.lsn); err != nil {
		t.Fatal(err)
	}
	if free, live := files(); free != maxFree-1 || live != 1 {
		t.Errorf("after reuse: %d free and %d live files, want %d and 1", free, live, maxFree-1)
	}
	_ = l.Close()
	// Dropped records are in Pebble's tables: the store opens after them.
	_, got := collect(t, o, 100)
	if diff := cmp.Diff([]string{"101:short", "102:short", "103:short"}, got); diff != "" {
		t.Errorf("replay of a reused file (-want +got):\n%s", diff)
	}
}

// TestLog_Hole refuses to open a log whose records past `after` skip one:
// those would be acknowledged batches lost.
func TestLog_Hole(t *testing.T) {
	o := Options{Dir: t.TempDir(), SegmentSize: 1 << 10}
	l, _ := collect(t, o, 0)
	if err := l.SyncTo(appendN(t, l, 1, 60)); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	names, _ := os.ReadDir(o.Dir)
	var segs []string
	for _, n := range names {
		segs = append(segs, n.Name())
	}
	slices.Sort(segs)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	if err := os.Remove(filepath.Join(o.Dir, segs[1])); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(o, 0, func(Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open with a missing middle segment: %v, want ErrCorrupt", err)
	}
	// Past the hole, nothing is missing: the records before it are in
	// Pebble's tables already.
	var first uint64
	l, err := Open(o, 60, func(r Record) error { first = r.Seq; return nil })
	if err != nil || first != 0 {
		t.Errorf("Open after 60: err %v, replayed from %d; want nothing to replay", err, first)
	}
	if l != nil {
		_ = l.Close()
	}
}

func TestLog_AppendAfterFailureOrClose(t *testing.T) {
	o := Options{Dir: t.TempDir()}
	l, _ := collect(t, o, 0)
	appendN(t, l, 1, 1)
	_ = l.Close()
	if _, _, err := l.Append([]byte("late")); !errors.Is(err, ErrFailed) {
		t.Errorf("Append after Close: %v, want ErrFailed", err)
	}
}

// TestLog_LargeRecords covers records over 32 KiB, up to a segment of
// their own, including one torn inside its data.
func TestLog_LargeRecords(t *testing.T) {
	o := Options{Dir: t.TempDir(), SegmentSize: 1 << 20}
	l, _ := collect(t, o, 0)
	sizes := []int{10, 32<<10 + 1, 200_000, 5, 3 << 20, 7}
	var wantRecs []string
	var end uint64
	for i, n := range sizes {
		data := []byte(strings.Repeat(string(rune('a'+i)), n))
		seq, e, err := l.Append(data)
		if err != nil {
			t.Fatal(err)
		}
		end = e
		wantRecs = append(wantRecs, fmt.Sprintf("%d:%s", seq, data))
	}
	if err := l.SyncTo(end); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	l, got := collect(t, o, 0)
	_ = l.Close()
	if diff := cmp.Diff(wantRecs, got); diff != "" {
		t.Fatalf("large records (-want +got):\n%.2000s", diff)
	}
	// The 3 MiB record has a segment of its own (the fifth record, after a
	// rotation): cut it in the middle of its data.
	names, _ := os.ReadDir(o.Dir)
	var last string
	for _, n := range names {
		last = n.Name()
	}
	segs := len(names)
	if err := os.Truncate(filepath.Join(o.Dir, last), 0); err != nil { // the 7-byte record's segment
		t.Fatal(err)
	}
	prev := filepath.Join(o.Dir, names[segs-2].Name())
	if err := os.Truncate(prev, headerSize+(3<<20)/2); err != nil {
		t.Fatal(err)
	}
	l, got = collect(t, o, 0)
	_ = l.Close()
	if diff := cmp.Diff(wantRecs[:4], got); diff != "" {
		t.Errorf("after tearing the 3 MiB record (-want +got):\n%.2000s", diff)
	}
}

// TestLog_TornHeaderClaimingAHugeRecord ends the segment at a header whose
// length runs past the end of the file, without reading (or allocating) it.
func TestLog_TornHeaderClaimingAHugeRecord(t *testing.T) {
	o := Options{Dir: t.TempDir()}
	l, _ := collect(t, o, 0)
	if err := l.SyncTo(appendN(t, l, 1, 3)); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	f, err := os.OpenFile(filepath.Join(o.Dir, segmentName(1)), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var hdr [headerSize]byte
	binary.LittleEndian.PutUint32(hdr[4:], MaxRecord)
	binary.LittleEndian.PutUint64(hdr[8:], 1)
	binary.LittleEndian.PutUint64(hdr[16:], 4)
	binary.LittleEndian.PutUint64(hdr[24:], 1<<20) // it even claims a sync
	if _, err := f.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	l, got := collect(t, o, 0)
	defer l.Close()
	if diff := cmp.Diff(want(1, 3), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
