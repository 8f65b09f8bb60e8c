package pebblelog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// Backups (issue #13).
//
// A backup is the whole ledger of one node at a consistent point: every key
// space, the node-local ones included (this node's signed checkpoints, the
// write-ahead log's seq), unlike a raft snapshot, which carries the
// replicated key spaces only (snapshot.go). The point is a Pebble
// checkpoint taken after a Flush: Pebble runs with its WAL disabled (the
// store's own log, greffe-wal/, is not part of a checkpoint), so only what
// a flush put in tables is in the copy, and a flush always ends at a batch
// boundary (a Pebble batch sits whole in one memtable). The copy's own
// state key, not the live store's head, says what it holds.
//
// The copy hard-links the immutable tables and blob files: taking it costs
// the flush and a few small file copies (the MANIFEST and OPTIONS), not the
// size of the ledger, and writes go on meanwhile. Its folder lives in
// <ledger>.backups/ until Release; a crash leaves it behind, and
// RemoveBackupLeftovers (called before Open) deletes it.
//
// A backup copy opened by a store (after a restore) has no write-ahead log
// records to replay: everything it holds is in tables, and the log numbers
// its records on from the seq the tables record (internal/wal).

// BackupInfo describes the state a backup copy holds.
type BackupInfo struct {
	// LedgerID and Origin identify the ledger.
	LedgerID string
	Origin   string
	// Format is the store format string of the copy (docs/FORMAT.md).
	Format string
	// Head is the state the copy holds: its size, root and the recorded
	// time of its last event.
	Head events.Head
	// Applied is the raft index of the last batch applied in the copy (0 for
	// a ledger that never was a cluster member).
	Applied uint64
	// Checkpoint is a checkpoint signed by this node at exactly Head.Size.
	// It is signed (and stored) after the copy was taken, so the copy's own
	// stored checkpoints end at or before it.
	Checkpoint events.Checkpoint
}

// Backup is a consistent copy of the store in a folder next to it, held
// until Release. The folder is a complete Pebble directory that no open
// database shares: reading it (or opening it read-only) never touches the
// live store. Release must be called once. Not safe for concurrent use.
type Backup struct {
	fs   vfs.FS
	dir  string
	info BackupInfo
	once sync.Once
}

// backupsDir is where backup copies wait to be streamed.
func backupsDir(dir string) string { return strings.TrimRight(dir, "/") + ".backups" }

// Backup takes a consistent copy of the whole ledger while appends go on,
// and makes sure a signed checkpoint exists at exactly the copy's size: when
// the flushed state is ahead of the acknowledged head (a batch applied but
// not yet fsynced), it first waits for the head to reach it, bounded by ctx.
// It needs a signer (ErrNoSigner otherwise). Backups may run concurrently;
// each holds hard links to the tables it covers until Release.
func (s *Store) Backup(ctx context.Context) (*Backup, error) {
	if s.closed.Load() {
		return nil, events.ErrClosed
	}
	if sp := s.signers.Load(); sp == nil || len(*sp) == 0 {
		return nil, ErrNoSigner
	}
	fs := s.fs()
	parent := backupsDir(s.cfg.Dir)
	if err := fs.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	b := &Backup{fs: fs, dir: fs.PathJoin(parent, strconv.FormatUint(rand.Uint64(), 36))}
	if err := s.checkpointAll(b.dir); err != nil {
		b.Release()
		return nil, err
	}
	info, err := b.load(ctx, s)
	if err != nil {
		b.Release()
		return nil, err
	}
	b.info = info
	return b, nil
}

// checkpointAll flushes and checkpoints every key space into dir.
func (s *Store) checkpointAll(dir string) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("backup flush: %w", err)
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("backup checkpoint: %w", err)
	}
	return nil
}

// load reads the copy's state and gets the signed checkpoint of its size.
func (b *Backup) load(ctx context.Context, s *Store) (BackupInfo, error) {
	st, err := inspect.ReadLedgerState(b.dir, b.fs)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	if st.LedgerID != s.ledgerID {
		return BackupInfo{}, fmt.Errorf("backup copy holds ledger %q, the store %q: %w", st.LedgerID, s.ledgerID, events.ErrCorrupt)
	}
	if err := s.waitHead(ctx, st.Head.Size); err != nil {
		return BackupInfo{}, fmt.Errorf("backup: wait for the head to reach the copy's %d events: %w", st.Head.Size, err)
	}
	cp, err := s.CheckpointAt(ctx, st.Head.Size)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("backup: checkpoint at %d: %w", st.Head.Size, err)
	}
	if cp.Root != st.Head.Root {
		return BackupInfo{}, fmt.Errorf("backup: the copy's root at size %d differs from the signed one: %w", st.Head.Size, events.ErrCorrupt)
	}
	return BackupInfo{LedgerID: st.LedgerID, Origin: s.origin, Format: st.Format, Head: st.Head, Applied: st.Applied, Checkpoint: cp}, nil
}

// waitHead waits until the acknowledged head holds at least size events,
// the store fails or closes, or ctx ends.
func (s *Store) waitHead(ctx context.Context, size uint64) error {
	for {
		ch := s.headChanged()
		if s.Head().Size >= size {
			return nil
		}
		if err := s.failure(); err != nil {
			return err
		}
		if s.closed.Load() {
			return events.ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Dir returns the copy's folder: a Pebble directory, valid until Release.
func (b *Backup) Dir() string { return b.dir }

// Info returns what the copy holds.
func (b *Backup) Info() BackupInfo { return b.info }

// Release removes the copy. Idempotent.
func (b *Backup) Release() {
	b.once.Do(func() { _ = b.fs.RemoveAll(b.dir) })
}

// RemoveBackupLeftovers removes the backup copies a crash left next to the
// store in dir. Call it before Open (no backup can be running then); it is a
// no-op when there is none. fs nil means the OS.
func RemoveBackupLeftovers(dir string, fs vfs.FS) error {
	if fs == nil {
		fs = vfs.Default
	}
	p := backupsDir(dir)
	if err := fs.RemoveAll(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove backup leftovers %s: %w", p, err)
	}
	return nil
}

// SeedAppliedIndex records index as the raft index of the last batch
// applied, for a ledger that becomes the first member of a new raft
// cluster with its history (replicator: a ledger written by a single node,
// or restored from a backup): the new cluster's first snapshot is at that
// index, and a follower installs it only if its header's index is above
// the follower's own (0). It refuses an index below the recorded one.
//
// REQUIRES: nothing applies batches (the raft member has not started and
// nothing appends): it writes the sequencer state the applier owns.
func (s *Store) SeedAppliedIndex(index uint64) error {
	if s.closed.Load() {
		return events.ErrClosed
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if index < s.seq.applied {
		return fmt.Errorf("seed raft index %d below the applied index %d: %w", index, s.seq.applied, ErrInvalidConfig)
	}
	if index == s.seq.applied {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set(metaState, layout.State{Size: s.seq.size, LastRecorded: s.seq.lastRecorded, Applied: index, Range: s.seq.rng.Hashes()}.Encode(), nil); err != nil {
		return err
	}
	if err := s.commitSynced(b); err != nil {
		return fmt.Errorf("seed raft index %d: %w", index, err)
	}
	s.seq.applied = index
	return nil
}
