package inspect

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
	"github.com/greffe/greffe/internal/pebbleslog"
)

// LedgerState is what a stopped ledger folder records about itself.
type LedgerState struct {
	// Format and LedgerID are the identity records.
	Format   string
	LedgerID string
	// Head is the recorded state: size, root (recomputed from the recorded
	// compact range) and the recorded time of the last event.
	Head events.Head
	// Applied is the recorded raft index (0: never a cluster member).
	Applied uint64
}

// ReadLedgerState opens the Pebble folder dir read-only and reads its
// identity and state records, without the checks the store makes when it
// opens and without replaying a write-ahead log: for a backup copy, whose
// tables hold everything. Pebble creates its LOCK file in dir (every open does) and
// writes nothing else. fs nil means the OS.
func ReadLedgerState(dir string, fs vfs.FS) (LedgerState, error) {
	if fs == nil {
		fs = vfs.Default
	}
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, ReadOnly: true, Logger: pebbleslog.Logger{Prefix: "pebble: "}})
	if err != nil {
		return LedgerState{}, fmt.Errorf("open %s read-only: %w", dir, err)
	}
	defer db.Close()
	get := func(k []byte) ([]byte, error) {
		v, closer, err := db.Get(k)
		if err != nil {
			return nil, fmt.Errorf("%s: record %q: %w", dir, k, err)
		}
		defer closer.Close()
		return append([]byte(nil), v...), nil
	}
	format, err := get([]byte(layout.MetaFormat))
	if err != nil {
		return LedgerState{}, err
	}
	id, err := get([]byte(layout.MetaLedgerID))
	if err != nil {
		return LedgerState{}, err
	}
	raw, err := get([]byte(layout.MetaState))
	if err != nil {
		return LedgerState{}, err
	}
	st, err := layout.DecodeState(raw)
	if err != nil {
		return LedgerState{}, fmt.Errorf("%w: %w", err, events.ErrCorrupt)
	}
	size, last, applied, hashes := st.Size, st.LastRecorded, st.Applied, st.Range
	root := events.EmptyRoot
	if size > 0 {
		rng, err := events.RangeFactory.NewRange(0, size, hashes)
		if err != nil {
			return LedgerState{}, fmt.Errorf("state range: %v: %w", err, events.ErrCorrupt)
		}
		r, err := rng.GetRootHash(nil)
		if err != nil {
			return LedgerState{}, fmt.Errorf("state root: %v: %w", err, events.ErrCorrupt)
		}
		root = [32]byte(r)
	}
	return LedgerState{Format: string(format), LedgerID: string(id),
		Head: events.Head{Size: size, Root: root, RecordedAt: last}, Applied: applied}, nil
}
