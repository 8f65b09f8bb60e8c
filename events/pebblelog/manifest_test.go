package pebblelog_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/events/pebblelog/inspect"
)

// The damage checks of the MANIFEST (inspect.CheckManifest), on the
// MANIFEST of a real store. They live beside the store because they make
// it flush (Store.Flush, export_test.go) to lay out several records in one
// MANIFEST, which only the store's own tests can.

// manifestStore writes a store whose MANIFEST holds several records (one
// per flush), closes it and returns its folder, the MANIFEST's path and the
// offsets of its records (read with Pebble's own reader).
func manifestStore(t *testing.T) (dir, manifest string, records []int64) {
	t.Helper()
	dir = t.TempDir()
	s, err := pebblelog.Open(pebblelog.Config{Dir: dir, LedgerID: testLedger, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.Append(t.Context(), one("m", events.ExpectAny, ev("M", fmt.Sprintf(`{"i":%d}`, i)))); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if len(names) != 1 {
		t.Fatalf("MANIFESTs %v, want one", names)
	}
	f, err := os.Open(names[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rr := record.NewReader(f, 0)
	for {
		off := rr.Offset()
		if _, err := rr.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		records = append(records, off)
	}
	if len(records) < 4 {
		t.Fatalf("MANIFEST records at %v, want at least 4", records)
	}
	return dir, names[0], records
}

// TestCheckManifest tells damage from a torn tail. Damage is one byte
// flipped in the real MANIFEST of a real store (Pebble itself opens the
// store without complaint in most of these cases, minus the tables the
// records after the flip added); a torn tail is what a crash while Pebble
// appended a record leaves, which Pebble drops and so must the check.
func TestCheckManifest(t *testing.T) {
	dir, manifest, recs := manifestStore(t)
	orig, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(orig))
	last := recs[len(recs)-1]
	// A record that spans a sector boundary, to tear as a disk does.
	span := -1
	for i := 0; i+1 < len(recs); i++ {
		if recs[i]/512 != (recs[i+1]-1)/512 {
			span = i
		}
	}
	if span < 0 {
		t.Fatalf("no MANIFEST record spans a 512-byte sector: %v", recs)
	}
	flip := func(at int64) func([]byte) []byte {
		return func(b []byte) []byte { b[at] ^= 0x20; return b }
	}
	tests := []struct {
		name   string
		change func([]byte) []byte
		offset int64 // of the damage; -1: a torn tail, no damage
	}{
		{"intact", func(b []byte) []byte { return b }, -1},
		{"first record, checksum byte", flip(0), 0},
		{"first record, payload", flip(recs[0] + 10), recs[0]},
		{"second record, length field", flip(recs[1] + 4), recs[1]},
		{"second record, type byte", flip(recs[1] + 6), recs[1]},
		{"middle record, payload", flip(recs[2] + 20), recs[2]},
		{"last record, checksum byte", flip(last + 1), last},
		{"last record, payload", flip(size - 1), last},
		{"last record, length field", flip(last + 5), last},
		{"torn: last record cut short", func(b []byte) []byte { return b[:last+(size-last)/2] }, -1},
		{"torn: last record's header cut short", func(b []byte) []byte { return b[:last+3] }, -1},
		{"torn: last record lost, zeros in its place", func(b []byte) []byte { clear(b[last:]); return b }, -1},
		{"torn: zeros after the last record", func(b []byte) []byte { return append(b, make([]byte, 100)...) }, -1},
		{"torn: the last record's last sector never reached the disk", func(b []byte) []byte {
			b = b[:recs[span+1]]
			clear(b[(recs[span+1]-1)/512*512:])
			return b
		}, -1},
		{"the same sector lost in a record that another follows", func(b []byte) []byte {
			clear(b[(recs[span+1]-1)/512*512 : recs[span+1]])
			return b
		}, recs[span]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(manifest, tc.change(append([]byte(nil), orig...)), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(manifest, orig, 0o600)
			err := inspect.CheckManifest(nil, dir)
			var de *inspect.DamageError
			if tc.offset < 0 {
				if err != nil {
					t.Fatalf("CheckManifest: %v, want nil", err)
				}
				return
			}
			if !errors.As(err, &de) || !errors.Is(err, events.ErrCorrupt) {
				t.Fatalf("CheckManifest: %v, want a DamageError", err)
			}
			if diff := cmp.Diff([]any{manifest, tc.offset}, []any{de.File, de.Offset}); diff != "" {
				t.Errorf("damage (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
}

// TestCheckManifest_Folders: the folders with nothing to check (the store's
// Open calls it before Pebble creates anything), and a marker naming a
// MANIFEST that is missing.
func TestCheckManifest_Folders(t *testing.T) {
	if err := inspect.CheckManifest(nil, t.TempDir()); err != nil {
		t.Errorf("empty folder: %v", err)
	}
	if err := inspect.CheckManifest(nil, filepath.Join(t.TempDir(), "none")); err != nil {
		t.Errorf("no folder (a store not created yet): %v", err)
	}
	// The folder of a running store, while it is idle: no lock needed.
	held := t.TempDir()
	openStore(t, held)
	if err := inspect.CheckManifest(nil, held); err != nil {
		t.Errorf("folder of a running store: %v", err)
	}
	dir, manifest, _ := manifestStore(t)
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	err := inspect.CheckManifest(nil, dir)
	var de *inspect.DamageError
	if !errors.As(err, &de) || de.File != manifest || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing MANIFEST: %v", err)
	}
}
