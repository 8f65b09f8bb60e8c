package pebblelog

import (
	"io"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Flush writes the memtable to sstables (and separated values to blob
// files), for tests that need data below the memtable.
func (s *Store) Flush() error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	return s.db.Flush()
}

// SetKey writes key = value into the closed store at dir, as damage or
// another version would have left it.
func SetKey(dir string, key, value []byte) error {
	s := &Store{cfg: Config{Dir: dir, FS: vfs.Default, CacheSize: 1 << 20, MemTableSize: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	db, err := s.openPebble()
	if err != nil {
		return err
	}
	if err := db.Set(key, value, pebble.NoSync); err != nil {
		_ = db.Close()
		return err
	}
	if err := db.Flush(); err != nil {
		_ = db.Close()
		return err
	}
	return db.Close()
}

// SetFormat records format as the store's format in the closed store at dir,
// as a store written by another version would hold it.
func SetFormat(dir, format string) error {
	s := &Store{cfg: Config{Dir: dir, FS: vfs.Default, CacheSize: 1 << 20, MemTableSize: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	db, err := s.openPebble()
	if err != nil {
		return err
	}
	// Pebble runs without its own WAL: the flush makes the write durable.
	if err := db.Set(metaFormat, []byte(format), pebble.NoSync); err != nil {
		_ = db.Close()
		return err
	}
	if err := db.Flush(); err != nil {
		_ = db.Close()
		return err
	}
	return db.Close()
}

// TableKeyRanges returns the first and last user key of every sstable.
func (s *Store) TableKeyRanges() ([][2][]byte, error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	levels, err := s.db.SSTables()
	if err != nil {
		return nil, err
	}
	var out [][2][]byte
	for _, tables := range levels {
		for _, t := range tables {
			out = append(out, [2][]byte{t.Smallest.UserKey, t.Largest.UserKey})
		}
	}
	return out, nil
}
