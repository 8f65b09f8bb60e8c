package pebblelog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/internal/wal"
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

// walDir is where the log's segments are, inside the Pebble directory dir.
func walDir(fs vfs.FS, dir string) string { return fs.PathJoin(dir, "greffe-wal") }

// recordBatch is a log record as a Pebble batch (a copy: the record's
// bytes are reused by the reader). The caller closes it.
func recordBatch(db *pebble.DB, r wal.Record) (*pebble.Batch, error) {
	b := db.NewBatch()
	if err := b.SetRepr(append([]byte(nil), r.Data...)); err != nil {
		b.Close()
		return nil, fmt.Errorf("write-ahead log record %d: %v: %w", r.Seq, err, events.ErrCorrupt)
	}
	return b, nil
}

// openWAL opens the log, applies to Pebble the records its flushed tables
// lack, flushes, and drops every segment. REQUIRES: s.db open, nothing else
// running.
func (s *Store) openWAL() error {
	after, err := readWALSeq(s.db)
	if err != nil {
		return err
	}
	replayed := 0
	l, err := wal.Open(wal.Options{FS: s.fs(), Dir: walDir(s.fs(), s.cfg.Dir), SegmentSize: s.cfg.WALSegmentSize}, after, func(r wal.Record) error {
		b, err := recordBatch(s.db, r)
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
	return nil
}

// readWALSeq reads walSeqKey from r (0 when absent).
func readWALSeq(r pebble.Reader) (uint64, error) {
	v, closer, err := r.Get(walSeqKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", walSeqKey, err)
	}
	defer closer.Close()
	return decodeWALSeq(v)
}

func decodeWALSeq(v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%s holds %d bytes, want 8: %w", walSeqKey, len(v), events.ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), nil
}

// writeBatch appends b to the log and applies it to Pebble, without
// waiting for the disk: the caller syncs (SyncTo the returned position)
// before acknowledging anything b holds. Readers may see b's keys before
// then; the store never shows events past the acknowledged head.
// REQUIRES: dbMu held for reading.
func (s *Store) writeBatch(b *pebble.Batch) (end uint64, err error) {
	s.walMu.Lock()
	defer s.walMu.Unlock()
	seq, end, err := s.appendWAL(b)
	if err != nil {
		return 0, err
	}
	return end, s.applyWAL(b, seq)
}

// appendWAL numbers b (walSeqKey) and appends it to the log. The caller
// must applyWAL it before releasing walMu, so that Pebble applies batches
// in the log's order. REQUIRES: walMu held, dbMu held for reading.
func (s *Store) appendWAL(b *pebble.Batch) (seq, end uint64, err error) {
	// walMu makes the log's next seq ours: every append takes it.
	seq = s.wal.LastSeq() + 1
	if err := b.Set(walSeqKey, u64(seq), nil); err != nil {
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
	end, err := s.writeBatch(b)
	if err != nil {
		return err
	}
	return s.wal.SyncTo(end)
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
				s.cfg.Logger.Warn("drop write-ahead log segments", "err", err)
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
	return decodeWALSeq(v)
}
