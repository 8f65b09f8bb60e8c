package pebblelog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/internal/wal"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// The store's write-ahead log.
//
// Pebble runs with its WAL disabled; every write to the ledger's Pebble goes
// through writeBatch, which appends the batch to the store's own log
// (internal/wal) and then applies it to Pebble's memtable, as one step.
// Each batch also sets walSeqKey to its record's seq, so Pebble's flushed
// tables say exactly which records they hold: at open, the records after
// that seq are applied again, in order, then Pebble is flushed and the log
// emptied. While running, each completed log segment triggers a flush,
// after which the segments it covered are dropped (recycled).
//
// Why: a synced Pebble commit hands the record to Pebble's flush goroutine
// and waits to be woken, two goroutine wake-ups per commit; here the
// committer writes and fdatasyncs on its own goroutine. And recycled
// segments are rewritten in place, which a disk syncs faster than a file
// that grows (docs/PERFORMANCE.md, "A new store and a running one").
//
// Durability is unchanged: an append is acknowledged after the fdatasync
// that covers its record (SyncTo); a signed checkpoint is synced after the
// events it covers (one ordered log); replicated batches are written
// without a sync, as before, the raft log being their write-ahead log.
//
// With Config.WAL = WALPebble the same functions commit to Pebble's WAL
// instead (Pebble applies and logs in one call, and a batch's SyncWait is
// its fsync); the log is then opened only to replay what it holds.
//
// Any error of either log fails the store (fail): it refuses every write
// until it is reopened, which reads back what reached the disk.

// walDir is where the log's segments are, inside the Pebble directory dir.
func walDir(fs vfs.FS, dir string) string { return fs.PathJoin(dir, layout.WALFolder) }

// openWAL opens the log, applies to Pebble the records its flushed tables
// lack, flushes, and drops every segment. REQUIRES: s.db open, nothing else
// running.
func (s *Store) openWAL() error {
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
	s.wal = l
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
	s.walApplied.Store(last)
	if s.pebbleWAL {
		// Pebble's WAL takes the writes; this log is empty, and the next
		// open reads it again in case a binary with WALGreffe wrote to it.
		s.wal = nil
		return l.Close()
	}
	return nil
}

// writeBatch appends b to the log and applies it to Pebble, without
// waiting for the disk: the caller syncs (SyncTo the returned position)
// before acknowledging anything b holds. Readers may see b's keys before
// then; the store never shows events past the acknowledged head.
// REQUIRES: dbMu held for reading.
func (s *Store) writeBatch(b *pebble.Batch) (end uint64, err error) {
	if s.pebbleWAL {
		return 0, s.failOn(s.guard(func() error { return s.db.Apply(b, pebble.NoSync) }))
	}
	s.walMu.Lock()
	defer s.walMu.Unlock()
	seq, end, err := s.appendWAL(b)
	if err != nil {
		return 0, s.failOn(err)
	}
	return end, s.failOn(s.applyWAL(b, seq))
}

// failOn fails the store when err is not nil, and returns err.
func (s *Store) failOn(err error) error {
	if err != nil {
		s.fail(err)
	}
	return err
}

// appendWAL numbers b (walSeqKey) and appends it to the log. The caller
// must applyWAL it before releasing walMu, so that Pebble applies batches
// in the log's order. REQUIRES: walMu held, dbMu held for reading.
func (s *Store) appendWAL(b *pebble.Batch) (seq, end uint64, err error) {
	// walMu makes the log's next seq ours: every append takes it.
	seq = s.wal.LastSeq() + 1
	if err := b.Set(walSeqKey, layout.AppendWALSeq(nil, seq), nil); err != nil {
		return 0, 0, err
	}
	got, end, err := s.wal.Append(b.Repr())
	if err != nil {
		return 0, 0, err
	}
	if got != seq {
		return 0, 0, fmt.Errorf("write-ahead log gave record %d where %d was expected: %w", got, seq, events.ErrCorrupt)
	}
	return seq, end, nil
}

// applyWAL applies to Pebble's memtable the batch appendWAL logged as seq.
// REQUIRES: as appendWAL.
func (s *Store) applyWAL(b *pebble.Batch, seq uint64) error {
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("apply record %d: %w", seq, err)
	}
	s.walApplied.Store(seq)
	return nil
}

// commitSynced is writeBatch followed by the sync. REQUIRES: dbMu held
// for reading.
func (s *Store) commitSynced(b *pebble.Batch) error {
	if err := s.failure(); err != nil {
		return fmt.Errorf("%w: %v", errStoreFailed, err)
	}
	if s.pebbleWAL {
		return s.failOn(s.guard(func() error { return s.db.Apply(b, pebble.Sync) }))
	}
	end, err := s.writeBatch(b)
	if err != nil {
		return err
	}
	return s.failOn(s.wal.SyncTo(end))
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

// maxLiveSegments bounds the log between Pebble's own flushes: past it, a
// completed segment forces a flush.
const maxLiveSegments = 4

// walDropLoop drops the log segments whose records Pebble's tables hold.
// It looks after each completed segment and every second: Pebble flushes a
// memtable when it is full, and the walSeqKey its tables hold says how far
// that reached. Forcing a flush at each segment instead cost 10-15 % more
// flush and compaction work under load (more, smaller tables); a flush is
// forced only when the log grows past maxLiveSegments without one.
func (s *Store) walDropLoop(ctx context.Context) {
	for {
		s.dbMu.RLock()
		l := s.wal
		s.dbMu.RUnlock()
		select {
		case <-ctx.Done():
			return
		case <-l.Rotated():
		case <-time.After(time.Second):
		}
		s.dbMu.RLock()
		if s.wal == l {
			if err := s.dropFlushed(l); err != nil {
				// A flush, a rename or a folder sync that failed: the disk
				// is not trusted any more (see fail).
				s.fail(fmt.Errorf("drop write-ahead log segments: %w", err))
			}
		}
		s.dbMu.RUnlock()
	}
}

// dropFlushed drops the segments covered by Pebble's tables, flushing first
// if the log is too long. REQUIRES: dbMu held for reading.
func (s *Store) dropFlushed(l *wal.Log) error {
	if l.Segments() > maxLiveSegments {
		applied := s.walApplied.Load()
		if err := s.db.Flush(); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		return l.DropThrough(applied, false)
	}
	durable, err := s.durableWALSeq()
	if err != nil {
		return err
	}
	return l.DropThrough(durable, false)
}

// durableWALSeq reads walSeqKey as Pebble's tables hold it, memtables
// ignored: the last record that a crash would not need.
func (s *Store) durableWALSeq() (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{OnlyReadGuaranteedDurable: true,
		LowerBound: walSeqKey, UpperBound: append(append([]byte(nil), walSeqKey...), 0)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.First() {
		return 0, it.Error()
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return 0, err
	}
	seq, err := layout.ParseWALSeq(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", err, events.ErrCorrupt)
	}
	return seq, nil
}
