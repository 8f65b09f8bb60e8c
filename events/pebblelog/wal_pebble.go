package pebblelog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleLog is Pebble's own WAL (Config.WAL = WALPebble): Pebble logs and
// applies each batch in one call and syncs it on its own goroutine; a
// batch's SyncWait is its fsync. The store's own log is then only opened
// to replay what it holds (openLog). Chosen for throughput with many
// writers on few cores; the store's log is the default (wal.go).
type pebbleLog struct {
	db *pebble.DB
	// fatal fails the store and ends the process (Store.fatal).
	fatal func(error)
}

func (p pebbleLog) apply(b *pebble.Batch) error {
	return p.guard(func() error { return p.db.Apply(b, pebble.NoSync) })
}

func (p pebbleLog) commit(b *pebble.Batch) error {
	return p.guard(func() error { return p.db.Apply(b, pebble.Sync) })
}

// start has Pebble log, apply and start syncing b in one call; the wait
// is the batch's SyncWait.
func (p pebbleLog) start(b *pebble.Batch, logged func(wait func() error)) error {
	if err := p.guard(func() error { return p.db.ApplyNoSyncWait(b, pebble.Sync) }); err != nil {
		return err
	}
	logged(b.SyncWait)
	return nil
}

// diskBytes is 0: Pebble's metrics count its WAL files.
func (pebbleLog) diskBytes() uint64 { return 0 }

// close has nothing to do: Pebble closes its WAL with the database.
func (pebbleLog) close(bool) error { return nil }

// guard runs fn, a call into Pebble's commit path, and turns a panic into
// fatal: Pebble panics where it cannot go on (a WAL file it rotates that
// fails to close).
func (p pebbleLog) guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			p.fatal(fmt.Errorf("pebble: %v", r))
		}
	}()
	return fn()
}
