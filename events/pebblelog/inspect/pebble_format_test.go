package inspect

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/atomicfs"

	"github.com/greffe/greffe/internal/pebbleslog"
)

// TestPebbleFormatMirrors fails when Pebble's format no longer is what this
// package mirrors of it (manifest.go, "Mirrors of Pebble's unexported
// format", and the file and marker names of damage.go): it writes with
// Pebble's own writers and reads the bytes back with the mirrors.
func TestPebbleFormatMirrors(t *testing.T) {
	t.Run("legacy chunks", func(t *testing.T) {
		var buf bytes.Buffer
		w := record.NewWriter(&buf)
		small := []byte("a version edit")
		large := bytes.Repeat([]byte{0xab}, manifestBlockSize+100) // crosses a block
		for _, p := range [][]byte{small, large} {
			if _, err := w.WriteRecord(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		// The small record: one full chunk, checksummed over type and payload.
		chunk := func(at int) (crc uint32, n int, typ byte) {
			return binary.LittleEndian.Uint32(b[at:]), int(binary.LittleEndian.Uint16(b[at+4:])), b[at+6]
		}
		crc, n, typ := chunk(0)
		if n != len(small) || typ != chunkFull || crc != pebbleCRC(b[6:chunkHeaderSize+n]) ||
			!bytes.Equal(b[chunkHeaderSize:chunkHeaderSize+n], small) {
			t.Fatalf("full chunk: crc %08x length %d type %d; want crc %08x, length %d, type %d",
				crc, n, typ, pebbleCRC(b[6:chunkHeaderSize+n]), len(small), chunkFull)
		}
		// The large record: a first chunk that fills the block, then the
		// last chunk at the next block.
		at := chunkHeaderSize + n
		crc, n, typ = chunk(at)
		if typ != chunkFirst || at+chunkHeaderSize+n != manifestBlockSize || crc != pebbleCRC(b[at+6:at+chunkHeaderSize+n]) {
			t.Fatalf("first chunk at %d: length %d type %d, want type %d ending at the block size %d", at, n, typ, chunkFirst, manifestBlockSize)
		}
		crc, n, typ = chunk(manifestBlockSize)
		if typ != chunkLast || crc != pebbleCRC(b[manifestBlockSize+6:manifestBlockSize+chunkHeaderSize+n]) ||
			manifestBlockSize+chunkHeaderSize+n != len(b) {
			t.Fatalf("last chunk: length %d type %d, want type %d ending the file", n, typ, chunkLast)
		}
		// And Pebble reads back what the mirrors say is there.
		r := record.NewReader(bytes.NewReader(b), 0)
		for _, want := range [][]byte{small, large} {
			rr, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rr)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Pebble read back %d bytes (%v), want %d", len(got), err, len(want))
			}
		}
	})
	t.Run("log chunk headers", func(t *testing.T) {
		for _, tc := range []struct {
			syncOffsets bool
			header      int
		}{{false, recyclableHeader}, {true, walSyncHeader}} {
			var buf bytes.Buffer
			w := record.NewLogWriter(&buf, 1, record.LogWriterConfig{WriteWALSyncOffsets: func() bool { return tc.syncOffsets }})
			p := []byte("a batch")
			if _, err := w.WriteRecord(p); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			b := buf.Bytes()
			if n := int(binary.LittleEndian.Uint16(b[4:])); n != len(p) || !bytes.Equal(b[tc.header:tc.header+n], p) {
				t.Errorf("sync offsets %v: the payload does not follow a %d-byte header", tc.syncOffsets, tc.header)
			}
		}
	})
	t.Run("file and marker names", func(t *testing.T) {
		fs := vfs.NewMem()
		db, err := pebble.Open("/db", &pebble.Options{FS: fs, FormatMajorVersion: pebble.FormatNewest, Logger: pebbleslog.Logger{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Set([]byte("k"), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		names, err := fs.List("/db")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".sst") && isStoreFile(n) }) {
			t.Errorf("no table (.sst) among %v", names)
		}
		for _, prefix := range []string{"MANIFEST-", "OPTIONS-", "marker.manifest.", "marker.format-version."} {
			found := false
			for _, n := range names {
				found = found || strings.HasPrefix(n, prefix) && isStoreFile(n)
			}
			if !found {
				t.Errorf("no file named %s… among %v", prefix, names)
			}
		}
		for _, m := range []string{"manifest", "format-version"} {
			if v, err := atomicfs.ReadMarker(fs, "/db", m); err != nil || v == "" {
				t.Errorf("marker %q: %q, %v", m, v, err)
			}
		}
		if err := checkMarkers(fs, "/db", names); err != nil {
			t.Errorf("checkMarkers on an intact folder: %v", err)
		}
	})
}
