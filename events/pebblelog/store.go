package pebblelog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/layout"
	"github.com/greffe/greffe/internal/config"
	"github.com/greffe/greffe/internal/pebbleslog"
)

// Config configures a Store. The zero value of every field means its default.
type Config struct {
	// Dir is the Pebble directory. Required.
	Dir string
	// LedgerID is the ledger's identity. When the store is created, it is
	// recorded (a random UUID when empty); when it is opened, a non-empty
	// LedgerID must match the recorded one.
	LedgerID string
	// CacheSize is Pebble's block cache, in bytes. Default 64 MiB.
	CacheSize int64
	// MemTableSize is Pebble's memtable size, in bytes. Default 32 MiB. With
	// CacheSize it bounds the store's memory.
	MemTableSize uint64
	// MaxBatchEvents bounds how many events group commit puts in one batch.
	// Default 8192. It must be at least events.MaxEventsPerAppend.
	MaxBatchEvents int
	// MaxBatchBytes bounds the encoded bytes of one batch. Default 16 MiB. It
	// must be at least events.MaxAppendBytes.
	MaxBatchBytes int
	// CheckpointInterval is how often a new checkpoint is signed while the
	// log grows. Default 500 ms. Negative disables the background signer
	// (checkpoints are then signed on demand only).
	CheckpointInterval time.Duration
	// Signers sign checkpoints. They must be named events.Origin(ledger id).
	// Without signers no checkpoint is signed.
	Signers []events.Signer
	// Logger receives the store's logs. Default: discard.
	Logger *slog.Logger
	// Clock stamps batches. Default time.Now. It is read by the sequencer
	// only, never while applying (apply is deterministic).
	Clock func() time.Time
	// FS is the filesystem Pebble writes to. Default: the operating
	// system's. Tests pass vfs.NewCrashableMem() to simulate power loss.
	FS vfs.FS
	// WALSegmentSize is the size of the write-ahead log's segment files
	// (walstore.go). Default 64 MiB. Each completed segment triggers a
	// Pebble flush, after which the segments it covered are reused.
	WALSegmentSize int64
	// IDFilterBytes bounds the in-memory filter of event ids (idfilter.go),
	// about 2 bytes per event: 64 MiB (the default) keeps false positives
	// at their design rate up to ~30 million events; past it they grow
	// slowly, and appends with them, while memory stays bounded.
	IDFilterBytes int64
	// WAL selects the write-ahead log (wal.go): WALGreffe (the default),
	// the store's own (internal/wal, wal_greffe.go), or WALPebble, Pebble's
	// (wal_pebble.go). Both pass the same fault-injection suite
	// (fault_test.go; the figures that chose the default are in
	// docs/PERFORMANCE.md). Every open replays what
	// either log holds, so a store can switch between restarts.
	WAL string
	// OnFatal is called when the storage engine meets an error it cannot
	// go on from: Pebble failing to sync its MANIFEST, or to close a WAL
	// file it rotates. The store has already failed (it refuses writes)
	// when it is called. It must not return. Default: panic, which ends
	// the process: what reached the disk is then known only by reopening,
	// which replays the log (fail-stop, as etcd and Pebble do). Tests park
	// the goroutine instead, to freeze the store until a simulated power
	// loss.
	OnFatal func(error)
}

// The write-ahead logs Config.WAL selects.
const (
	WALGreffe = "greffe"
	WALPebble = "pebble"
)

func (c *Config) setDefaults() {
	if c.CacheSize == 0 {
		c.CacheSize = 64 << 20
	}
	if c.MemTableSize == 0 {
		c.MemTableSize = 32 << 20
	}
	if c.MaxBatchEvents == 0 {
		c.MaxBatchEvents = 8192
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = 16 << 20
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = 500 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.WALSegmentSize == 0 {
		c.WALSegmentSize = 64 << 20
	}
	if c.IDFilterBytes == 0 {
		c.IDFilterBytes = 64 << 20
	}
	if c.WAL == "" {
		c.WAL = WALGreffe
	}
	if c.OnFatal == nil {
		c.OnFatal = func(err error) { panic(fmt.Sprintf("pebblelog: %v", err)) }
	}
}

// ErrInvalidConfig wraps every configuration problem.
var ErrInvalidConfig = errors.New("pebblelog: invalid config")

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var p config.Problems
	if c.Dir == "" {
		p.Addf("Dir is required")
	}
	if c.MaxBatchEvents < events.MaxEventsPerAppend {
		p.Addf("MaxBatchEvents %d is below one append's limit %d", c.MaxBatchEvents, events.MaxEventsPerAppend)
	}
	if c.MaxBatchBytes < events.MaxAppendBytes {
		p.Addf("MaxBatchBytes %d is below one append's limit %d", c.MaxBatchBytes, events.MaxAppendBytes)
	}
	if c.IDFilterBytes < 0 || c.IDFilterBytes > 1<<40 {
		p.Addf("IDFilterBytes %d must be between 0 (the default) and 1 TiB", c.IDFilterBytes)
	}
	if c.CacheSize < 0 || c.MemTableSize > 1<<30 {
		p.Addf("CacheSize %d must be >= 0 and MemTableSize %d <= 1 GiB", c.CacheSize, c.MemTableSize)
	}
	if c.WAL != WALGreffe && c.WAL != WALPebble {
		p.Addf("WAL %q must be %q or %q", c.WAL, WALGreffe, WALPebble)
	}
	return p.Err(ErrInvalidConfig)
}

// Store is the Pebble implementation of events.Log. It is safe for
// concurrent use. Open starts its goroutines; Close stops them and waits.
//
// # Invariants
//
// Position order = apply order = visibility order. One goroutine at a time
// applies batches (the local sequencer, or the raft FSM through
// ApplyReplicated); it owns the fields under seq. A batch's writes (events,
// indexes, Merkle nodes, state) go to Pebble in one atomic batch. Readers
// never see past the acknowledged head (durable), which advances only after
// the batch holding those events is fsynced, in order.
type Store struct {
	cfg      Config
	ledgerID string
	origin   string

	// dbMu guards db and log against a swap by Restore; everything else
	// takes it for reading.
	dbMu sync.RWMutex
	db   *pebble.DB
	// log is db's write-ahead log, the one Config.WAL selects (wal.go).
	log writeAheadLog
	// walReplayed is how many records of the store's own log the last open
	// (or restore) replayed: 0 after a clean stop.
	walReplayed atomic.Uint64

	// seq is owned by the single applier (see Invariants).
	seq struct {
		size         uint64
		rng          *events.Range
		lastRecorded int64
		applied      uint64 // raft index of the last applied batch, 0 locally
		streams      map[string]int64
		ids          *idFilter
		tail         []byte // leaf hashes of the partial leaf tile
		// last sizes the next batch's buffers like the last one: growing a
		// Pebble batch by doubling copied and allocated twice its size, a
		// third of the bytes allocated under a 64-writer load.
		last batchSize
	}

	durable atomic.Pointer[events.Head]

	mu struct {
		sync.Mutex
		headCh chan struct{} // closed and replaced when durable advances
		failed error         // set when an fsync failed: the store refuses writes
	}

	signers atomic.Pointer[[]events.Signer]
	ckpt    struct {
		sync.Mutex // serialises signing and storing
		last       atomic.Pointer[events.Checkpoint]
		at         atomic.Value // time.Time the last checkpoint was signed or loaded
	}

	commit *committer
	stats  storeStats
	nodes  nodeCache

	// lock is the folder's lock (folder.go), held from Open to Close,
	// across restores.
	lock io.Closer

	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

var _ events.Log = (*Store)(nil)

// maxStreamCache bounds the sequencer's cache of stream versions; when full it
// is cleared (it is only a cache: Pebble holds the truth).
const maxStreamCache = 1 << 16

// Open opens or creates the store in cfg.Dir and starts group commit and the
// checkpoint signer. A store it finds damaged is refused with an error that
// matches events.ErrCorrupt and names the file. Damage to the MANIFEST or
// to the write-ahead log is found before Pebble opens the folder
// read-write: it is refused with a *inspect.DamageError, and nothing in the folder
// has changed.
//
// Open first takes the folder's lock (<dir>.lock, held until Close; another
// holder makes Open fail with inspect.ErrLocked before it touches anything), then
// settles what a crash left of a snapshot restore (folder.go): it finishes
// or undoes the swap, and removes the store a restore replaced only once
// the store in place has opened and its tree rebuilt from its events is the
// one its state holds; if it does not open or verify, the replaced store is
// put back and opened instead (the other is kept in <dir>.failed-restore).
func Open(cfg Config) (_ *Store, err error) {
	defer func() {
		if err != nil && pebble.IsCorruptionError(err) && !errors.Is(err, events.ErrCorrupt) {
			err = fmt.Errorf("open store %s: %w: %w", cfg.Dir, events.ErrCorrupt, err)
		}
	}()
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg}
	fs := s.fs()
	// The folder's lock comes first: settling what a restore left, below,
	// renames and deletes folders that a live store beside this call would
	// be using (folder.go).
	lock, err := lockFolder(fs, cfg.Dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = lock.Close()
		}
	}()
	oldWaits, err := settleFolder(fs, cfg.Dir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	head, err := s.openFiles()
	if err == nil && oldWaits {
		// The store in place went through a crash in the middle of a swap:
		// before the one it replaced goes, its tree must still be the tree
		// of its events (as the restore checked before the swap).
		if err = checkStagedTree(s.db, SnapshotInfo{Head: head}, nil); err != nil {
			_ = s.closeDB()
			err = fmt.Errorf("open store %s: the store a restore put in place does not verify: %w", cfg.Dir, err)
		}
	}
	switch {
	case err != nil && oldWaits && !errors.Is(err, ErrIncompatible):
		// The store a restore swapped in does not open: the one it
		// replaced, kept for this, comes back.
		cfg.Logger.Error("the store a snapshot restore put in place does not open: putting back the store it replaced",
			"dir", cfg.Dir, "err", err, "kept_in", failedRestoreDir(cfg.Dir))
		if perr := putBack(fs, cfg.Dir); perr != nil {
			return nil, fmt.Errorf("open store %s: %w; putting back the replaced store failed: %w", cfg.Dir, err, perr)
		}
		s = &Store{cfg: cfg}
		var err2 error
		if head, err2 = s.openFiles(); err2 != nil {
			return nil, fmt.Errorf("open store %s: neither the restored store (now in %s: %w) nor the one it replaced opens: %w",
				cfg.Dir, failedRestoreDir(cfg.Dir), err, err2)
		}
		err = nil
	case err != nil:
		return nil, err
	case oldWaits:
		// The restored store opened and verified: only now may the one it
		// replaced go.
		if err := reapOld(fs, cfg.Dir); err != nil {
			cfg.Logger.Warn("could not remove the store a restore replaced; the next start retries", "dir", oldDir(cfg.Dir), "err", err)
		}
	}
	s.lock = lock
	s.durable.Store(&head)
	s.mu.headCh = make(chan struct{})
	if len(cfg.Signers) > 0 {
		sg := append([]events.Signer(nil), cfg.Signers...)
		s.signers.Store(&sg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.commit = newCommitter(s)
	s.commit.start(ctx, &s.wg)
	if cfg.CheckpointInterval > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.checkpointLoop(ctx)
		}()
	}
	return s, nil
}

// openFiles checks and opens the store's folder (Pebble and the
// write-ahead log) and loads its state, returning its head; it publishes
// nothing (the caller does, once it keeps the store). On error nothing it
// opened stays open. Open calls it, and Restore to open the store it swaps
// in. REQUIRES: the folder's lock held; dbMu held exclusively, or no other
// user (Open).
func (s *Store) openFiles() (events.Head, error) {
	cfg := s.cfg
	existed, err := holdsLedger(s.fs(), cfg.Dir)
	if err != nil {
		return events.Head{}, err
	}
	// Before Pebble opens the folder read-write: with a damaged MANIFEST it
	// would see fewer tables, delete the others as obsolete, and open a
	// store that lost them.
	if err := inspect.CheckManifest(s.fs(), cfg.Dir); err != nil {
		return events.Head{}, fmt.Errorf("open store %s: refusing to open (nothing was changed): %w", cfg.Dir, err)
	}
	// The write-ahead log too, for the same reason: Pebble's read-write
	// open rewrites its MANIFEST, OPTIONS and WAL files (inspect.CheckWAL).
	if err := inspect.CheckWAL(s.fs(), cfg.Dir); err != nil {
		var de *inspect.DamageError
		if errors.As(err, &de) {
			return events.Head{}, fmt.Errorf("open store %s: refusing to open (nothing was changed): %w", cfg.Dir, err)
		}
		return events.Head{}, err
	}
	db, err := s.openPebble()
	if err != nil {
		return events.Head{}, err
	}
	s.db = db
	if err := s.openLog(); err != nil {
		_ = db.Close()
		return events.Head{}, err
	}
	// Nodes cached from another handle (a restore's previous store).
	s.nodes.mu.Lock()
	s.nodes.nodes = nil
	s.nodes.mu.Unlock()
	head, err := s.loadOrInit(existed)
	if err == nil {
		err = s.loadLastCheckpoint(head)
	}
	if err != nil {
		_ = s.closeDB()
		return events.Head{}, err
	}
	return head, nil
}

// blockSize is the target size of sstable data blocks and of the blob
// files' value blocks. Reading the log in order fetches event bytes block
// by block from blob files; Pebble's 4 KiB default cost one pread per dozen
// events on a block-cache miss (BenchmarkReadAll: 0.77-1.05 M events/s with
// 4 KiB blocks, 32 KiB: see docs/PERFORMANCE.md).
const blockSize = 32 << 10

func (s *Store) openPebble() (*pebble.DB, error) {
	cfg := s.cfg
	cache := pebble.NewCache(cfg.CacheSize)
	defer cache.Unref()
	opts := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		Cache:              cache,
		MemTableSize:       cfg.MemTableSize,
		Logger:             pebbleslog.Logger{L: cfg.Logger, Prefix: "pebble: ", Fatal: s.fatal},
		FS:                 cfg.FS,
		// The store's own log (wal.go) replaces Pebble's, unless Config.WAL
		// asks for Pebble's. Pebble replays a WAL of its own found at open
		// either way (a store written before that change, or with the
		// other setting), and openLog flushes what it replayed.
		DisableWAL: !cfg.pebbleWAL(),
		// A flush or compaction that fails (a write or sync error of a
		// table, the MANIFEST, a read of a damaged block) fails the store:
		// after any storage error it stops accepting writes until it is
		// reopened, which reads back what reached the disk. Pebble would
		// retry; the data is still in the memtable and the log, so nothing
		// acknowledged is lost either way, but a disk that fails once is
		// not trusted again.
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) { s.fail(fmt.Errorf("pebble: %w", err)) },
			// A block that fails its checksum: the read returns the error
			// (naming the file) and the store stops writing. Pebble's
			// default is Fatalf, which would end the node on one bad
			// block that a restore of one file can mend.
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				s.fail(fmt.Errorf("damaged storage: %s: %w: %w", info.Path, info.Details, events.ErrCorrupt))
			},
		},
	}
	// Value separation: event bytes (and leaf tiles) go to blob files at
	// flush and are not rewritten by every compaction; only the keys and
	// small values move down the LSM. Compactions were a third of the CPU
	// of a sustained append load.
	opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 256, MaxBlobReferenceDepth: 10,
			RewriteMinimumAge: 5 * time.Minute, TargetGarbageRatio: 1.0}
	}
	// Every sstable holds one key space (layout): flushes and compactions
	// end an output table where a space ends. The event keys only grow, so
	// tables holding nothing else do not overlap the older ones below and
	// are moved down the LSM without being rewritten, where tables mixing
	// them with the random event-id keys were rewritten at every level.
	// 64 writers x 100 over 80 s: 131,700 events/s against 120,500, p99.9
	// 0.9 s against 2.4 s (docs/PERFORMANCE.md).
	opts.Experimental.SpanPolicyFunc = splitKeySpaces
	// Bloom filters make the idempotency probe of a new event id (almost
	// always absent) cheap.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		opts.Levels[i].BlockSize = blockSize
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		if inspect.IsLockError(err) {
			return nil, inspect.InUse(cfg.Dir, err)
		}
		return nil, fmt.Errorf("open pebble %s: %w", cfg.Dir, err)
	}
	return db, nil
}

// splitKeySpaces is a pebble.SpanPolicyFunc with the default policy whose
// spans are the key spaces: from a key to the first key of the next prefix.
func splitKeySpaces(start []byte) (pebble.SpanPolicy, []byte, error) {
	if len(start) == 0 || start[0] == 0xff {
		return pebble.SpanPolicy{}, nil, nil
	}
	return pebble.SpanPolicy{}, []byte{start[0] + 1}, nil
}

// fatal fails the store, then hands err to Config.OnFatal, which does not
// return.
func (s *Store) fatal(err error) {
	s.fail(err)
	s.cfg.OnFatal(err)
	panic(fmt.Sprintf("pebblelog: OnFatal returned after %v", err))
}

// loadOrInit checks the store's identity and loads the sequencer state. A
// store is initialised only in a folder that held no ledger file before
// Open (existed false): one that did and has no identity is damaged, and
// writing a new ledger over it would hide what it held.
func (s *Store) loadOrInit(existed bool) (events.Head, error) {
	format, err := s.get(metaFormat)
	switch {
	case errors.Is(err, events.ErrNotFound) && existed:
		return events.Head{}, fmt.Errorf("%s holds ledger files but no store identity (meta %q): the store is damaged (a MANIFEST that lost its tables?); refusing to create a new ledger over it: %w",
			s.cfg.Dir, metaFormat, events.ErrCorrupt)
	case errors.Is(err, events.ErrNotFound):
		id := s.cfg.LedgerID
		if id == "" {
			id = uuid.NewString()
		}
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Set(metaFormat, []byte(layout.StoreFormat), nil)
		_ = b.Set(metaLedgerID, []byte(id), nil)
		_ = b.Set(metaState, layout.State{}.Encode(), nil)
		if err := s.commitSynced(b); err != nil {
			return events.Head{}, fmt.Errorf("init store: %w", err)
		}
		format = []byte(layout.StoreFormat)
	case err != nil:
		return events.Head{}, err
	case layout.Upgradable(string(format)):
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Set(metaFormat, []byte(layout.StoreFormat), nil)
		if err := s.commitSynced(b); err != nil {
			return events.Head{}, fmt.Errorf("upgrade store format: %w", err)
		}
		s.cfg.Logger.Info("upgraded the store format: older binaries now refuse this store",
			"from", string(format), "to", layout.StoreFormat)
		format = []byte(layout.StoreFormat)
	}
	if string(format) != layout.StoreFormat {
		return events.Head{}, fmt.Errorf("store format %q, this binary writes %q: %w", format, layout.StoreFormat, ErrIncompatible)
	}
	id, err := s.get(metaLedgerID)
	if err != nil {
		return events.Head{}, fmt.Errorf("read ledger id: %w", err)
	}
	if s.cfg.LedgerID != "" && s.cfg.LedgerID != string(id) {
		return events.Head{}, fmt.Errorf("store holds ledger %q, config asks for %q: %w", id, s.cfg.LedgerID, ErrIncompatible)
	}
	// The identity is set once, at the first open; a reopen (a snapshot
	// restore) must find the same ledger and leaves the fields alone, since
	// LedgerID and Origin are read without a lock.
	switch {
	case s.ledgerID == "":
		s.ledgerID = string(id)
		s.origin = events.Origin(s.ledgerID)
	case s.ledgerID != string(id):
		return events.Head{}, fmt.Errorf("reopened store holds ledger %q, not %q: %w", id, s.ledgerID, ErrIncompatible)
	}
	return s.loadState()
}

// ErrIncompatible is returned when the store on disk was written with another
// format or belongs to another ledger.
var ErrIncompatible = errors.New("pebblelog: incompatible store")

// loadState loads the sequencer state and returns the head it holds.
func (s *Store) loadState() (events.Head, error) {
	raw, err := s.get(metaState)
	if err != nil {
		return events.Head{}, fmt.Errorf("read state: %w", err)
	}
	st, err := decodeState(raw)
	if err != nil {
		return events.Head{}, err
	}
	size, last, applied := st.Size, st.LastRecorded, st.Applied
	rng, err := events.RangeFactory.NewRange(0, size, st.Range)
	if err != nil {
		return events.Head{}, fmt.Errorf("state: compact range: %v: %w", err, events.ErrCorrupt)
	}
	// The state and the events are written in one batch; the last event key
	// must be exactly size-1.
	it, err := s.db.NewIter(spanOf(layout.SpaceEvents))
	if err != nil {
		return events.Head{}, err
	}
	defer it.Close()
	switch {
	case it.Last():
		if got := binary.BigEndian.Uint64(it.Key()[1:]); got+1 != size {
			return events.Head{}, fmt.Errorf("state says %d events, last stored position is %d: %w", size, got, events.ErrCorrupt)
		}
	case size != 0:
		return events.Head{}, fmt.Errorf("state says %d events, none stored: %w", size, events.ErrCorrupt)
	}
	s.seq.size, s.seq.rng, s.seq.lastRecorded, s.seq.applied = size, rng, last, applied
	s.seq.streams = make(map[string]int64)
	if s.seq.ids, err = s.buildIDFilter(size); err != nil {
		return events.Head{}, err
	}
	s.seq.tail, err = s.partialTileLeaves(size)
	if err != nil {
		return events.Head{}, err
	}
	root := events.EmptyRoot
	if size > 0 {
		r, err := rng.GetRootHash(nil)
		if err != nil {
			return events.Head{}, fmt.Errorf("state root: %v: %w", err, events.ErrCorrupt)
		}
		root = [32]byte(r)
	}
	return events.Head{Size: size, Root: root, RecordedAt: last}, nil
}

// partialTileLeaves hashes the events of the partial leaf tile at the right
// edge of a log of size events (they are not stored as a tile until full).
func (s *Store) partialTileLeaves(size uint64) ([]byte, error) {
	out := make([]byte, 0, layout.TileWidth*32)
	for pos := size - size%layout.TileWidth; pos < size; pos++ {
		raw, err := s.get(layout.EventKey(pos))
		if err != nil {
			return nil, fmt.Errorf("partial tile: position %d: %w", pos, err)
		}
		h := events.LeafHash(raw)
		out = append(out, h[:]...)
	}
	return out, nil
}

// buildIDFilter scans the event-id index into a new filter sized for twice
// the current log.
func (s *Store) buildIDFilter(size uint64) (*idFilter, error) {
	f := newIDFilter(int(max(min(size*2, 1<<40), minIDFilterCapacity)), int(s.cfg.IDFilterBytes))
	it, err := s.db.NewIter(spanOf(layout.SpaceIDs))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Key()) != 17 {
			return nil, fmt.Errorf("event-id key of %d bytes: %w", len(it.Key()), events.ErrCorrupt)
		}
		f.add(uuid.UUID(it.Key()[1:]))
	}
	return f, it.Error()
}

// decodeState decodes the stored sequencer state (layout.State); a value
// of the wrong shape is corruption.
func decodeState(b []byte) (layout.State, error) {
	st, err := layout.DecodeState(b)
	if err != nil {
		return layout.State{}, fmt.Errorf("%w: %w", err, events.ErrCorrupt)
	}
	return st, nil
}

// The keys of the store's single records (layout), as Pebble takes them.
var (
	metaFormat   = []byte(layout.MetaFormat)
	metaLedgerID = []byte(layout.MetaLedgerID)
	metaState    = []byte(layout.MetaState)
	walSeqKey    = []byte(layout.WALSeq)
)

// spanOf bounds an iterator to a key space.
func spanOf(sp layout.Space) *pebble.IterOptions {
	lo, hi := sp.Bounds()
	return &pebble.IterOptions{LowerBound: lo, UpperBound: hi}
}

// get reads a key; a missing key is events.ErrNotFound. The value is a copy.
func (s *Store) get(key []byte) (_ []byte, err error) {
	defer s.noteDamage(&err)
	return dbGet(s.db, key)
}

// dbGet reads a key of db; a missing key is events.ErrNotFound. The value
// is a copy.
func dbGet(db pebble.Reader, key []byte) ([]byte, error) {
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, events.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pebble get: %w", err)
	}
	out := bytes.Clone(v)
	_ = closer.Close()
	return out, nil
}

// storeStats are cumulative counters, read by Stats (metrics).
type storeStats struct {
	batches, events, appends atomic.Uint64
	syncNanos                atomic.Uint64 // time spent waiting for fsyncs
}

// Stats is a snapshot of the store's cumulative counters.
type Stats struct {
	Batches     uint64        // batches committed (each one fsync or raft entry)
	Appends     uint64        // append calls answered
	Events      uint64        // events written (not counting duplicates)
	SyncWait    time.Duration // total time the syncer waited for fsyncs
	Head        events.Head
	LastCheck   uint64 // size of the last signed checkpoint
	LastCheckAt time.Time
	// WALReplayed is the number of write-ahead log records replayed when
	// the store was last opened: 0 after a clean stop, more after a crash.
	WALReplayed uint64
}

// Stats returns the store's cumulative counters.
func (s *Store) Stats() Stats {
	st := Stats{
		Batches: s.stats.batches.Load(), Appends: s.stats.appends.Load(), Events: s.stats.events.Load(),
		SyncWait: time.Duration(s.stats.syncNanos.Load()), Head: s.Head(),
		WALReplayed: s.walReplayed.Load(),
	}
	if cp := s.ckpt.last.Load(); cp != nil {
		st.LastCheck = cp.Size
		st.LastCheckAt = s.ckpt.at.Load().(time.Time)
	}
	return st
}

// LedgerID returns the ledger's identity.
func (s *Store) LedgerID() string { return s.ledgerID }

// Origin returns the checkpoint origin, "greffe/<ledger id>".
func (s *Store) Origin() string { return s.origin }

// Head returns the acknowledged head.
func (s *Store) Head() events.Head { return *s.durable.Load() }

// AppliedIndex returns the raft index of the last batch applied through
// ApplyReplicated (0 for a single node). It is stored in the same Pebble
// batch as the events, so after a crash it says exactly what survived.
func (s *Store) AppliedIndex() uint64 {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	raw, err := s.get(metaState)
	if err != nil {
		return 0
	}
	st, err := decodeState(raw)
	if err != nil {
		return 0
	}
	return st.Applied
}

// Close stops group commit and the checkpoint signer, waits for them, and
// closes Pebble. Appends in flight fail with events.ErrClosed. Idempotent.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.cancel()
	s.wg.Wait() // the sequencer stops direct commits on its way out
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	// Wake subscribers so they notice the close.
	s.mu.Lock()
	close(s.mu.headCh)
	s.mu.headCh = make(chan struct{})
	s.mu.Unlock()
	err := s.closeDB()
	return errors.Join(err, s.lock.Close())
}

// closeDB flushes Pebble, so that the next open has no log to replay (and
// the offline inspector none to overlay), then closes the log and Pebble.
// After a failure nothing is flushed: the log holds what was written.
// REQUIRES: dbMu held exclusively, or no other user (Open).
func (s *Store) closeDB() error {
	var errs []error
	flushed := false
	if s.failure() == nil {
		if err := s.db.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("flush: %w", err))
		} else {
			flushed = true
		}
	}
	errs = append(errs, s.log.close(flushed), s.db.Close())
	return errors.Join(errs...)
}

// publish advances the acknowledged head and wakes subscribers.
func (s *Store) publish(h events.Head) {
	s.durable.Store(&h)
	s.mu.Lock()
	close(s.mu.headCh)
	s.mu.headCh = make(chan struct{})
	s.mu.Unlock()
}

// headChanged returns a channel closed at the next head advance.
func (s *Store) headChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.headCh
}

func (s *Store) fail(err error) {
	s.mu.Lock()
	if s.mu.failed == nil {
		s.mu.failed = err
	}
	s.mu.Unlock()
	s.cfg.Logger.Error("store failed: refusing writes until restart", "err", err)
}

// noteDamage turns a Pebble corruption error of a read (a block that fails
// its checksum: Pebble's message names the file) into events.ErrCorrupt and
// fails the store: a disk that returned damaged data is not trusted with
// writes. Call it deferred, on the named error of a read.
func (s *Store) noteDamage(err *error) {
	if *err == nil {
		return
	}
	if pebble.IsCorruptionError(*err) && !errors.Is(*err, events.ErrCorrupt) {
		*err = fmt.Errorf("%w: %w", events.ErrCorrupt, *err)
	}
	if errors.Is(*err, events.ErrCorrupt) {
		s.fail(fmt.Errorf("damaged storage: %w", *err))
	}
}

// Failure returns the error that failed the store (a write or sync error of
// its log or of Pebble), or nil while it accepts writes. A failed store
// serves reads of what it acknowledged; only reopening it (a restart) lets
// it write again.
func (s *Store) Failure() error { return s.failure() }

func (s *Store) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.failed
}
