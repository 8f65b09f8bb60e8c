package pebblelog

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
	"github.com/greffe/greffe/internal/pebbleslog"
)

// Snapshots and restores, for the raft replicator (issue #5).
//
// A snapshot carries the replicated state of the ledger: the key spaces every
// replica holds byte for byte (events, leaf tiles, tree nodes, stream and id
// indexes, and the format, ledger id and sequencer state keys). Everything
// else in the Pebble instance is node-local and never leaves the node: the
// signed checkpoints ('c', each node signs with its own key) and any key
// space added later by another component. Restore keeps the node-local keys
// of the store it replaces.
//
// # Stream format (version 1)
//
//	magic    "greffe-ledger-snapshot/1\n"
//	header   u16 len, then: applied(8) size(8) root(32) last_recorded(8) ledger_id
//	records  repeated: 0x01 uvarint(len key) key uvarint(len value) value
//	trailer  0x00 count(8) sha256(32) of every byte up to and including the 0x00
//
// Numbers are big-endian; records come in key order. The hash makes a
// truncated or damaged stream fail Restore before anything is swapped in.

const snapshotMagic = "greffe-ledger-snapshot/1\n"

// SnapshotInfo describes the state a snapshot captures.
type SnapshotInfo struct {
	// LedgerID is the ledger the snapshot belongs to; Restore refuses another.
	LedgerID string
	// Applied is the raft index of the last batch applied in the snapshot (0
	// for a store that never applied a replicated batch).
	Applied uint64
	// Head is the acknowledged head the snapshot holds.
	Head events.Head
}

// ErrBadSnapshot wraps every problem of a snapshot stream: bad magic,
// truncation, a hash that does not match, a state that does not recompute.
var ErrBadSnapshot = errors.New("pebblelog: bad snapshot")

// ErrSnapshotForks wraps the refusal of a snapshot whose history does not
// extend this store's.
var ErrSnapshotForks = errors.New("pebblelog: the snapshot does not extend this store's history")

// Snapshot is a point-in-time copy of the ledger for raft: a Pebble
// checkpoint (hard links to the immutable tables plus a copy of the live WAL)
// in a folder next to the store. Holding it never blocks the store: appends,
// reads and even Restore go on while it is written out, because it shares no
// open handle with the live database. Release must be called once; WriteTo
// may be called any number of times before. Not safe for concurrent use.
type Snapshot struct {
	fs   vfs.FS
	dir  string
	info SnapshotInfo
	log  *slog.Logger
	once sync.Once
}

// snapshotsDir is where checkpoints wait to be streamed.
func snapshotsDir(dir string) string { return strings.TrimRight(dir, "/") + ".snapshots" }

// Snapshot captures the applied state. It takes about as long as copying the
// live WAL (bounded by the memtable size), not the size of the ledger.
//
// REQUIRES: called by the single applier (the raft FSM), so that no batch is
// applied while the checkpoint is taken.
func (s *Store) Snapshot() (*Snapshot, error) {
	if s.closed.Load() {
		return nil, events.ErrClosed
	}
	fs := s.fs()
	parent := snapshotsDir(s.cfg.Dir)
	if err := fs.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	dir := fs.PathJoin(parent, strconv.FormatUint(rand.Uint64(), 36))
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	// The sequencer state, not the acknowledged head: it is exactly what the
	// checkpoint's state key holds.
	info := SnapshotInfo{LedgerID: s.ledgerID, Applied: s.seq.applied,
		Head: events.Head{Size: s.seq.size, Root: events.EmptyRoot, RecordedAt: s.seq.lastRecorded}}
	if s.seq.size > 0 {
		r, err := s.seq.rng.GetRootHash(nil)
		if err != nil {
			return nil, fmt.Errorf("snapshot root: %v: %w", err, events.ErrCorrupt)
		}
		info.Head.Root = [32]byte(r)
	}
	// Flushing makes every applied batch durable in tables before raft may
	// drop the log entries this snapshot covers (ApplyReplicated does not
	// sync), and puts the whole applied state in the checkpoint, which
	// copies tables only (Pebble's WAL is disabled; the store's own log is
	// not part of a checkpoint).
	if err := s.db.Flush(); err != nil {
		return nil, fmt.Errorf("snapshot flush: %w", err)
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL(), pebble.WithRestrictToSpans(replicatedSpans())); err != nil {
		_ = fs.RemoveAll(dir)
		return nil, fmt.Errorf("snapshot checkpoint: %w", err)
	}
	return &Snapshot{fs: fs, dir: dir, info: info, log: s.cfg.Logger}, nil
}

func replicatedSpans() []pebble.CheckpointSpan {
	var out []pebble.CheckpointSpan
	for _, sp := range layout.ReplicatedSpaces() {
		lo, hi := sp.Bounds()
		out = append(out, pebble.CheckpointSpan{Start: lo, End: hi})
	}
	return out
}

func (s *Store) fs() vfs.FS {
	if s.cfg.FS != nil {
		return s.cfg.FS
	}
	return vfs.Default
}

// Info returns what the snapshot captures.
func (sn *Snapshot) Info() SnapshotInfo { return sn.info }

// WriteTo streams the snapshot in the format above and returns the bytes
// written. The stream is consistent: it is read from the checkpoint, whose
// sequencer state must equal Info (else events.ErrCorrupt).
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	db, err := pebble.Open(sn.dir, &pebble.Options{FS: sn.fs, ReadOnly: true, Logger: pebbleslog.Logger{L: sn.log, Prefix: "pebble: "}})
	if err != nil {
		return 0, fmt.Errorf("open snapshot checkpoint: %w", err)
	}
	defer db.Close()
	raw, closer, err := db.Get(metaState)
	if err != nil {
		return 0, fmt.Errorf("snapshot state: %w", err)
	}
	st, err := decodeState(raw)
	size, applied := st.Size, st.Applied
	_ = closer.Close()
	if err != nil {
		return 0, err
	}
	if size != sn.info.Head.Size || applied != sn.info.Applied {
		return 0, fmt.Errorf("snapshot checkpoint holds size %d applied %d, expected %d and %d: %w",
			size, applied, sn.info.Head.Size, sn.info.Applied, events.ErrCorrupt)
	}
	cw := &countWriter{w: w}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(cw, h), 256<<10)
	bw.WriteString(snapshotMagic)
	hdr := encodeSnapshotHeader(sn.info)
	bw.Write(binary.BigEndian.AppendUint16(nil, uint16(len(hdr))))
	bw.Write(hdr)
	it, err := db.NewIter(nil)
	if err != nil {
		return cw.n, err
	}
	defer it.Close()
	var count uint64
	var lenBuf [2 * binary.MaxVarintLen64]byte
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if !layout.Replicated(k) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return cw.n, err
		}
		bw.WriteByte(1)
		n := binary.PutUvarint(lenBuf[:], uint64(len(k)))
		bw.Write(lenBuf[:n])
		bw.Write(k)
		n = binary.PutUvarint(lenBuf[:], uint64(len(v)))
		bw.Write(lenBuf[:n])
		if _, err := bw.Write(v); err != nil {
			return cw.n, err
		}
		count++
	}
	if err := it.Error(); err != nil {
		return cw.n, err
	}
	bw.WriteByte(0)
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	// The count and the hash go straight to w, past the hasher.
	trailer := binary.BigEndian.AppendUint64(nil, count)
	if _, err := cw.Write(append(trailer, h.Sum(nil)...)); err != nil {
		return cw.n, err
	}
	return cw.n, nil
}

// Release removes the checkpoint. Idempotent.
func (sn *Snapshot) Release() {
	sn.once.Do(func() { _ = sn.fs.RemoveAll(sn.dir) })
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func encodeSnapshotHeader(i SnapshotInfo) []byte {
	b := make([]byte, 0, 56+len(i.LedgerID))
	b = binary.BigEndian.AppendUint64(b, i.Applied)
	b = binary.BigEndian.AppendUint64(b, i.Head.Size)
	b = append(b, i.Head.Root[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(i.Head.RecordedAt))
	return append(b, i.LedgerID...)
}

// snapshotReader reads a stream and hashes every byte it consumes.
type snapshotReader struct {
	r *bufio.Reader
	h hash.Hash
}

func (sr *snapshotReader) full(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(sr.r, b); err != nil {
		return nil, fmt.Errorf("%w: truncated: %v", ErrBadSnapshot, err)
	}
	sr.h.Write(b)
	return b, nil
}

func (sr *snapshotReader) byte() (byte, error) {
	b, err := sr.full(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (sr *snapshotReader) uvarint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c, err := sr.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: varint overflow", ErrBadSnapshot)
}

// maxSnapshotValue bounds one record: a leaf tile is 8 KiB, an event at
// most 64 KiB; anything far larger is damage, not data.
const maxSnapshotValue = 1 << 20

func newSnapshotReader(r io.Reader) (*snapshotReader, SnapshotInfo, error) {
	sr := &snapshotReader{r: bufio.NewReaderSize(r, 256<<10), h: sha256.New()}
	info, err := readHeader(sr.full)
	if err != nil {
		return nil, SnapshotInfo{}, err
	}
	return sr, info, nil
}

// readHeader reads the magic and the header of a stream with full, which
// returns exactly n bytes or an ErrBadSnapshot.
func readHeader(full func(n int) ([]byte, error)) (SnapshotInfo, error) {
	magic, err := full(len(snapshotMagic))
	if err != nil {
		return SnapshotInfo{}, err
	}
	if string(magic) != snapshotMagic {
		return SnapshotInfo{}, fmt.Errorf("%w: magic %q, want %q", ErrBadSnapshot, magic, snapshotMagic)
	}
	lb, err := full(2)
	if err != nil {
		return SnapshotInfo{}, err
	}
	hdr, err := full(int(binary.BigEndian.Uint16(lb)))
	if err != nil {
		return SnapshotInfo{}, err
	}
	if len(hdr) < 56 {
		return SnapshotInfo{}, fmt.Errorf("%w: header of %d bytes", ErrBadSnapshot, len(hdr))
	}
	return SnapshotInfo{
		Applied:  binary.BigEndian.Uint64(hdr),
		Head:     events.Head{Size: binary.BigEndian.Uint64(hdr[8:]), Root: [32]byte(hdr[16:48]), RecordedAt: int64(binary.BigEndian.Uint64(hdr[48:]))},
		LedgerID: string(hdr[56:]),
	}, nil
}

// ReadSnapshotInfo reads the header of a snapshot stream (the replicator
// checks at start whether its newest snapshot is ahead of the store).
func ReadSnapshotInfo(r io.Reader) (SnapshotInfo, error) {
	_, info, err := newSnapshotReader(r)
	return info, err
}

// PeekSnapshotInfo reads the header of the stream r without losing it:
// the reader it returns yields the whole stream again, header included
// (the replicator compares a received snapshot's header with its ledger
// before it hands the stream to Restore). It reads nothing past the header.
func PeekSnapshotInfo(r io.Reader) (SnapshotInfo, io.Reader, error) {
	var seen bytes.Buffer
	tee := io.TeeReader(r, &seen)
	info, err := readHeader(func(n int) ([]byte, error) {
		b := make([]byte, n)
		if _, err := io.ReadFull(tee, b); err != nil {
			return nil, fmt.Errorf("%w: truncated: %v", ErrBadSnapshot, err)
		}
		return b, nil
	})
	return info, io.MultiReader(&seen, r), err
}

// Restore replaces the ledger with the snapshot streamed by r (raft installs
// one on a follower that is too far behind to catch up from the log).
//
// It builds a fresh Pebble directory next to the store and checks the
// stream's hash and state before touching the live one; then, holding dbMu
// exclusively (reads wait, they never see a half state), it copies the
// node-local keys across, swaps the directories, reopens Pebble, reloads the
// sequencer state, rebuilds the id filter and caches, and publishes the new
// head, so that subscriptions resume from their next position.
//
// A snapshot of another ledger is refused with ErrIncompatible. A snapshot
// that does not extend this store's history (its head and every checkpoint
// it signed, checked with consistency proofs on the staged tree) is refused
// with ErrSnapshotForks, and one whose tree is not the tree of its events
// with ErrBadSnapshot (restorecheck.go); the store is then unchanged and
// goes on serving.
//
// A snapshot at or behind the applied index is not applied (going back
// would make the head, and this node's signed checkpoints, run ahead of
// the data), but it is checked all the same, since the replicator keeps it
// as a raft snapshot when Restore returns nil: it must be a prefix of this
// store's history, or this store's state itself when it names the store's
// own raft index, and its tree the tree of its events (checkNotNewer);
// otherwise it is refused like a fork. A leader whose answer to an install
// was lost sends the same snapshot again: it is this store's state, and
// passes.
//
// REQUIRES: called by the single applier. A crash at any point leaves either
// the old or the new store; the next Open settles it (folder.go).
func (s *Store) Restore(r io.Reader) error {
	if s.closed.Load() {
		return events.ErrClosed
	}
	sr, info, err := newSnapshotReader(r)
	if err != nil {
		return err
	}
	if info.LedgerID != s.ledgerID {
		return fmt.Errorf("snapshot of ledger %q, this store holds %q: %w", info.LedgerID, s.ledgerID, ErrIncompatible)
	}
	// What this store acknowledged and signed must be a prefix of the
	// snapshot, or the snapshot a prefix of it (restorecheck.go).
	h, err := s.committed()
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if info.Applied <= s.seq.applied {
		return s.checkNotNewer(sr, info, h)
	}
	if err := h.checkCovers(info); err != nil {
		s.cfg.Logger.Error("snapshot refused", "err", err)
		return err
	}
	fs := s.fs()
	ndb, tmp, err := s.stage(fs, sr, info)
	if err != nil {
		return err
	}
	if err := checkExtends(ndb, info, h); err != nil {
		_ = ndb.Close()
		_ = fs.RemoveAll(tmp)
		s.cfg.Logger.Error("snapshot refused", "err", err)
		return err
	}
	return s.swapIn(fs, ndb, tmp, info)
}

// stage builds the snapshot streamed by sr in a fresh folder next to the
// store (buildRestored) and returns it open, with the folder's name. On an
// error the folder is removed.
func (s *Store) stage(fs vfs.FS, sr *snapshotReader, info SnapshotInfo) (*pebble.DB, string, error) {
	tmp := restoreDir(s.cfg.Dir)
	if err := fs.RemoveAll(tmp); err != nil {
		return nil, "", fmt.Errorf("restore: clear %s: %w", tmp, err)
	}
	ndb, err := s.buildRestored(fs, tmp, sr, info)
	if err != nil {
		_ = fs.RemoveAll(tmp)
		return nil, "", err
	}
	return ndb, tmp, nil
}

// buildRestored writes the snapshot's records into a new database at tmp
// and checks the trailer and the restored state against the header.
func (s *Store) buildRestored(fs vfs.FS, tmp string, sr *snapshotReader, info SnapshotInfo) (*pebble.DB, error) {
	// No WAL while loading: a crash mid-load leaves a folder Recover deletes,
	// and Flush below makes the tables durable in one go.
	ndb, err := pebble.Open(tmp, &pebble.Options{FS: fs, DisableWAL: true, FormatMajorVersion: pebble.FormatNewest,
		MemTableSize: s.cfg.MemTableSize, Logger: pebbleslog.Logger{L: s.cfg.Logger, Prefix: "pebble: "}})
	if err != nil {
		return nil, fmt.Errorf("restore: open %s: %w", tmp, err)
	}
	fail := func(err error) (*pebble.DB, error) {
		_ = ndb.Close()
		return nil, err
	}
	var count uint64
	b := ndb.NewBatch()
	for {
		kind, err := sr.byte()
		if err != nil {
			b.Close()
			return fail(err)
		}
		if kind == 0 {
			break
		}
		if kind != 1 {
			b.Close()
			return fail(fmt.Errorf("%w: record kind %d", ErrBadSnapshot, kind))
		}
		kl, err := sr.uvarint()
		if err != nil || kl == 0 || kl > maxSnapshotValue {
			b.Close()
			return fail(fmt.Errorf("%w: key length %d: %v", ErrBadSnapshot, kl, err))
		}
		k, err := sr.full(int(kl))
		if err != nil {
			b.Close()
			return fail(err)
		}
		vl, err := sr.uvarint()
		if err != nil || vl > maxSnapshotValue {
			b.Close()
			return fail(fmt.Errorf("%w: value length %d: %v", ErrBadSnapshot, vl, err))
		}
		v, err := sr.full(int(vl))
		if err != nil {
			b.Close()
			return fail(err)
		}
		if !layout.Replicated(k) {
			b.Close()
			return fail(fmt.Errorf("%w: key %q outside the replicated key spaces", ErrBadSnapshot, k))
		}
		_ = b.Set(k, v, nil)
		count++
		if b.Len() >= 4<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return fail(fmt.Errorf("restore: write: %w", err))
			}
			b = ndb.NewBatch()
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fail(fmt.Errorf("restore: write: %w", err))
	}
	want := sr.h.Sum(nil)
	var trailer [40]byte
	if _, err := io.ReadFull(sr.r, trailer[:]); err != nil {
		return fail(fmt.Errorf("%w: truncated trailer: %v", ErrBadSnapshot, err))
	}
	if got := binary.BigEndian.Uint64(trailer[:8]); got != count {
		return fail(fmt.Errorf("%w: trailer counts %d records, stream held %d", ErrBadSnapshot, got, count))
	}
	if !bytes.Equal(trailer[8:], want) {
		return fail(fmt.Errorf("%w: stream hash does not match its trailer", ErrBadSnapshot))
	}
	raw, closer, err := ndb.Get(metaState)
	if err != nil {
		return fail(fmt.Errorf("%w: no state key: %v", ErrBadSnapshot, err))
	}
	st, err := decodeState(raw)
	size, applied, hashes := st.Size, st.Applied, st.Range
	_ = closer.Close()
	if err != nil {
		return fail(fmt.Errorf("%w: %v", ErrBadSnapshot, err))
	}
	root := events.EmptyRoot
	if size > 0 {
		rng, err := events.RangeFactory.NewRange(0, size, hashes)
		if err != nil {
			return fail(fmt.Errorf("%w: state range: %v", ErrBadSnapshot, err))
		}
		r, err := rng.GetRootHash(nil)
		if err != nil {
			return fail(fmt.Errorf("%w: state root: %v", ErrBadSnapshot, err))
		}
		root = [32]byte(r)
	}
	if size != info.Head.Size || applied != info.Applied || root != info.Head.Root {
		return fail(fmt.Errorf("%w: restored state (size %d, index %d) does not match the header (size %d, index %d) or its root",
			ErrBadSnapshot, size, applied, info.Head.Size, info.Applied))
	}
	if err := ndb.Flush(); err != nil {
		return fail(fmt.Errorf("restore: flush: %w", err))
	}
	return ndb, nil
}

// swapIn replaces the live store by the staged one at tmp, as folder.go's
// "The swap" describes. The replaced store is removed only once the new one
// opened and holds the snapshot's head; when it does not, the replaced
// store is put back and reopened, and Restore fails with the store serving
// what it held. A crash at any point leaves folders that Open settles.
func (s *Store) swapIn(fs vfs.FS, ndb *pebble.DB, tmp string, info SnapshotInfo) error {
	dir := strings.TrimRight(s.cfg.Dir, "/")
	parent := fs.PathDir(dir)
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	dropStaged := func(err error) error {
		_ = fs.RemoveAll(tmp)
		return err
	}
	// Node-local keys (this node's signed checkpoints, other components'
	// key spaces) stay with the node. They remain true of the new state: it
	// extends the old one (checkExtends).
	if err := copyLocal(s.db, ndb); err != nil {
		_ = ndb.Close()
		return dropStaged(fmt.Errorf("restore: keep node-local keys: %w", err))
	}
	if err := ndb.Close(); err != nil {
		return dropStaged(fmt.Errorf("restore: close %s: %w", tmp, err))
	}
	// The staged store is complete: the names of its files, and its own,
	// reach the disk before the live store is moved aside, after which a
	// crash finishes the swap with it (settleFolder).
	if err := errors.Join(syncDir(fs, tmp), syncDir(fs, parent)); err != nil {
		return dropStaged(fmt.Errorf("restore: sync %s: %w", tmp, err))
	}
	// A store an earlier swap replaced and could not remove: the live one
	// opened after it.
	if exists(fs, oldDir(dir)) {
		if err := reapOld(fs, dir); err != nil {
			return dropStaged(fmt.Errorf("restore: remove the store an earlier restore replaced: %w", err))
		}
	}
	prevFailure := s.failure()
	// The replaced store's log moves away with its folder, and comes back
	// with it if the swap fails (openFiles replays it).
	s.closeLive()
	if err := renameSynced(fs, dir, oldDir(dir), parent); err != nil {
		return dropStaged(s.undoSwap(fs, prevFailure, fmt.Errorf("restore: move the store aside: %w", err)))
	}
	if err := renameSynced(fs, tmp, dir, parent); err != nil {
		return dropStaged(s.undoSwap(fs, prevFailure, fmt.Errorf("restore: move the restored store into place: %w", err)))
	}
	head, err := s.openFiles()
	if err == nil && (head.Size != info.Head.Size || head.Root != info.Head.Root) {
		s.closeLive()
		err = fmt.Errorf("it holds %d events with root %x, the snapshot %d with root %x: %w",
			head.Size, head.Root, info.Head.Size, info.Head.Root, events.ErrCorrupt)
	}
	if err != nil {
		return s.undoSwap(fs, prevFailure, fmt.Errorf("restore: the restored store does not open: %w", err))
	}
	// Only now may the replaced store go.
	if err := reapOld(fs, dir); err != nil {
		s.cfg.Logger.Warn("restore: could not remove the replaced store; the next restore or start retries", "dir", oldDir(dir), "err", err)
	}
	s.cfg.Logger.Info("restored from snapshot", "raft_index", info.Applied, "events", head.Size)
	// publish takes s.mu, never dbMu: safe under the write lock, and it
	// wakes subscriptions, which then wait for the read lock and continue
	// from their next position.
	s.publish(head)
	return nil
}

// closeLive closes the live Pebble and its log without flushing: what they
// hold stays in the log, which the next open replays. REQUIRES: dbMu held
// exclusively.
func (s *Store) closeLive() {
	if err := errors.Join(s.log.close(false), s.db.Close()); err != nil {
		s.cfg.Logger.Warn("restore: close the store", "err", err)
	}
}

// undoSwap puts the replaced store back in the store's folder, wherever the
// failed swap left it, reopens it, and returns cause: Restore failed, the
// store serves what it held. Only a store that cannot be put back or
// reopened stops the process (fatal), with every folder left for Open to
// settle at the next start. REQUIRES: dbMu held exclusively, no store open.
func (s *Store) undoSwap(fs vfs.FS, prevFailure, cause error) error {
	dir := strings.TrimRight(s.cfg.Dir, "/")
	// A failure the restored store raised while it was open (a damaged
	// block its open read) is not the replaced store's.
	s.mu.Lock()
	s.mu.failed = prevFailure
	s.mu.Unlock()
	if exists(fs, oldDir(dir)) {
		if err := putBack(fs, dir); err != nil {
			s.fatal(fmt.Errorf("%w; putting back the replaced store failed: %w (the next start puts it back)", cause, err))
		}
	}
	head, err := s.openFiles()
	if err != nil {
		s.fatal(fmt.Errorf("%w; reopening the replaced store failed: %w", cause, err))
	}
	if head != s.Head() {
		// Not expected: it is the store that was live.
		s.cfg.Logger.Warn("restore: the replaced store reopened at another head", "head", head.Size, "was", s.Head().Size)
		s.publish(head)
	}
	log := s.cfg.Logger
	if failed := failedRestoreDir(dir); exists(fs, failed) {
		log = log.With("restored_store_kept_in", failed)
	}
	log.Error("snapshot restore failed: the store it would have replaced is back and serving", "err", cause)
	return cause
}

// copyLocal copies every key outside the replicated key spaces from src to
// dst.
func copyLocal(src, dst *pebble.DB) error {
	it, err := src.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	b := dst.NewBatch()
	for ok := it.First(); ok; ok = it.Next() {
		if layout.Replicated(it.Key()) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			b.Close()
			return err
		}
		_ = b.Set(it.Key(), v, nil)
	}
	if err := it.Error(); err != nil {
		b.Close()
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	return dst.Flush() // dst has no WAL: flushing is what makes it durable
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
