// Package pebblestore is the projections' Store on Pebble: the folder
// <data>/projections, where the runner keeps each read model's rows and
// checkpoint. It imports projections (the interface it implements),
// Pebble and the one Pebble logger (internal/pebbleslog); nothing imports it but the node, the
// CLI and tests, which open it and hand it to projections.Open.
package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"

	"github.com/greffe/greffe/internal/pebbleslog"
	"github.com/greffe/greffe/projections"
)

// Store is a projections.Store on a Pebble folder.
type Store struct {
	db *pebble.DB
}

var _ projections.Store = (*Store)(nil)

// Open opens (or creates) the Pebble folder dir. Pebble's own messages go
// to logger (internal/pebbleslog; nil discards them).
func Open(dir string, logger *slog.Logger) (*Store, error) {
	cache := pebble.NewCache(16 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache, MemTableSize: 16 << 20, FormatMajorVersion: pebble.FormatNewest,
		Logger: pebbleslog.Logger{L: logger, Prefix: "pebble (projections): "}})
	if err != nil {
		return nil, fmt.Errorf("open projections %s: %w", dir, err)
	}
	return &Store{db: db}, nil
}

// Get returns a copy of key's value.
func (s *Store) Get(key []byte) ([]byte, bool, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	return bytes.Clone(v), true, nil
}

// Scan calls fn for each key in [lo, hi).
func (s *Store) Scan(lo, hi []byte, fn func(key, value []byte) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return err
	}
	return it.Close()
}

// NewBatch starts a Pebble batch.
func (s *Store) NewBatch() projections.Batch { return batch{s.db.NewBatch()} }

// Close closes Pebble.
func (s *Store) Close() error { return s.db.Close() }

type batch struct{ b *pebble.Batch }

func (b batch) Set(key, value []byte) error     { return b.b.Set(key, value, nil) }
func (b batch) Delete(key []byte) error         { return b.b.Delete(key, nil) }
func (b batch) DeleteRange(lo, hi []byte) error { return b.b.DeleteRange(lo, hi, nil) }
func (b batch) Close() error                    { return b.b.Close() }

func (b batch) Commit(sync bool) error {
	if sync {
		return b.b.Commit(pebble.Sync)
	}
	return b.b.Commit(pebble.NoSync)
}
