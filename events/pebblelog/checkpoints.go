package pebblelog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// SetSigners replaces the checkpoint signers (key rotation: during the
// overlap both the old and the new key sign). Every signer must be named
// after the origin.
func (s *Store) SetSigners(signers []events.Signer) error {
	for _, sg := range signers {
		if sg.Name() != s.origin {
			return fmt.Errorf("signer %q is not named after origin %q", sg.Name(), s.origin)
		}
	}
	sg := append([]events.Signer(nil), signers...)
	s.signers.Store(&sg)
	return nil
}

// ErrNoSigner is returned when a checkpoint is asked for and no key is set.
// It matches events.ErrNoSigner, which is what the API reads (it imports
// no store).
var ErrNoSigner = fmt.Errorf("pebblelog: %w", events.ErrNoSigner)

// loadLastCheckpoint loads the newest stored checkpoint, which must be
// within head, the state just loaded.
func (s *Store) loadLastCheckpoint(h events.Head) error {
	it, err := s.db.NewIter(spanOf(layout.SpaceCheckpoints))
	if err != nil {
		return err
	}
	defer it.Close()
	if it.Last() {
		cp, err := s.parseStored(it.Value())
		if err != nil {
			return fmt.Errorf("last stored checkpoint: %w", err)
		}
		// A signed checkpoint is synced after the events it covers (one
		// ordered log): a head below it means acknowledged events are gone,
		// and the next append would be given a position that was signed.
		if cp.Size > h.Size {
			return fmt.Errorf("%s: the newest signed checkpoint covers %d events, the store holds %d: events it signed are missing; refusing to open (the next append would reuse signed position %d): %w",
				s.cfg.Dir, cp.Size, h.Size, h.Size, events.ErrCorrupt)
		}
		s.ckpt.last.Store(&cp)
		s.ckpt.at.Store(time.Now())
	}
	return it.Error()
}

// parseStored reads a stored checkpoint without verifying signatures (the
// store trusts its own writes; verify checks them against keys).
func (s *Store) parseStored(b []byte) (events.Checkpoint, error) {
	return events.ParseStoredCheckpoint(b)
}

func (s *Store) checkpointLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		last := s.ckpt.last.Load()
		if h := s.Head(); last != nil && h.Size == last.Size {
			continue
		}
		if _, err := s.signHead(ctx); err != nil && !errors.Is(err, ErrNoSigner) && ctx.Err() == nil {
			s.cfg.Logger.Warn("sign checkpoint", "err", err)
		}
	}
}

// signHead signs and stores a checkpoint of the acknowledged head.
func (s *Store) signHead(ctx context.Context) (events.Checkpoint, error) {
	s.ckpt.Lock()
	defer s.ckpt.Unlock()
	h := s.Head()
	if last := s.ckpt.last.Load(); last != nil && last.Size >= h.Size {
		return *last, nil
	}
	cp, err := s.signLocked(h.Size, h.Root)
	if err != nil {
		return events.Checkpoint{}, err
	}
	s.ckpt.last.Store(&cp)
	s.ckpt.at.Store(time.Now())
	return cp, nil
}

// signLocked signs (size, root) and stores the note under its size.
// REQUIRES: s.ckpt held.
func (s *Store) signLocked(size uint64, root [32]byte) (events.Checkpoint, error) {
	sp := s.signers.Load()
	if sp == nil || len(*sp) == 0 {
		return events.Checkpoint{}, ErrNoSigner
	}
	cp, err := events.SignCheckpoint(s.origin, size, root, (*sp)...)
	if err != nil {
		return events.Checkpoint{}, err
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	// Synced: a checkpoint that was served must survive a crash. The events
	// it covers were synced before it (the WAL is ordered).
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set(layout.CheckpointKey(size), cp.Note, nil); err != nil {
		return events.Checkpoint{}, err
	}
	if err := s.commitSynced(b); err != nil {
		return events.Checkpoint{}, fmt.Errorf("store checkpoint %d: %w", size, err)
	}
	return cp, nil
}

// LatestCheckpoint returns a signed checkpoint of the acknowledged head,
// signing one on demand when the log grew since the last.
func (s *Store) LatestCheckpoint(ctx context.Context) (events.Checkpoint, error) {
	return s.signHead(ctx)
}

// LastStoredCheckpoint returns the latest checkpoint signed so far without
// signing a new one, or events.ErrNotFound.
func (s *Store) LastStoredCheckpoint() (events.Checkpoint, error) {
	if cp := s.ckpt.last.Load(); cp != nil {
		return *cp, nil
	}
	return events.Checkpoint{}, events.ErrNotFound
}

// CheckpointAt returns the stored checkpoint of size, or, when none was
// stored and size is within the acknowledged head, signs and stores one
// (the root of any past size is computed from the stored nodes).
func (s *Store) CheckpointAt(ctx context.Context, size uint64) (events.Checkpoint, error) {
	if size > s.Head().Size {
		return events.Checkpoint{}, fmt.Errorf("checkpoint of size %d beyond head %d: %w", size, s.Head().Size, events.ErrNotFound)
	}
	s.dbMu.RLock()
	raw, err := s.get(layout.CheckpointKey(size))
	s.dbMu.RUnlock()
	if err == nil {
		return s.parseStored(raw)
	}
	if !errors.Is(err, events.ErrNotFound) {
		return events.Checkpoint{}, err
	}
	root, err := events.RootAt(ctx, s, size)
	if err != nil {
		return events.Checkpoint{}, err
	}
	s.ckpt.Lock()
	defer s.ckpt.Unlock()
	return s.signLocked(size, root)
}

// StoredCheckpoints calls fn for every stored checkpoint in size order, with
// the raw note as stored. Verification uses it.
func (s *Store) StoredCheckpoints(ctx context.Context, fn func(size uint64, note []byte) error) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	it, err := s.db.NewIter(spanOf(layout.SpaceCheckpoints))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(it.Key()) != 9 {
			return fmt.Errorf("checkpoint key of %d bytes: %w", len(it.Key()), events.ErrCorrupt)
		}
		if err := fn(binary.BigEndian.Uint64(it.Key()[1:]), append([]byte(nil), it.Value()...)); err != nil {
			return err
		}
	}
	return it.Error()
}
