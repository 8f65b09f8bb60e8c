package pebblelog

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/internal/wal"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// The store's write-ahead log.
//
// Every Pebble batch of the ledger reaches the disk through one
// writeAheadLog, in the order it is applied: the store's own log
// (greffeLog, wal_greffe.go; the default) or Pebble's (pebbleLog,
// wal_pebble.go; Config.WAL = WALPebble). Both pass the same
// fault-injection suite (fault_test.go, corruption_test.go), and were
// measured in the same run, alternating: the store's log is 1.01-1.29x
// Pebble's for a lone writer, Pebble's up to 12 % faster with 64 writers
// on two cores (docs/PERFORMANCE.md, "The two write-ahead logs"). Neither
// wins everywhere, so both stay, each in its own file, and nothing else in
// the store asks which one runs: Config.WAL is read where the store opens
// (openPebble, openLog).
//
// Durability is the same with either: an append is acknowledged after the
// sync that covers its batch; a signed checkpoint is synced after the
// events it covers (one ordered log); replicated batches are written
// without a sync, the raft log being their write-ahead log.
//
// Whichever runs, every open first replays what the store's own log holds
// beyond Pebble's tables (openLog), so that a store can switch between
// restarts; Pebble replays its own WAL when it opens. Any error of either
// log fails the store (fail): it refuses every write until it is reopened,
// which reads back what reached the disk.

// writeAheadLog is how a Pebble batch of the ledger is logged and applied.
// Every method takes a batch nobody else writes to, and applies it to
// Pebble's memtable only once it is in the log; batches are applied in
// the order they are logged. The methods are safe for concurrent use; the
// store calls them with dbMu held for reading, and close with dbMu held
// exclusively. An error leaves the batch's outcome unknown (logged, maybe
// applied): the store fails on it.
type writeAheadLog interface {
	// apply logs b and applies it, without waiting for the disk: for
	// replicated batches, whose write-ahead log is raft's.
	apply(b *pebble.Batch) error
	// commit logs b, applies it and returns once the log is synced
	// through b.
	commit(b *pebble.Batch) error
	// start logs b, hands logged the wait that returns once the log is
	// synced through b (it may start the sync at once), then applies b;
	// logged runs before start returns, and only if b was logged. The
	// pipelined group commit (committer.sealLocal) waits on another
	// goroutine, so that applying a batch overlaps its sync.
	start(b *pebble.Batch, logged func(wait func() error)) error
	// diskBytes is the size of the log's own files (0 where Pebble's
	// metrics already count them).
	diskBytes() uint64
	// close stops what the log runs and closes it; flushed says that
	// Pebble's tables hold every batch it logged, which then needs no
	// replay. REQUIRES: dbMu held exclusively; Pebble still open.
	close(flushed bool) error
}

var (
	_ writeAheadLog = (*greffeLog)(nil)
	_ writeAheadLog = pebbleLog{}
)

// walDir is where the store's own log's segments are, inside the Pebble
// directory dir.
func walDir(fs vfs.FS, dir string) string { return fs.PathJoin(dir, layout.WALFolder) }

// pebbleWAL reports whether Pebble runs with its own WAL: Config.WAL, read
// when the store opens.
func (c *Config) pebbleWAL() bool { return c.WAL == WALPebble }

// openLog opens the store's own log, applies to Pebble the records its
// flushed tables lack, flushes, drops every segment, and sets the log
// Config.WAL selects. REQUIRES: s.db open, nothing else running.
func (s *Store) openLog() error {
	after, err := inspect.ReadWALSeq(s.db)
	if err != nil {
		return err
	}
	replayed := 0
	l, err := wal.Open(wal.Options{FS: s.fs(), Dir: walDir(s.fs(), s.cfg.Dir), SegmentSize: s.cfg.WALSegmentSize, Logger: s.cfg.Logger}, after, func(r wal.Record) error {
		b, err := inspect.RecordBatch(s.db, r)
		if err != nil {
			return err
		}
		defer b.Close()
		replayed++
		return s.db.Apply(b, pebble.NoSync)
	})
	if errors.Is(err, wal.ErrCorrupt) {
		return fmt.Errorf("open write-ahead log: %w: %w", events.ErrCorrupt, err)
	}
	if err != nil {
		return fmt.Errorf("open write-ahead log: %w", err)
	}
	last := l.LastSeq()
	// What was replayed (and what Pebble replayed of a WAL of its own, in a
	// store written before this log existed) becomes durable in tables;
	// then no segment is needed any more.
	if err := s.db.Flush(); err != nil {
		_ = l.Close()
		return fmt.Errorf("flush after replaying %d records: %w", replayed, err)
	}
	if err := l.DropThrough(last, true); err != nil {
		_ = l.Close()
		return err
	}
	s.walReplayed.Store(uint64(replayed))
	if replayed > 0 {
		s.cfg.Logger.Info("replayed the write-ahead log", "records", replayed, "through", last)
	}
	if s.cfg.pebbleWAL() {
		// Pebble's WAL takes the writes; this log is empty, and the next
		// open reads it again in case a binary with WALGreffe wrote to it.
		s.log = pebbleLog{db: s.db, fatal: s.fatal}
		return l.Close()
	}
	s.log = newGreffeLog(s.db, l, s.fail)
	return nil
}

// writeBatch logs b and applies it to Pebble, without waiting for the
// disk: for replicated batches (ApplyReplicated). Readers may see b's keys
// before it is durable; the store never shows events past the
// acknowledged head. REQUIRES: dbMu held for reading.
func (s *Store) writeBatch(b *pebble.Batch) error { return s.failOn(s.log.apply(b)) }

// commitSynced logs b, applies it and syncs. REQUIRES: dbMu held for
// reading.
func (s *Store) commitSynced(b *pebble.Batch) error {
	if err := s.failure(); err != nil {
		return fmt.Errorf("%w: %v", errStoreFailed, err)
	}
	return s.failOn(s.log.commit(b))
}

// failOn fails the store when err is not nil, and returns err.
func (s *Store) failOn(err error) error {
	if err != nil {
		s.fail(err)
	}
	return err
}

// holdsLedger reports whether dir holds files of a ledger: tables, blob
// files, or write-ahead log records (of either log). Open initialises a
// store only where it does not.
func holdsLedger(fs vfs.FS, dir string) (bool, error) {
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("list %s: %w", dir, err)
	}
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, ".sst"), strings.HasSuffix(n, ".blob"):
			return true, nil
		case strings.HasSuffix(n, ".log"):
			if fi, err := fs.Stat(fs.PathJoin(dir, n)); err == nil && fi.Size() > 0 {
				return true, nil
			}
		}
	}
	return inspect.HoldsWALRecords(fs, dir), nil
}
