package inspect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/atomicfs"
)

// The MANIFEST is Pebble's log of version edits: which tables and blob
// files make up the database. Pebble reads it at open record by record and
// stops, without an error, at the first record that does not read back
// (version_set.go, versionSet.load): that is how it drops a record torn by
// a crash. A record damaged in the middle of the file is dropped the same
// way, with every record after it: the database then opens without the
// tables the later records added (events vanish, or the meta records, so
// that the store looks empty) or with tables they removed (the open fails
// on a missing file), and nothing names the MANIFEST.
//
// The file's format (pebble/record): 32 KiB blocks of chunks that never
// cross a block; a block's last bytes, when fewer than a chunk header,
// are zeros. The MANIFEST writer (record.NewWriter) writes legacy chunks:
//
//	crc(4) length(2) type(1) payload(length)
//
// little-endian; crc is Pebble's masked CRC-32C (internal/crc) of the type
// byte and the payload; type is 1 full, 2 first, 3 middle, 4 last. Pebble
// syncs the file after each record (one version edit) before it writes the
// next, so only the last record can be torn by a crash.
//
// # Mirrors of Pebble's unexported format
//
// The constants below and pebbleCRC restate what cockroachdb/pebble
// v2.1.7 keeps unexported (record/record.go: blockSize, legacyHeaderSize,
// recyclableHeaderSize, walSyncHeaderSize, the legacy chunk types;
// internal/crc: the masked CRC-32C): Pebble's reader says that a record
// does not read back, never where or why, and telling a torn tail from
// damage needs the chunks themselves. This package is the only one that
// mirrors them. TestPebbleFormatMirrors (pebble_format_test.go) writes
// records with Pebble's own writers and fails when one of them no longer
// holds: after a Pebble upgrade, re-read its record package and update
// them together with the version named here.

const (
	manifestBlockSize = 32 << 10 // record.blockSize
	chunkHeaderSize   = 7        // record.legacyHeaderSize
	recyclableHeader  = 11       // record.recyclableHeaderSize
	walSyncHeader     = 19       // record.walSyncHeaderSize
	// The legacy chunk types (record.fullChunkEncoding, …).
	chunkFull, chunkFirst, chunkLast = 1, 2, 4
	// sectorSize is the granularity of a write that does not reach the
	// disk: a torn write leaves whole sectors (or pages, which are whole
	// sectors) of zeros where a new file's data did not land.
	sectorSize = 512
)

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// pebbleCRC is Pebble's checksum (internal/crc, crc.CRC.Value): CRC-32C,
// rotated, plus a delta.
func pebbleCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoliTable, b)
	return (c>>15 | c<<17) + 0xa282ead8
}

// CheckManifest reads the current MANIFEST of the Pebble directory dir to
// its end and reports the damage Pebble's reader passes over in silence.
//
// It finds the MANIFEST through Pebble's marker file
// (marker.manifest.<n>.MANIFEST-<m>), reads that one file sequentially and
// writes nothing. It takes no lock: call it on a stopped store, or before
// Pebble opens the folder (a running Pebble may rotate the MANIFEST away
// under it, which would read as a missing MANIFEST). Its cost is one
// listing of dir and one read of the file, which Pebble makes at every open
// anyway (the MANIFEST stays below Pebble's MaxManifestFileSize, 128 MiB by
// default, and is usually a few KiB); its memory is two 32 KiB buffers,
// plus the file's tail when a record does not read back. fs nil means
// vfs.Default. Safe for concurrent use.
//
// It returns:
//   - nil when dir does not exist or has no MANIFEST marker (a store not
//     created yet: nothing to check),
//     or when every record reads back, or when only the last record does
//     not and it is a torn tail: cut short by the end of the file, or
//     holding a sector of zeros where a write did not reach the disk. That
//     is what a crash while Pebble appended leaves, and Pebble drops it.
//   - a *DamageError (errors.Is(err, events.ErrCorrupt)) naming the
//     MANIFEST and the offset of the first record that does not read back,
//     when that record is not a torn tail: a record starts, intact, after
//     it (Pebble would drop that one and every later one); or the record is
//     whole and fails its checksum with no sector missing (a changed
//     byte); or its length field alone is wrong (the chunk checks out over
//     the bytes up to the end of the file); or its header is one Pebble's
//     writer never writes. Also, naming the folder, when the marker's name
//     does not parse, and, naming the MANIFEST, when the marker names one
//     that is missing.
//   - another error when the folder or the file cannot be read (I/O): that
//     is not damage.
func CheckManifest(fs vfs.FS, dir string) error {
	if fs == nil {
		fs = vfs.Default
	}
	if _, err := fs.List(dir); errors.Is(err, os.ErrNotExist) {
		return nil // a store not created yet
	} else if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	name, err := atomicfs.ReadMarker(fs, dir, "manifest")
	if err != nil {
		// The folder lists: what fails is the markers' names.
		return &DamageError{File: dir, Offset: -1, Err: fmt.Errorf("the MANIFEST marker does not read: %w", err)}
	}
	if name == "" {
		return nil
	}
	path := fs.PathJoin(dir, name)
	if !strings.HasPrefix(name, "MANIFEST-") {
		return &DamageError{File: dir, Offset: -1, Err: fmt.Errorf("the MANIFEST marker names %q, not a MANIFEST", name)}
	}
	f, err := fs.Open(path)
	if err != nil {
		if _, serr := fs.Stat(path); serr != nil {
			return &DamageError{File: path, Offset: -1, Err: fmt.Errorf("the MANIFEST marker names it and it is missing: %w", err)}
		}
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	rr := record.NewReader(f, 0)
	for {
		// Just before Next, Offset is where the next record starts (or the
		// block padding before it).
		off := rr.Offset()
		r, err := rr.Next()
		if err == io.EOF {
			return nil
		}
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if err == nil {
			continue
		}
		if !invalidRecord(err) {
			return fmt.Errorf("read %s: %w", path, err)
		}
		tail := make([]byte, fi.Size()-off)
		if _, err := f.ReadAt(tail, off); err != nil && err != io.EOF {
			return fmt.Errorf("read %s: %w", path, err)
		}
		at, why := judgeManifestTail(tail, off)
		if why == "" {
			return nil
		}
		return &DamageError{File: path, Offset: at, Err: fmt.Errorf("%s (Pebble stops reading the MANIFEST there)", why)}
	}
}

// invalidRecord reports whether err is pebble/record's way of saying that
// a record does not read back (record.IsInvalidRecord, which compares
// without unwrapping: a checksum error carries details).
func invalidRecord(err error) bool {
	return errors.Is(err, record.ErrInvalidChunk) || errors.Is(err, record.ErrZeroedChunk) ||
		errors.Is(err, record.ErrUnexpectedEOF)
}

// judgeManifestTail walks the chunks of the record that starts at offset
// base of the MANIFEST (tail holds the file from there to its end), the
// first one Pebble's reader failed on. It returns the offset of the first
// chunk that fails and why it is damage, or "" when the record is a torn
// tail.
//
// The evidence, strongest first: a record that starts intact after the
// failing chunk (Pebble synced the failing one before it wrote that one:
// it was whole once); a chunk cut short by the end of the file or holding
// a sector of zeros (a torn append: never damage); a chunk whole but for
// its length field; and a chunk that fails its checksum or its format with
// every byte present, which a write cut short does not leave.
func judgeManifestTail(tail []byte, base int64) (int64, string) {
	size := base + int64(len(tail))
	at := func(p int64) []byte { return tail[p-base:] }
	for p := base; ; {
		if p >= size {
			return 0, "" // the record runs past the end of the file: torn
		}
		blockEnd := min((p/manifestBlockSize+1)*manifestBlockSize, size)
		if manifestBlockSize-p%manifestBlockSize < chunkHeaderSize {
			p = (p/manifestBlockSize + 1) * manifestBlockSize // padding the writer leaves
			continue
		}
		if p+chunkHeaderSize > size || allZero(at(p)) {
			return 0, "" // a header cut short, or nothing written from here on
		}
		h := at(p)
		crc, n, typ := binary.LittleEndian.Uint32(h), int64(binary.LittleEndian.Uint16(h[4:])), h[6]
		end := p + chunkHeaderSize + n
		if crc == 0 && n == 0 && typ == 0 {
			// Pebble's reader skips a zeroed header at a block's end
			// (record.Reader.nextChunk).
			if rest := blockEnd - p; rest < recyclableHeader || (rest < walSyncHeader && allZero(at(p)[:rest])) {
				p = blockEnd
				continue
			}
		}
		intact := func(why string) (int64, string) {
			if q, ok := intactRecordAfter(tail, base, p); ok {
				return p, fmt.Sprintf("%s, and a record starts intact at offset %d", why, q)
			}
			return 0, ""
		}
		whole := func(why string, region []byte) (int64, string) {
			if at, why := intact(why); why != "" {
				return at, why
			}
			if lostSector(region, p) {
				return 0, "" // a write that did not reach the disk in full
			}
			return p, why + " with every byte present"
		}
		switch {
		case crc == 0 && n == 0 && typ == 0:
			return whole(fmt.Sprintf("a zeroed chunk header at offset %d is followed by data", p), tail[p-base:])
		case typ < chunkFull || typ > chunkLast:
			return whole(fmt.Sprintf("the chunk at offset %d has type %d, which Pebble's MANIFEST writer never writes", p, typ), tail[p-base:])
		case end > (p/manifestBlockSize+1)*manifestBlockSize:
			return whole(fmt.Sprintf("the chunk at offset %d claims %d bytes, past the end of its 32 KiB block", p, n), tail[p-base:])
		case end > size:
			// Cut short by the end of the file: a torn append, unless the
			// chunk is whole and only its length field is wrong, or the
			// writer went on after it.
			if pebbleCRC(at(p)[6:]) == crc {
				return p, fmt.Sprintf("the chunk at offset %d claims %d bytes; it is whole with %d (its length field is damaged)", p, n, size-p-chunkHeaderSize)
			}
			return intact(fmt.Sprintf("the chunk at offset %d claims %d bytes, past the end of the file", p, n))
		case pebbleCRC(at(p)[6:end-p]) != crc:
			return whole(fmt.Sprintf("the chunk at offset %d (%d bytes) fails its checksum", p, n), tail[p-base:end-base])
		case typ == chunkFull || typ == chunkLast:
			// The record ends here and every chunk of it is intact: Pebble
			// failed on something else. Never seen; reported as it is.
			return base, fmt.Sprintf("the record at offset %d does not read back, though its chunks check out", base)
		}
		p = end // an intact first or middle chunk: on to the next one
	}
}

// intactRecordAfter looks for the start of an intact record (a full or
// first chunk that fits its block and the file and checks out) at any
// offset after p: the writer went on after the chunk at p, which was
// therefore synced whole once. Random bytes pass the checksum with
// probability 2^-32 per offset tried.
func intactRecordAfter(tail []byte, base, p int64) (int64, bool) {
	size := base + int64(len(tail))
	for q := p + 1; q+chunkHeaderSize <= size; q++ {
		h := tail[q-base:]
		n := int64(binary.LittleEndian.Uint16(h[4:]))
		typ := h[6]
		if typ != chunkFull && typ != chunkFirst {
			continue
		}
		end := q + chunkHeaderSize + n
		if end > size || end > (q/manifestBlockSize+1)*manifestBlockSize {
			continue
		}
		if pebbleCRC(h[6:end-q]) == binary.LittleEndian.Uint32(h) {
			return q, true
		}
	}
	return 0, false
}

// lostSector reports whether region, the bytes of a chunk from offset p
// of the file on, show a write that did not reach the disk: the rest of
// p's sector all zeros, or a sector (or the part of the last one the
// region covers) all zeros further on. A changed byte leaves no such hole,
// and version edits hold no run of zeros that starts at a sector boundary
// and runs to the next one or to the chunk's end.
func lostSector(region []byte, p int64) bool {
	end := p + int64(len(region))
	first := min((p/sectorSize+1)*sectorSize, end)
	if allZero(region[:first-p]) {
		return true
	}
	for s := first; s < end; s += sectorSize {
		if allZero(region[s-p : min(s+sectorSize, end)-p]) {
			return true
		}
	}
	return false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
