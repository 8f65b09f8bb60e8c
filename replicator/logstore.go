package replicator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/internal/pebbleslog"
)

// LogStore is raft's log and stable store, in a Pebble instance of its own
// (<data>/raft/log), apart from the ledger's: raft truncates its log freely,
// and the ledger must never share a write-ahead log or a compaction with it.
//
// Keys:
//
//	'l' index(8)  -> one log entry (layout below)
//	's' key       -> a stable-store value (current term, last vote, ...)
//
// Indexes are big-endian so that key order is index order; truncation is
// one range deletion. Every write is synced before it returns: raft counts
// an entry as persisted (and votes as cast) when StoreLogs or Set returns.
//
// An entry is encoded as: version(1)=1 term(8) type(1) appended_at(8, Unix
// ns) len(extensions)(uvarint) extensions data. The index is the key.
//
// Safe for concurrent use: raft reads entries from its replication
// goroutines while the main goroutine appends and the snapshot goroutine
// truncates.
type LogStore struct {
	db *pebble.DB

	// mu serialises writes so that first and last follow the stored log.
	mu          sync.Mutex
	first, last atomic.Uint64 // 0 when the log is empty
}

var (
	_ raft.LogStore    = (*LogStore)(nil)
	_ raft.StableStore = (*LogStore)(nil)
)

const (
	prefixLog    byte = 'l'
	prefixStable byte = 's'
	logVersion   byte = 1
)

// OpenLogStore opens or creates the store in dir on fs (nil: the operating
// system's; tests pass vfs.NewCrashableMem() to simulate a power loss).
// logger receives Pebble's own logs at debug level (nil: discarded).
func OpenLogStore(dir string, fs vfs.FS, logger *slog.Logger) (*LogStore, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	opts := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		Cache:              cache,
		// Entries are whole group-commit batches (up to 16 MiB); a 64 MiB
		// memtable holds several before a flush.
		MemTableSize: 64 << 20,
		Logger:       pebbleslog.Logger{L: logger, Prefix: "pebble (raft log): "},
		FS:           fs, // nil is Pebble's default, the OS
	}
	// Entries are read back by index, mostly soon after they were written
	// (from the memtable); compression would cost CPU on every append for
	// a log that is truncated anyway.
	for i := range opts.Levels {
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open raft log %s: %w", dir, err)
	}
	s := &LogStore{db: db}
	if err := s.reloadBounds(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes Pebble. The store must not be used afterwards.
func (s *LogStore) Close() error { return s.db.Close() }

func logKey(index uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], index)
	return k
}

func stableKey(key []byte) []byte { return append([]byte{prefixStable}, key...) }

// reloadBounds reads the first and last stored indexes. REQUIRES: s.mu held
// or no concurrent writer (Open).
func (s *LogStore) reloadBounds() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLog}, UpperBound: []byte{prefixLog + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	var first, last uint64
	if it.First() {
		first = binary.BigEndian.Uint64(it.Key()[1:])
		it.Last()
		last = binary.BigEndian.Uint64(it.Key()[1:])
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("raft log bounds: %w", err)
	}
	s.first.Store(first)
	s.last.Store(last)
	return nil
}

// FirstIndex returns the first stored index, 0 for an empty log.
func (s *LogStore) FirstIndex() (uint64, error) { return s.first.Load(), nil }

// LastIndex returns the last stored index, 0 for an empty log.
func (s *LogStore) LastIndex() (uint64, error) { return s.last.Load(), nil }

// GetLog reads the entry at index into out, or returns raft.ErrLogNotFound.
// out.Data and out.Extensions are fresh copies owned by the caller.
func (s *LogStore) GetLog(index uint64, out *raft.Log) error {
	v, closer, err := s.db.Get(logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("raft log %d: %w", index, err)
	}
	defer closer.Close()
	return decodeLog(index, v, out)
}

func encodeLog(l *raft.Log) []byte {
	b := make([]byte, 0, 18+binary.MaxVarintLen64+len(l.Extensions)+len(l.Data))
	b = append(b, logVersion)
	b = binary.BigEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	b = append(b, l.Extensions...)
	return append(b, l.Data...)
}

// errBadEntry marks a stored entry that does not decode.
var errBadEntry = errors.New("replicator: damaged raft log entry")

func decodeLog(index uint64, v []byte, out *raft.Log) error {
	if len(v) < 18 || v[0] != logVersion {
		return fmt.Errorf("%w at index %d", errBadEntry, index)
	}
	out.Index = index
	out.Term = binary.BigEndian.Uint64(v[1:])
	out.Type = raft.LogType(v[9])
	out.AppendedAt = time.Time{}
	if at := int64(binary.BigEndian.Uint64(v[10:])); at != 0 {
		out.AppendedAt = time.Unix(0, at)
	}
	n, w := binary.Uvarint(v[18:])
	if w <= 0 || uint64(len(v)-18-w) < n {
		return fmt.Errorf("%w at index %d", errBadEntry, index)
	}
	rest := v[18+w:]
	out.Extensions = nil
	if n > 0 {
		out.Extensions = bytes.Clone(rest[:n])
	}
	out.Data = bytes.Clone(rest[n:])
	return nil
}

// StoreLog stores one entry.
func (s *LogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries in one synced Pebble batch: all or none.
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	lo, hi := logs[0].Index, logs[0].Index
	for _, l := range logs {
		if err := b.Set(logKey(l.Index), encodeLog(l), nil); err != nil {
			return err
		}
		lo, hi = min(lo, l.Index), max(hi, l.Index)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("store raft log [%d, %d]: %w", lo, hi, err)
	}
	if f := s.first.Load(); f == 0 || lo < f {
		s.first.Store(lo)
	}
	if hi > s.last.Load() {
		s.last.Store(hi)
	}
	return nil
}

// DeleteRange deletes entries [lo, hi] (inclusive, as raft asks) with one
// synced range deletion.
func (s *LogStore) DeleteRange(lo, hi uint64) error {
	if hi < lo {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	end := logKey(hi + 1)
	if hi == ^uint64(0) {
		end = []byte{prefixLog + 1}
	}
	if err := s.db.DeleteRange(logKey(lo), end, pebble.Sync); err != nil {
		return fmt.Errorf("delete raft log [%d, %d]: %w", lo, hi, err)
	}
	return s.reloadBounds()
}

// Set stores a stable value, synced.
func (s *LogStore) Set(key, val []byte) error {
	if err := s.db.Set(stableKey(key), val, pebble.Sync); err != nil {
		return fmt.Errorf("raft stable set %q: %w", key, err)
	}
	return nil
}

// Get returns a stable value (a copy), or an empty slice and no error when
// the key was never set, as raft expects.
func (s *LogStore) Get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return []byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raft stable get %q: %w", key, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// SetUint64 stores a stable number (big-endian), synced.
func (s *LogStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns a stable number, or 0 when it was never set.
func (s *LogStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, fmt.Errorf("raft stable %q holds %d bytes, want 8: %w", key, len(v), errBadEntry)
}
