package inspect_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/layout"
	"github.com/greffe/greffe/internal/pebbleslog"
)

// TestInspector_ScanEventsSeesEveryKey: the windowed scan of the event key
// space returns exactly what one plain scan returns, whatever is stored
// there: positions far apart, keys of the wrong shape between windows and
// inside them.
func TestInspector_ScanEventsSeesEveryKey(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	for i := range 10 {
		appendData(t, s, "w", "W", fmt.Sprintf(`{"i":%d}`, i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: pebbleslog.Logger{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]byte{
		[]byte("e"),                     // before position 0
		append(layout.EventKey(5), 'x'), // inside a window
		[]byte("e\x00\x01"),             // between windows, after every small position
		layout.EventKey(1 << 40),        // far away
		layout.EventKey(^uint64(0)),     // the last window of the space
	} {
		if err := db.Set(k, []byte("v"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	in, err := inspect.Open(inspect.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	collect := func(scan func(fn func(inspect.Entry) error) error) []string {
		var keys []string
		if err := scan(func(e inspect.Entry) error {
			keys = append(keys, fmt.Sprintf("%x", e.Key))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return keys
	}
	want := collect(func(fn func(inspect.Entry) error) error { return in.Scan(t.Context(), layout.SpaceEvents, fn) })
	if len(want) != 15 {
		t.Fatalf("plain scan found %d keys, want 15", len(want))
	}
	for _, window := range []uint64{1, 3, 4, 1 << 16} {
		got := collect(func(fn func(inspect.Entry) error) error { return in.ScanEvents(t.Context(), window, fn) })
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("window %d (-want +got):\n%s", window, diff)
		}
	}
}

// TestInspector_Refusals: a store held by a running node, and a folder
// that holds no store.
func TestInspector_Refusals(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir) // held until the test ends
	if _, err := inspect.Open(inspect.Config{Dir: dir}); !errors.Is(err, inspect.ErrLocked) {
		t.Errorf("store held by a node: %v, want ErrLocked", err)
	}
	if _, err := inspect.Open(inspect.Config{Dir: t.TempDir() + "/none"}); !errors.Is(err, events.ErrNotFound) {
		t.Errorf("no store: %v, want ErrNotFound", err)
	}

}

// TestInspector_DamageIsAnError: a flipped byte in a table or a blob file of
// a closed store ends the scan that reads it with a *DamageError naming the
// file and the key space, never a panic (Pebble's default reaction to a
// damaged block is Logger.Fatalf, and a damaged blob file footer panics in
// Pebble itself); CheckFiles names the same file.
func TestInspector_DamageIsAnError(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblelog.Open(pebblelog.Config{Dir: dir, LedgerID: testLedger, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		pad := strings.Repeat("x", 400) // above the value-separation threshold: in a blob file
		appendData(t, s, "d", "D", fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	type flip struct {
		name string
		file string
		at   func(size int64) int64
	}
	var tests []flip
	for _, ext := range []string{".sst", ".blob"} {
		names, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
		for _, n := range names {
			tests = append(tests,
				flip{filepath.Base(n) + ", first block", n, func(int64) int64 { return 10 }},
				flip{filepath.Base(n) + ", footer", n, func(size int64) int64 { return size - 2 }})
		}
	}
	if len(tests) < 8 {
		t.Fatalf("%d flips: the store holds too few tables and blob files", len(tests))
	}
	spaces := []layout.Space{layout.SpaceEvents, layout.SpaceLeafTiles, layout.SpaceNodes,
		layout.SpaceStreams, layout.SpaceIDs, layout.SpaceCheckpoints}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			b := append([]byte(nil), orig...)
			b[tc.at(int64(len(b)))] ^= 0x55
			if err := os.WriteFile(tc.file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(tc.file, orig, 0o600)
			// Whatever reads the damaged file first says so: the open (the
			// meta records, the log's seq) or the scan of its key space.
			in, err := inspect.Open(inspect.Config{Dir: dir})
			if err == nil {
				defer in.Close()
				for _, sp := range spaces {
					if err = in.Scan(t.Context(), sp, func(inspect.Entry) error { return nil }); err != nil {
						break
					}
				}
			}
			var de *inspect.DamageError
			if !errors.As(err, &de) || !errors.Is(err, events.ErrCorrupt) {
				t.Fatalf("open and scans: %v, want a DamageError", err)
			}
			if de.File != dir && de.File != tc.file {
				t.Errorf("the damage names %s, want %s", de.File, tc.file)
			}
			found, err := inspect.CheckFiles(t.Context(), nil, dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range found {
				names = append(names, f.File)
			}
			if diff := cmp.Diff([]string{tc.file}, names); diff != "" {
				t.Errorf("CheckFiles (-want +got):\n%s", diff)
			}
		})
	}
}
