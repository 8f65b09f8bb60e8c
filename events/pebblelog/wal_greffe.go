package pebblelog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/internal/wal"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// greffeLog is the store's own write-ahead log (internal/wal), the
// default, with Pebble's WAL disabled: every batch is appended to the log
// and then applied to Pebble's memtable, as one step under mu. Each batch
// also sets layout.WALSeq to its record's seq, so Pebble's flushed tables
// say exactly which records they hold: at open, the records after that seq
// are applied again, in order (openLog), then Pebble is flushed and the
// log emptied. While running, the drop loop frees the segments Pebble's
// tables cover (they are recycled).
//
// Why: a synced Pebble commit hands the record to Pebble's flush goroutine
// and waits to be woken, two goroutine wake-ups per commit; here the
// committer writes and fdatasyncs on its own goroutine. And recycled
// segments are rewritten in place, which a disk syncs faster than a file
// that grows (docs/PERFORMANCE.md, "A new store and a running one").
//
// It owns its drop loop: newGreffeLog starts it, close stops it and waits.
type greffeLog struct {
	db   *pebble.DB
	log  *wal.Log
	fail func(error) // fails the store

	// mu makes "append to the log, then apply to Pebble" one step, so that
	// Pebble applies batches in the log's order; it also makes the log's
	// next seq the appender's.
	mu sync.Mutex
	// applied is the seq of the last batch applied to Pebble.
	applied atomic.Uint64

	cancel context.CancelFunc
	done   chan struct{} // closed when the drop loop has returned
}

// newGreffeLog takes l, opened and replayed into db, and starts its drop
// loop.
func newGreffeLog(db *pebble.DB, l *wal.Log, fail func(error)) *greffeLog {
	ctx, cancel := context.WithCancel(context.Background())
	g := &greffeLog{db: db, log: l, fail: fail, cancel: cancel, done: make(chan struct{})}
	g.applied.Store(l.LastSeq())
	go func() {
		defer close(g.done)
		g.dropLoop(ctx)
	}()
	return g
}

func (g *greffeLog) apply(b *pebble.Batch) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	seq, _, err := g.appendLocked(b)
	if err != nil {
		return err
	}
	return g.applyLocked(b, seq)
}

func (g *greffeLog) commit(b *pebble.Batch) error {
	g.mu.Lock()
	seq, end, err := g.appendLocked(b)
	if err == nil {
		err = g.applyLocked(b, seq)
	}
	g.mu.Unlock()
	if err != nil {
		return err
	}
	return g.log.SyncTo(end)
}

// start hands the syncer the record's sync before the batch is applied:
// applying a batch of a thousand events takes about as long as its sync,
// and the two overlap.
func (g *greffeLog) start(b *pebble.Batch, logged func(wait func() error)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	seq, end, err := g.appendLocked(b)
	if err != nil {
		return err
	}
	l := g.log
	logged(func() error { return l.SyncTo(end) })
	return g.applyLocked(b, seq)
}

// appendLocked numbers b (layout.WALSeq) and appends it to the log. The
// caller must applyLocked it before releasing mu, so that Pebble applies
// batches in the log's order. REQUIRES: g.mu held.
func (g *greffeLog) appendLocked(b *pebble.Batch) (seq, end uint64, err error) {
	seq = g.log.LastSeq() + 1
	if err := b.Set(walSeqKey, layout.AppendWALSeq(nil, seq), nil); err != nil {
		return 0, 0, err
	}
	got, end, err := g.log.Append(b.Repr())
	if err != nil {
		return 0, 0, err
	}
	if got != seq {
		return 0, 0, fmt.Errorf("write-ahead log gave record %d where %d was expected: %w", got, seq, events.ErrCorrupt)
	}
	return seq, end, nil
}

// applyLocked applies to Pebble's memtable the batch appendLocked logged
// as seq. REQUIRES: g.mu held.
func (g *greffeLog) applyLocked(b *pebble.Batch, seq uint64) error {
	if err := g.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("apply record %d: %w", seq, err)
	}
	g.applied.Store(seq)
	return nil
}

func (g *greffeLog) diskBytes() uint64 {
	n, err := g.log.DiskBytes()
	if err != nil {
		return 0
	}
	return n
}

// close stops the drop loop, then drops every segment when Pebble's tables
// hold what they logged (a clean close leaves nothing to replay), and
// closes the log.
func (g *greffeLog) close(flushed bool) error {
	g.cancel()
	<-g.done
	var errs []error
	if flushed {
		errs = append(errs, g.log.DropThrough(g.applied.Load(), true))
	}
	return errors.Join(append(errs, g.log.Close())...)
}

// maxLiveSegments bounds the log between Pebble's own flushes: past it, a
// completed segment forces a flush.
const maxLiveSegments = 4

// dropLoop drops the log segments whose records Pebble's tables hold. It
// looks after each completed segment and every second: Pebble flushes a
// memtable when it is full, and the layout.WALSeq its tables hold says how
// far that reached. Forcing a flush at each segment instead cost 10-15 %
// more flush and compaction work under load (more, smaller tables); a
// flush is forced only when the log grows past maxLiveSegments without
// one. It runs until ctx ends (close); Pebble stays open until then.
func (g *greffeLog) dropLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.log.Rotated():
		case <-time.After(time.Second):
		}
		if err := g.dropFlushed(); err != nil {
			// A flush, a rename or a folder sync that failed: the disk is
			// not trusted any more (see Store.fail).
			g.fail(fmt.Errorf("drop write-ahead log segments: %w", err))
		}
	}
}

// dropFlushed drops the segments covered by Pebble's tables, flushing first
// if the log is too long.
func (g *greffeLog) dropFlushed() error {
	if g.log.Segments() > maxLiveSegments {
		applied := g.applied.Load()
		if err := g.db.Flush(); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		return g.log.DropThrough(applied, false)
	}
	durable, err := g.durableSeq()
	if err != nil {
		return err
	}
	return g.log.DropThrough(durable, false)
}

// durableSeq reads layout.WALSeq as Pebble's tables hold it, memtables
// ignored: the last record that a crash would not need.
func (g *greffeLog) durableSeq() (uint64, error) {
	it, err := g.db.NewIter(&pebble.IterOptions{OnlyReadGuaranteedDurable: true,
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
