package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/audit/offline"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// Damaged storage: bytes flipped in the real files of a real store on
// disk (issue 13). Pebble's checksums catch the damage; the auditor must
// report it as a fault naming the file (KindStorageCorrupt), never panic,
// never say it could not run, and never verify a log with events missing.

// storageEvents is how many events the damaged-storage stores hold.
const storageEvents = 600

// storageStore writes n events of about 500 bytes (above the
// store's value-separation threshold: their bytes go to blob files) through
// the real append path, with a small memtable so that Pebble flushes
// tables and blob files along the way, and a checkpoint. With unclean set,
// the store is copied while it runs, with a memtable that never fills and
// small log segments: the copy holds its events only in the write-ahead log
// (greffe-wal/), as after a crash. It returns the ledger folder.
func storageStore(t testing.TB, n int, unclean bool) (*fixture, string) {
	t.Helper()
	f := &fixture{dir: filepath.Join(t.TempDir(), "ledger")}
	f.signer, f.verifier, f.vkey = newKey(t, events.Origin(testLedger))
	cfg := pebblelog.Config{Dir: f.dir, LedgerID: testLedger, Signers: []note.Signer{f.signer},
		CheckpointInterval: -1, Clock: fixedClock, MemTableSize: 256 << 10}
	if unclean {
		// Fewer than the 4 live segments past which the store flushes.
		cfg.MemTableSize, cfg.WALSegmentSize = 0, 128<<10
	}
	s, err := pebblelog.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("p", 400)
	for i := 0; i < n; i += 10 {
		ps := make([]events.Proposed, 10)
		for j := range ps {
			ps[j] = events.Proposed{ID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "storage-%d", i+j)), Type: "Stored",
				Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i+j, pad)), Metadata: json.RawMessage(`{}`)}
		}
		if _, err := s.Append(context.Background(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: fmt.Sprintf("s-%d", i%7), Events: ps}}}); err != nil {
			t.Fatal(err)
		}
	}
	checkpointAt(t, s)
	if unclean {
		// Every append is synced to the log; nothing else runs: the copy
		// is what a power cut would leave.
		copyDir := filepath.Join(t.TempDir(), "ledger")
		if err := os.CopyFS(copyDir, os.DirFS(f.dir)); err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		f.dir = copyDir
		return f, f.dir
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return f, f.dir
}

// damage is one change to one file of a store.
type damage struct {
	file   string // relative to the ledger folder
	offset int64  // the byte flipped; -1: the file is removed
	cut    bool   // the file is cut at offset instead
}

// flip flips the byte in the ledger folder dir itself and returns what
// undoes it.
func (d damage) flip(t testing.TB, dir string) (undo func()) {
	t.Helper()
	p := filepath.Join(dir, d.file)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b := slices.Clone(orig)
	b[d.offset] ^= 0x5a
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.WriteFile(p, orig, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// apply makes the change in a copy of the ledger folder src and returns
// the copy.
func (d damage) apply(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "ledger")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dst, d.file)
	if d.offset < 0 {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	if d.cut {
		if err := os.Truncate(p, d.offset); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[d.offset] ^= 0x5a
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// verifyDamaged runs VerifyDir on dir, bounded in time.
func verifyDamaged(t testing.TB, f *fixture, dir string) (*audit.Report, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return offline.VerifyDir(ctx, dir, audit.Config{Verifiers: []note.Verifier{f.verifier}})
}

// filesOf lists the files of the ledger folder: relative name -> size.
func filesOf(t testing.TB, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// named returns the files of dir with the extension or prefix, sorted.
func named(files map[string]int64, match func(string) bool) []string {
	var out []string
	for n := range files {
		if match(n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// manifestRecords returns the offsets of the records of the MANIFEST at p.
func manifestRecords(t testing.TB, p string) []int64 {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var offs []int64
	rr := record.NewReader(f, 0)
	for {
		off := rr.Offset()
		if _, err := rr.Next(); err == io.EOF {
			return offs
		} else if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
}

// TestVerifyDir_DamagedStorage flips one byte of each kind of file of a
// real store (first, middle and last byte, and record boundaries for the
// MANIFEST), or removes the files that hold no byte (Pebble's markers are
// empty files whose name is their value), and requires a storage_corrupt
// fault naming that file: never a panic (issue 13: a flipped byte in an
// .sst panicked with "pebble: on-disk corruption"), never "could not run"
// (a flipped byte in a .blob file), never an empty ledger (a flipped byte in
// the MANIFEST: "store_identity: meta format missing", 0 events).
func TestVerifyDir_DamagedStorage(t *testing.T) {
	f, clean := storageStore(t, storageEvents, false)
	uncleanF, unclean := storageStore(t, storageEvents, true)
	files, ufiles := filesOf(t, clean), filesOf(t, unclean)

	type tc struct {
		name string
		f    *fixture
		src  string
		d    damage
		// want is the file the first fault names; "" when the byte is one
		// nothing reads (the log must then verify in full).
		want string
		// detail, when set, is part of the first fault's detail.
		detail string
		// limitation: what the test can only require of a case that the
		// store's formats cannot tell from a crash (no error, no panic).
		limitation bool
	}
	var tests []tc
	three := func(kind, file string, size int64) {
		for _, off := range []int64{0, size / 2, size - 1} {
			tests = append(tests, tc{name: fmt.Sprintf("%s %s@%d", kind, file, off), f: f, src: clean, d: damage{file: file, offset: off}, want: file})
		}
	}
	for _, n := range named(files, func(n string) bool { return strings.HasSuffix(n, ".sst") }) {
		three("table", n, files[n])
	}
	blobs := named(files, func(n string) bool { return strings.HasSuffix(n, ".blob") })
	for _, n := range blobs {
		three("blob file", n, files[n])
	}
	if len(blobs) < 2 {
		t.Fatalf("blob files %v: want event bytes and leaf tiles in blob files", blobs)
	}
	manifest := named(files, func(n string) bool { return strings.HasPrefix(n, "MANIFEST-") })[0]
	recs := manifestRecords(t, filepath.Join(clean, manifest))
	if len(recs) < 3 {
		t.Fatalf("MANIFEST records at %v, want several", recs)
	}
	for _, off := range []int64{0, recs[len(recs)/2] + 3, recs[len(recs)/2+1] - 1, files[manifest] - 1} {
		tests = append(tests, tc{name: fmt.Sprintf("MANIFEST @%d", off), f: f, src: clean, d: damage{file: manifest, offset: off}, want: manifest})
	}
	// Cut after its first records, the MANIFEST reads as a torn tail (what
	// a crash leaves, and Pebble drops); it no longer describes the tables
	// that hold the meta records, which are on disk: damaged storage, not
	// an empty ledger.
	tests = append(tests, tc{name: "MANIFEST cut after its first records", f: f, src: clean,
		d: damage{file: manifest, offset: recs[2], cut: true}, want: manifest, detail: "no meta record"})
	options := named(files, func(n string) bool { return strings.HasPrefix(n, "OPTIONS-") })[0]
	tests = append(tests,
		// "[Version]" no longer parses: Pebble refuses the folder.
		tc{name: "OPTIONS, its first line", f: f, src: clean, d: damage{file: options, offset: 0}, want: options},
		// The last value of the file: Pebble reads options from its
		// caller, this one is not checked against the store's.
		tc{name: "OPTIONS, a value Pebble does not compare", f: f, src: clean, d: damage{file: options, offset: files[options] - 2}, want: ""})
	for _, m := range named(files, func(n string) bool { return strings.HasPrefix(n, "marker.") }) {
		marker := "marker." + strings.Split(m, ".")[1]
		tests = append(tests, tc{name: "removed " + m, f: f, src: clean, d: damage{file: m, offset: -1}, want: marker})
	}
	// A cleanly closed store keeps its emptied log segments for reuse:
	// nothing reads them.
	for _, n := range named(files, func(n string) bool { return strings.HasPrefix(n, "greffe-wal/free-") }) {
		tests = append(tests, tc{name: "free log segment " + n, f: f, src: clean, d: damage{file: n, offset: files[n] / 2}, want: ""})
	}
	// The live log segments of a store stopped uncleanly. A segment is
	// synced in full before the next one takes writes (and the next one
	// says how long it was): anything in it that does not read back is
	// damage. In the last one, a later record says how far the segment was
	// synced; only its very last record (the sync record after the last
	// sync) has none after it, and cannot be told from a write torn by the
	// crash.
	segs := named(ufiles, func(n string) bool {
		return strings.HasPrefix(n, "greffe-wal/") && !strings.HasPrefix(n, "greffe-wal/free-")
	})
	if len(segs) < 3 {
		t.Fatalf("live log segments %v: want at least 3", segs)
	}
	for i, n := range segs {
		for _, off := range []int64{0, ufiles[n] / 2, ufiles[n] - 1} {
			tests = append(tests, tc{name: fmt.Sprintf("log segment %s@%d", n, off), f: uncleanF, src: unclean,
				d: damage{file: n, offset: off}, want: n, limitation: i == len(segs)-1 && off == ufiles[n]-1})
		}
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.d.apply(t, tc.src)
			rep, err := verifyDamaged(t, tc.f, dir)
			if err != nil {
				t.Fatalf("VerifyDir could not run: %v", err)
			}
			switch {
			case tc.limitation:
				t.Logf("verified %v, %d events, first fault %v", rep.Verified, rep.Events, rep.First)
			case tc.want == "":
				if !rep.Verified || rep.Events != storageEvents {
					t.Errorf("verified %v with %d events, want %d verified: %v", rep.Verified, rep.Events, storageEvents, rep.First)
				}
			case rep.First == nil:
				t.Errorf("verified with %d events: no fault", rep.Events)
			case rep.First.Kind != audit.KindStorageCorrupt || rep.First.File != tc.want || !strings.Contains(rep.First.Detail, tc.detail):
				t.Errorf("first fault %v, want %s in %s (%q)", rep.First, audit.KindStorageCorrupt, tc.want, tc.detail)
			}
		})
	}
}

// TestVerifyDir_DamagedStorageRandomFlips flips one random byte of one file
// of a small store, 200 times (a fixed seed; every file alike, whatever its
// size), and requires of every run: no panic, no "could not run", and no
// verified log with fewer events than written (a byte nothing reads leaves
// the log verified in full). Each run is bounded by verifyDamaged's timeout.
func TestVerifyDir_DamagedStorageRandomFlips(t *testing.T) {
	if testing.Short() {
		t.Skip("200 verifications of damaged stores")
	}
	const n = 300
	f, dir := storageStore(t, n, false)
	files := filesOf(t, dir)
	names := named(files, func(n string) bool { return files[n] > 0 && n != "LOCK" })
	rng := rand.New(rand.NewPCG(13, 3))
	outcomes := map[string]int{}
	for i := range 200 {
		name := names[rng.IntN(len(names))]
		d := damage{file: name, offset: rng.Int64N(files[name])}
		undo := d.flip(t, dir)
		rep, err := verifyDamaged(t, f, dir)
		undo()
		if err != nil {
			t.Fatalf("flip %d (%s@%d): could not run: %v", i, d.file, d.offset, err)
		}
		switch {
		case rep.Verified && rep.Events != n:
			t.Errorf("flip %d (%s@%d): verified with %d events, %d written", i, d.file, d.offset, rep.Events, n)
		case rep.Verified:
			outcomes["verified in full"]++
		default:
			outcomes[rep.First.Kind]++
		}
	}
	t.Logf("outcomes: %v", outcomes)
}
