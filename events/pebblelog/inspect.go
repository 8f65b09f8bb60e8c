package pebblelog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/internal/wal"
)

// Reading a stopped store for auditors. The Inspector exposes the raw key
// spaces of keys.go exactly as stored, without any of the checks the Store
// makes on open: an auditor must be able to read a damaged store and say
// what is wrong with it, where Open would refuse it.

// StoreFormat is the format string recorded under the meta key "format" by
// this version of the store (see keys.go).
const StoreFormat = storeFormat

// KnownFormat reports whether a store recorded with format f has the keys and
// values this version reads: StoreFormat, or an earlier format Open upgrades
// (keys.go).
func KnownFormat(f string) bool { return f == storeFormat || upgradableFormat(f) }

// Space names a key space of the store (keys.go).
type Space byte

// The key spaces, by their prefix byte.
const (
	SpaceEvents      Space = Space(prefixEvent)      // 'e' position(8) -> event bytes
	SpaceLeafTiles   Space = Space(prefixLeafTile)   // 't' index(8) -> 256 leaf hashes
	SpaceNodes       Space = Space(prefixHash)       // 'h' level(1) index(8) -> node hash
	SpaceStreams     Space = Space(prefixStream)     // 's' stream 0x00 version(8) -> position(8) [count(8)]
	SpaceIDs         Space = Space(prefixID)         // 'i' id(16) -> position(8)
	SpaceCheckpoints Space = Space(prefixCheckpoint) // 'c' size(8) -> signed note
	SpaceMeta        Space = Space(prefixMeta)       // 'm' name -> metadata
)

// Entry is one key/value pair of a key space, as stored. Key includes the
// prefix byte. Both slices alias Pebble's memory and are valid only until
// the callback that received them returns; copy what must outlive it.
type Entry struct {
	Key, Value []byte
}

// InspectConfig configures OpenInspector.
type InspectConfig struct {
	// Dir is the Pebble directory of a store (<data>/ledger). Required.
	Dir string
	// CacheSize is Pebble's block cache, in bytes. Default 32 MiB: the
	// auditor scans each key space once, so a cache buys little.
	CacheSize int64
	// FS is the filesystem. Default: the operating system's.
	FS vfs.FS
}

// Inspector reads the key spaces of a stopped store. It opens Pebble
// read-only: it never writes, and Pebble's directory lock makes it fail
// while a node holds the store. Safe for concurrent use; each Scan uses its
// own iterator.
type Inspector struct {
	db *pebble.DB
	// r is what the scans read: db, or db under an in-memory batch of the
	// write-ahead log's records that db's tables lack (a store stopped
	// without a clean close).
	r       pebble.Reader
	overlay *pebble.Batch
	// Replayed is how many such records were overlaid.
	Replayed int
}

// ErrLocked is returned by OpenInspector when another process (a running
// node) holds the store.
var ErrLocked = errors.New("pebblelog: store in use by another process; stop the node or inspect a copy")

// OpenInspector opens the store in cfg.Dir read-only. A missing directory
// is an error wrapping events.ErrNotFound.
func OpenInspector(cfg InspectConfig) (*Inspector, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: Dir is required", ErrInvalidConfig)
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 32 << 20
	}
	fs := cfg.FS
	if fs == nil {
		fs = vfs.Default
	}
	if _, err := fs.Stat(cfg.Dir); err != nil {
		return nil, fmt.Errorf("open store %s: %v: %w", cfg.Dir, err, events.ErrNotFound)
	}
	cache := pebble.NewCache(cfg.CacheSize)
	defer cache.Unref()
	db, err := pebble.Open(cfg.Dir, &pebble.Options{
		ReadOnly:           true,
		ErrorIfNotExists:   true,
		FormatMajorVersion: pebble.FormatNewest,
		Cache:              cache,
		FS:                 fs,
		Logger:             quietLogger{l: discardLogger()},
	})
	if err != nil {
		if isLockError(err) {
			return nil, fmt.Errorf("open store %s: %w (%v)", cfg.Dir, ErrLocked, err)
		}
		return nil, fmt.Errorf("open store %s read-only: %w", cfg.Dir, err)
	}
	in := &Inspector{db: db, r: db}
	if err := in.overlayWAL(fs, cfg.Dir); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s read-only: %w", cfg.Dir, err)
	}
	return in, nil
}

// overlayWAL reads the store's write-ahead log (walstore.go) and, if it
// holds records that the tables lack, stacks them on the database in an
// indexed batch that is never committed: the inspector sees what the next
// open of the store will see, and writes nothing.
func (in *Inspector) overlayWAL(fs vfs.FS, dir string) error {
	after, err := readWALSeq(in.db)
	if err != nil {
		return err
	}
	return wal.Read(fs, walDir(fs, dir), after, func(r wal.Record) error {
		rec, err := recordBatch(in.db, r)
		if err != nil {
			return err
		}
		defer rec.Close()
		if in.overlay == nil {
			in.overlay = in.db.NewIndexedBatch()
			in.r = in.overlay
		}
		in.Replayed++
		return in.overlay.Apply(rec, nil)
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// isLockError reports whether err is Pebble failing to take the directory
// lock: fcntl's EAGAIN/EACCES from another process, or Pebble's own refusal
// within this process.
func isLockError(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// Close releases the store. Idempotent.
func (in *Inspector) Close() error {
	if in.db == nil {
		return nil
	}
	if in.overlay != nil {
		_ = in.overlay.Close()
		in.overlay = nil
	}
	err := in.db.Close()
	in.db, in.r = nil, nil
	return err
}

// Scan calls fn for every entry of space in key order, until fn returns an
// error (which Scan returns) or ctx ends (checked every 4096 entries).
// Entries alias Pebble's memory: see Entry.
func (in *Inspector) Scan(ctx context.Context, space Space, fn func(Entry) error) error {
	return in.ScanFrom(ctx, space, nil, fn)
}

// ScanFrom is Scan starting at the first key >= start (a full key,
// prefix included; nil starts at the beginning of the space).
func (in *Inspector) ScanFrom(ctx context.Context, space Space, start []byte, fn func(Entry) error) error {
	it, err := in.r.NewIter(&pebble.IterOptions{LowerBound: []byte{byte(space)}, UpperBound: []byte{byte(space) + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	ok := it.First()
	if start != nil {
		ok = it.SeekGE(start)
	}
	for n := 0; ok; ok, n = it.Next(), n+1 {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("read %q space: %w", byte(space), err)
		}
		if err := fn(Entry{Key: it.Key(), Value: v}); err != nil {
			return err
		}
	}
	return it.Error()
}

// ScanEvents calls fn for every entry of the event key space in key order,
// like Scan, but reads it in windows of window positions, each with its own
// iterator bounded to the window. A store closed right after a bulk load
// keeps dozens of overlapping L0 tables (every flush holds events and index
// keys), and one iterator over the whole space merges all of them at every
// step; bounded to a window, an iterator drops the tables that hold no event
// of it. Empty windows are skipped by seeking. A key that is not a
// well-formed event key between windows ends the windowing: the rest of the
// space is scanned in one go, so no key is ever missed.
func (in *Inspector) ScanEvents(ctx context.Context, window uint64, fn func(Entry) error) error {
	if window == 0 {
		return in.Scan(ctx, SpaceEvents, fn)
	}
	end := []byte{prefixEvent + 1}
	// Keys before position 0 (only malformed ones can be there).
	if err := in.scanBounds(ctx, []byte{prefixEvent}, eventKey(0), fn); err != nil {
		return err
	}
	for next := uint64(0); ; {
		k, ok, err := in.firstFrom(eventKey(next), end)
		if err != nil || !ok {
			return err
		}
		p, valid := ParseEventKey(k)
		if !valid {
			return in.scanBounds(ctx, eventKey(next), end, fn)
		}
		lo := p - p%window
		hi := lo + window
		if hi < lo { // the last window of the key space
			return in.scanBounds(ctx, eventKey(max(lo, next)), end, fn)
		}
		if err := in.scanBounds(ctx, eventKey(max(lo, next)), eventKey(hi), fn); err != nil {
			return err
		}
		next = hi
	}
}

// firstFrom returns (a copy of) the first key in [lower, upper).
func (in *Inspector) firstFrom(lower, upper []byte) ([]byte, bool, error) {
	it, err := in.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	if !it.First() {
		return nil, false, it.Error()
	}
	return append([]byte(nil), it.Key()...), true, nil
}

// scanBounds calls fn for every entry in [lower, upper).
func (in *Inspector) scanBounds(ctx context.Context, lower, upper []byte, fn func(Entry) error) error {
	it, err := in.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok, n := it.First(), 0; ok; ok, n = it.Next(), n+1 {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("read event space: %w", err)
		}
		if err := fn(Entry{Key: it.Key(), Value: v}); err != nil {
			return err
		}
	}
	return it.Error()
}

// Meta is the store's metadata as recorded. A field that is missing or
// does not parse is reported in the matching error field rather than
// failing the whole read, so that an auditor can say what is wrong.
type Meta struct {
	// Format is the recorded format string (compare with StoreFormat).
	Format string
	// LedgerID is the recorded ledger identity.
	LedgerID string
	// State is the recorded sequencer state; valid when StateErr is nil.
	State State
	// FormatErr, LedgerErr and StateErr say why a field could not be read.
	FormatErr, LedgerErr, StateErr error
}

// State is the sequencer state recorded with every batch.
type State struct {
	// Size is the number of events the state claims.
	Size uint64
	// LastRecorded is the recorded_at of the last event, Unix nanoseconds.
	LastRecorded int64
	// Applied is the raft index of the last applied batch (0 on one node).
	Applied uint64
	// Range holds the hashes of the compact range [0, Size), left to right.
	Range [][]byte
}

// Meta reads the store's metadata.
func (in *Inspector) Meta() Meta {
	var m Meta
	get := func(k []byte) ([]byte, error) {
		v, closer, err := in.r.Get(k)
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, fmt.Errorf("meta %q missing: %w", k[1:], events.ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		out := append([]byte(nil), v...)
		_ = closer.Close()
		return out, nil
	}
	f, err := get(metaFormat)
	m.Format, m.FormatErr = string(f), err
	id, err := get(metaLedgerID)
	m.LedgerID, m.LedgerErr = string(id), err
	raw, err := get(metaState)
	if err != nil {
		m.StateErr = err
		return m
	}
	size, last, applied, hashes, err := decodeState(raw)
	if err != nil {
		m.StateErr = err
		return m
	}
	m.State = State{Size: size, LastRecorded: last, Applied: applied, Range: hashes}
	return m
}

// ParseEventKey returns the position of an 'e' key; ok is false for a key
// of another shape.
func ParseEventKey(k []byte) (pos uint64, ok bool) {
	if len(k) != 9 || k[0] != prefixEvent {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// EventKey returns the key of the event at pos (for tools and tests that
// address the raw store).
func EventKey(pos uint64) []byte { return eventKey(pos) }

// ParseLeafTileKey returns the tile index of a 't' key.
func ParseLeafTileKey(k []byte) (index uint64, ok bool) {
	if len(k) != 9 || k[0] != prefixLeafTile {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// LeafTileKey returns the key of leaf tile index.
func LeafTileKey(index uint64) []byte { return leafTileKey(index) }

// ParseNodeKey returns the level and index of an 'h' key.
func ParseNodeKey(k []byte) (level uint, index uint64, ok bool) {
	if len(k) != 10 || k[0] != prefixHash {
		return 0, 0, false
	}
	return uint(k[1]), binary.BigEndian.Uint64(k[2:]), true
}

// NodeKey returns the key of the stored node (level, index).
func NodeKey(level uint, index uint64) []byte { return hashKey(level, index) }

// ParseStreamKey returns the stream name and version of an 's' key. The
// stream aliases k.
func ParseStreamKey(k []byte) (stream []byte, version uint64, ok bool) {
	if len(k) < 1+1+8 || k[0] != prefixStream || k[len(k)-9] != 0 {
		return nil, 0, false
	}
	return k[1 : len(k)-9], binary.BigEndian.Uint64(k[len(k)-8:]), true
}

// ParseStreamRun decodes a stream-index value: the run of count events
// starting at the key's version is at positions [pos, pos+count).
func ParseStreamRun(v []byte) (pos, count uint64, ok bool) { return parseStreamRun(v) }

// StreamRun returns the stream-index value of a run of count events at pos.
func StreamRun(pos, count uint64) []byte { return appendStreamRun(nil, pos, count) }

// StreamKey returns the stream-index key of (stream, version).
func StreamKey(stream string, version uint64) []byte { return streamKey(stream, version) }

// ParseIDKey returns the event id of an 'i' key.
func ParseIDKey(k []byte) (id [16]byte, ok bool) {
	if len(k) != 17 || k[0] != prefixID {
		return id, false
	}
	copy(id[:], k[1:])
	return id, true
}

// IDKey returns the id-index key of id.
func IDKey(id [16]byte) []byte { return idKey(id) }

// ParseCheckpointKey returns the size of a 'c' key.
func ParseCheckpointKey(k []byte) (size uint64, ok bool) {
	if len(k) != 9 || k[0] != prefixCheckpoint {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// CheckpointKey returns the key of the stored checkpoint of size.
func CheckpointKey(size uint64) []byte { return checkpointKey(size) }

// ParsePosition decodes an index value (a big-endian position).
func ParsePosition(v []byte) (pos uint64, ok bool) {
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

// TileWidth is the number of leaves of a full leaf tile, and TileHeight
// its height: nodes are stored at levels TileHeight, 2·TileHeight, ….
const (
	TileWidth  = tileWidth
	TileHeight = tileHeight
)
