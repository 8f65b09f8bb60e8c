package inspect

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/internal/wal"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// The store's own write-ahead log, read (docs/FORMAT.md, "The write-ahead
// log"): the store (events/pebblelog) writes it and replays it when it
// opens; here it is read without writing, to check it before that open
// (CheckWAL) and to overlay what a store stopped uncleanly holds only
// there (Inspector).

// walDir is where the log's segments are, inside the Pebble directory dir.
func walDir(fs vfs.FS, dir string) string { return fs.PathJoin(dir, layout.WALFolder) }

// RecordBatch is a record of the store's write-ahead log as a Pebble batch
// (a copy: the record's bytes are reused by the reader). The caller closes
// it. A record that is no Pebble batch is corruption.
func RecordBatch(db *pebble.DB, r wal.Record) (*pebble.Batch, error) {
	b := db.NewBatch()
	if err := b.SetRepr(append([]byte(nil), r.Data...)); err != nil {
		b.Close()
		return nil, fmt.Errorf("write-ahead log record %d: %v: %w", r.Seq, err, events.ErrCorrupt)
	}
	return b, nil
}

// ReadWALSeq reads the seq of the last write-ahead log record the
// database r holds (layout.WALSeq; 0 when absent): the records after it
// are the ones it lacks.
func ReadWALSeq(r pebble.Reader) (uint64, error) {
	v, closer, err := r.Get([]byte(layout.WALSeq))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", layout.WALSeq, err)
	}
	defer closer.Close()
	seq, err := layout.ParseWALSeq(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", err, events.ErrCorrupt)
	}
	return seq, nil
}

// HoldsWALRecords reports whether the store's log in the Pebble directory
// dir has a segment that is not empty: the store was not closed cleanly
// (its Close drops every segment), or is open.
func HoldsWALRecords(fs vfs.FS, dir string) bool {
	segs, err := fs.List(walDir(fs, dir))
	if err != nil {
		return false // no log folder: nothing logged
	}
	for _, n := range segs {
		if strings.HasSuffix(n, ".wal") && !strings.HasPrefix(n, "free-") {
			if fi, err := fs.Stat(fs.PathJoin(walDir(fs, dir), n)); err == nil && fi.Size() > 0 {
				return true
			}
		}
	}
	return false
}

// CheckWAL reads the write-ahead log of the store in dir, stopped without
// a clean close, as the store's open will, before Pebble opens the folder
// read-write: that open writes a new MANIFEST, OPTIONS file and WAL file
// and removes the old ones, so a damaged log found after it would be
// refused in a folder that is no longer as the damage left it (issue #13:
// an operator, or verify, must find it untouched). It opens Pebble
// read-only for the seq its tables hold (layout.WALSeq), reads the log
// with wal.Check (wal.Open's verdict, nothing written) and checks that
// each record the open would replay is a Pebble batch. A damaged log is a
// *DamageError naming the segment and the offset.
//
// It costs nothing after a clean close (the log is empty). After a crash
// it costs a read-only open of Pebble and a read of the segments, which
// the store's open then reads again from the page cache: at most the
// store's live segments and the one taking writes, which a crash rarely
// leaves full. A folder another process holds is an error matching
// ErrLocked. REQUIRES: Pebble not open on the folder in this process.
func CheckWAL(fs vfs.FS, dir string) error {
	if !HoldsWALRecords(fs, dir) {
		return nil
	}
	db, err := openReadOnly(Config{Dir: dir, CacheSize: 1 << 20}, fs)
	if err != nil {
		if IsLockError(err) {
			return InUse(dir, err)
		}
		// The read-write open reports what is wrong with Pebble's own
		// files, as it always did.
		return nil
	}
	defer db.Close()
	after, err := ReadWALSeq(db)
	if err != nil {
		return err
	}
	err = wal.Check(fs, walDir(fs, dir), after, func(r wal.Record) error {
		b, err := RecordBatch(db, r)
		if err != nil {
			return err
		}
		return b.Close()
	})
	if de, ok := walDamage(fs, dir, err); ok {
		return de
	}
	if err != nil {
		return fmt.Errorf("read write-ahead log: %w", err)
	}
	return nil
}

// walDamage returns err, met reading the write-ahead log of the store in
// dir, as a *DamageError when it shows damage: a damaged segment (naming
// it and the offset), a record that is no Pebble batch, or damage Pebble
// met under the overlay.
func walDamage(fs vfs.FS, dir string, err error) (*DamageError, bool) {
	var de *DamageError
	var wd *wal.DamageError
	switch {
	case errors.As(err, &de):
		return de, true
	case errors.As(err, &wd):
		// The file and the offset are the DamageError's own; its error
		// says only what is wrong there, or the path and offset would be
		// said twice.
		return &DamageError{File: wd.File, Offset: int64(wd.Offset), Err: fmt.Errorf("%w: %s", wal.ErrCorrupt, wd.What)}, true
	case errors.Is(err, wal.ErrCorrupt), errors.Is(err, events.ErrCorrupt):
		return &DamageError{File: walDir(fs, dir), Offset: -1, Err: err}, true
	}
	return nil, false
}

// overlayWAL reads the store's write-ahead log and, if it
// holds records that the tables lack, stacks them on the database in an
// indexed batch that is never committed: the inspector sees what the next
// open of the store will see, and writes nothing.
func (in *Inspector) overlayWAL(fs vfs.FS, dir string) error {
	after, err := ReadWALSeq(in.db)
	if err != nil {
		return err
	}
	return wal.Read(fs, walDir(fs, dir), after, func(r wal.Record) error {
		rec, err := RecordBatch(in.db, r)
		if err != nil {
			return err
		}
		defer rec.Close()
		if in.overlay == nil {
			in.overlay = in.db.NewIndexedBatch()
			in.r = in.overlay
		}
		in.Replayed++
		return in.overlay.Apply(rec, nil)
	})
}
