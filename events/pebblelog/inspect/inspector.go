package inspect

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
	"github.com/greffe/greffe/internal/config"
	"github.com/greffe/greffe/internal/pebbleslog"
)

// Entry is one key/value pair of a key space, as stored. Key includes the
// prefix byte. Both slices alias Pebble's memory and are valid only until
// the callback that received them returns; copy what must outlive it.
type Entry struct {
	Key, Value []byte
}

// Config configures Open. The zero value of every field but Dir means its
// default.
type Config struct {
	// Dir is the Pebble directory of a store (<data>/ledger). Required.
	Dir string
	// CacheSize is Pebble's block cache, in bytes. Default 32 MiB: the
	// auditor scans each key space once, so a cache buys little.
	CacheSize int64
	// FS is the filesystem. Default: the operating system's.
	FS vfs.FS
}

func (c *Config) setDefaults() {
	if c.CacheSize == 0 {
		c.CacheSize = 32 << 20
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
}

// ErrInvalidConfig wraps every configuration problem.
var ErrInvalidConfig = errors.New("inspect: invalid config")

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var p config.Problems
	if c.Dir == "" {
		p.Addf("Dir is required")
	}
	if c.CacheSize < 0 {
		p.Addf("CacheSize %d must be >= 0", c.CacheSize)
	}
	return p.Err(ErrInvalidConfig)
}

// Inspector reads the key spaces of a stopped store exactly as stored
// (layout), without any of the checks the store makes when it opens: an
// auditor must be able to read a damaged store and say what is wrong with
// it, where the store would refuse it. It opens Pebble read-only: it never
// writes, and Pebble's directory lock makes it fail while a node holds the
// store. Safe for concurrent use; each Scan uses its own iterator.
type Inspector struct {
	db  *pebble.DB
	fs  vfs.FS
	dir string
	// r is what the scans read: db, or db under an in-memory batch of the
	// write-ahead log's records that db's tables lack (a store stopped
	// without a clean close).
	r       pebble.Reader
	overlay *pebble.Batch
	// Replayed is how many such records were overlaid.
	Replayed int
}

// Open opens the store in cfg.Dir read-only and checks what Pebble does not
// (checkStorage): damage is a *DamageError. A missing directory is an
// error wrapping events.ErrNotFound; a store a running node holds, one
// matching ErrLocked.
func Open(cfg Config) (*Inspector, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fs := cfg.FS
	if _, err := fs.Stat(cfg.Dir); err != nil {
		return nil, fmt.Errorf("open store %s: %v: %w", cfg.Dir, err, events.ErrNotFound)
	}
	db, err := openReadOnly(cfg, fs)
	if err != nil {
		if IsLockError(err) {
			return nil, fmt.Errorf("open store %s: %w (%v)", cfg.Dir, ErrLocked, err)
		}
		return nil, openFailure(fs, cfg.Dir, err)
	}
	in := &Inspector{db: db, r: db, fs: fs, dir: cfg.Dir}
	if err := in.checkStorage(); err != nil {
		_ = in.Close()
		return nil, err
	}
	return in, nil
}

// openReadOnly opens Pebble read-only on the store's folder.
func openReadOnly(cfg Config, fs vfs.FS) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, pebblePanic(cfg.Dir, r)
		}
	}()
	cache := pebble.NewCache(cfg.CacheSize)
	defer cache.Unref()
	return pebble.Open(cfg.Dir, &pebble.Options{
		ReadOnly:           true,
		ErrorIfNotExists:   true,
		FormatMajorVersion: pebble.FormatNewest,
		Cache:              cache,
		FS:                 fs,
		// Fatalf panics (pebbleslog.Logger); the scans recover it as damage.
		Logger: pebbleslog.Logger{Prefix: "pebble: "},
		// Pebble's default reaction to a damaged block is Logger.Fatalf:
		// here the read returns its error, and the scans report it.
		EventListener: &pebble.EventListener{DataCorruption: func(pebble.DataCorruptionInfo) {}},
	})
}

// Close releases the store. Idempotent.
func (in *Inspector) Close() (err error) {
	if in.db == nil {
		return nil
	}
	// After damage Pebble's bookkeeping may be off (an iterator that
	// panicked is not closed): closing must not panic in turn.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("close store %s: pebble panicked: %v", in.dir, r)
		}
		in.db, in.r = nil, nil
	}()
	if in.overlay != nil {
		_ = in.overlay.Close()
		in.overlay = nil
	}
	return in.db.Close()
}

// Scan calls fn for every entry of space in key order, until fn returns an
// error (which Scan returns) or ctx ends (checked every 4096 entries).
// Entries alias Pebble's memory: see Entry. Stored data that does not read
// back ends the scan with a *DamageError (errors.Is events.ErrCorrupt) that
// says which key space, which key and, where Pebble or the file's checks
// can tell, which file.
func (in *Inspector) Scan(ctx context.Context, space layout.Space, fn func(Entry) error) error {
	return in.ScanFrom(ctx, space, nil, fn)
}

// ScanFrom is Scan starting at the first key >= start (a full key,
// prefix included; nil starts at the beginning of the space).
func (in *Inspector) ScanFrom(ctx context.Context, space layout.Space, start []byte, fn func(Entry) error) error {
	return in.iterate(ctx, space, []byte{byte(space)}, []byte{byte(space) + 1}, start, fn)
}

// iterate calls fn for every entry in [lower, upper) from the first key >=
// start (nil: lower), keys of space. Errors and panics of Pebble's read
// path become a *DamageError when they show damage (guard); fn's own
// errors and panics pass through untouched.
func (in *Inspector) iterate(ctx context.Context, space layout.Space, lower, upper, start []byte, fn func(Entry) error) (err error) {
	var (
		it    *pebble.Iterator
		key   []byte // the key whose value is being read; nil between entries
		last  []byte // a copy of the last key read intact
		inFn  bool
		fnErr bool
	)
	defer func() {
		r := recover()
		if r != nil && inFn {
			panic(r) // the caller's, not Pebble's
		}
		if it != nil {
			if r != nil {
				closeAfterPanic(it)
			} else if cerr := it.Close(); err == nil {
				err = cerr
			}
		}
		if fnErr {
			return
		}
		if r != nil {
			err = pebblePanic(in.dir, r)
		}
		err = pebbleDamage(in.fs, in.dir, err)
		if de := (*DamageError)(nil); errors.As(err, &de) && de.Space == 0 {
			de.Space, de.Key = space, bytes.Clone(key)
			if last != nil {
				de.After = last
			}
		}
	}()
	it, err = in.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		it = nil
		return err
	}
	ok := it.First()
	if start != nil {
		ok = it.SeekGE(start)
	}
	for n := 0; ok; ok, n = it.Next(), n+1 {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				fnErr = true
				return err
			}
		}
		key = it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("read the %s key space: %w", space, err)
		}
		inFn = true
		if err := fn(Entry{Key: key, Value: v}); err != nil {
			fnErr = true
			return err
		}
		inFn = false
		last, key = append(last[:0], key...), nil
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
		return in.Scan(ctx, layout.SpaceEvents, fn)
	}
	end := []byte{byte(layout.SpaceEvents) + 1}
	// Keys before position 0 (only malformed ones can be there).
	if err := in.scanBounds(ctx, []byte{byte(layout.SpaceEvents)}, layout.EventKey(0), fn); err != nil {
		return err
	}
	for next := uint64(0); ; {
		k, ok, err := in.firstFrom(layout.EventKey(next), end)
		if err != nil || !ok {
			return err
		}
		p, valid := layout.ParseEventKey(k)
		if !valid {
			return in.scanBounds(ctx, layout.EventKey(next), end, fn)
		}
		lo := p - p%window
		hi := lo + window
		if hi < lo { // the last window of the key space
			return in.scanBounds(ctx, layout.EventKey(max(lo, next)), end, fn)
		}
		if err := in.scanBounds(ctx, layout.EventKey(max(lo, next)), layout.EventKey(hi), fn); err != nil {
			return err
		}
		next = hi
	}
}

// firstFrom returns (a copy of) the first key in [lower, upper).
func (in *Inspector) firstFrom(lower, upper []byte) ([]byte, bool, error) {
	var first []byte
	err := in.iterate(context.Background(), layout.SpaceEvents, lower, upper, nil, func(e Entry) error {
		first = bytes.Clone(e.Key)
		return errStopScan
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return nil, false, err
	}
	return first, first != nil, nil
}

// errStopScan ends a scan early; never returned.
var errStopScan = errors.New("stop")

// scanBounds calls fn for every entry in [lower, upper).
func (in *Inspector) scanBounds(ctx context.Context, lower, upper []byte, fn func(Entry) error) error {
	return in.iterate(ctx, layout.SpaceEvents, lower, upper, nil, fn)
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
	State layout.State
	// FormatErr, LedgerErr and StateErr say why a field could not be read.
	FormatErr, LedgerErr, StateErr error
}

// Meta reads the store's metadata.
func (in *Inspector) Meta() Meta {
	var m Meta
	get := func(k []byte) (out []byte, err error) {
		err = in.guard(func() error {
			v, closer, err := in.r.Get(k)
			if errors.Is(err, pebble.ErrNotFound) {
				return fmt.Errorf("meta %q missing: %w", k[1:], events.ErrNotFound)
			}
			if err != nil {
				return err
			}
			out = append([]byte(nil), v...)
			return closer.Close()
		})
		var de *DamageError
		if errors.As(err, &de) && de.Space == 0 {
			de.Space, de.Key = layout.SpaceMeta, k
		}
		return out, err
	}
	f, err := get([]byte(layout.MetaFormat))
	m.Format, m.FormatErr = string(f), err
	id, err := get([]byte(layout.MetaLedgerID))
	m.LedgerID, m.LedgerErr = string(id), err
	raw, err := get([]byte(layout.MetaState))
	if err != nil {
		m.StateErr = err
		return m
	}
	if m.State, err = layout.DecodeState(raw); err != nil {
		m.StateErr = fmt.Errorf("%w: %w", err, events.ErrCorrupt)
	}
	return m
}
