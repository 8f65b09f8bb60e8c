package pebblelog

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// Checking a staged restore against the store it would replace (issue #20).
//
// Raft applies committed entries only, so everything this store holds (its
// head, not only what it signed) is a prefix of the history of any later
// snapshot of its cluster. A snapshot that does not extend the store is not
// that history, whoever sent it: installing it would replace acknowledged
// events, and the node would sign the new head. Before the swap, Restore
// checks, on the staged database:
//
//  1. that its tree is the tree of its events (checkStagedTree): every event
//     is hashed and the tree rebuilt from the leaves, and every stored leaf
//     tile and node must be the rebuilt one, and the root the header's. A
//     proof read from the stored tree says nothing of the events served
//     beside it otherwise: an honest tree with forged event bytes would pass
//     (and reads take leaf hashes from the tiles, not from the bytes). The
//     same pass compares the rebuilt root at the size of every checkpoint
//     this store signed and kept with the checkpoint's root;
//  2. that a consistency proof read from the staged tree, from the store's
//     head and from its newest signed checkpoint to the snapshot's root,
//     verifies (proof.VerifyConsistency), as an auditor holding those heads
//     would check it.
//
// Check 1 reads and hashes every event once more, an O(n) pass like the
// build itself: BenchmarkRestore (200,000 events, a 68 MiB stream) took
// 0.86-1.88 s per install with it against 0.59-1.69 s without, in
// alternating runs on a loaded two-core machine (go test -run '^$' -bench
// BenchmarkRestore -benchtime 3x ./events/pebblelog/, on this branch and on
// its parent): a third more, paid only when a follower needs a snapshot.
//
// A snapshot that fails 1 is ErrBadSnapshot; one that fails a comparison
// with this store's history, ErrSnapshotForks. Either way the staged folder
// is removed and the store is untouched.
//
// Every checkpoint is checked, not only the newest: they are prefixes of
// the head when the store's history never changed, and a store that was
// forked before (by a restore without this check) would hold one that is
// not. Checkpoints the signer stores while the check runs are of the
// acknowledged head, which cannot move (the applier is running Restore):
// the head check covers them.

// prefixOf is a (size, root) this store is committed to: its head or a
// checkpoint it signed.
type prefixOf struct {
	size uint64
	root [32]byte
	what string // "head", "checkpoint": for the refusal's sentence
}

// history is what this store is committed to: its head, and every
// checkpoint it signed and kept.
type history struct {
	head        prefixOf
	checkpoints []prefixOf // by size
}

// all returns the head and the checkpoints, by size.
func (h history) all() []prefixOf {
	out := append([]prefixOf{h.head}, h.checkpoints...)
	slices.SortStableFunc(out, func(a, b prefixOf) int { return cmp.Compare(a.size, b.size) })
	return out
}

// committed reads the store's history. REQUIRES: called by the single
// applier (it reads seq).
func (s *Store) committed() (history, error) {
	h := history{head: prefixOf{size: s.seq.size, root: events.EmptyRoot, what: "head"}}
	if s.seq.size > 0 {
		r, err := s.seq.rng.GetRootHash(nil)
		if err != nil {
			return history{}, fmt.Errorf("head root: %v: %w", err, events.ErrCorrupt)
		}
		h.head.root = [32]byte(r)
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	it, err := s.db.NewIter(spanOf(layout.SpaceCheckpoints))
	if err != nil {
		return history{}, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() { // keys in size order
		cp, err := s.parseStored(it.Value())
		if err != nil {
			return history{}, fmt.Errorf("stored checkpoint %x: %w", it.Key(), err)
		}
		h.checkpoints = append(h.checkpoints, prefixOf{size: cp.Size, root: cp.Root, what: "signed checkpoint"})
	}
	return h, it.Error()
}

// checkCovers refuses, before anything is staged, a snapshot with fewer
// events than the store holds or has signed.
func (h history) checkCovers(info SnapshotInfo) error {
	all := h.all()
	if last := all[len(all)-1]; last.size > info.Head.Size {
		return forks(last, info, "fewer than this store")
	}
	return nil
}

// forks is the refusal of a snapshot that does not extend p.
func forks(p prefixOf, info SnapshotInfo, why string) error {
	return fmt.Errorf("%w: this store's %s holds %d events with root %x; the snapshot (raft index %d) holds %d events with root %x, %s; refused, the store is unchanged",
		ErrSnapshotForks, p.what, p.size, p.root, info.Applied, info.Head.Size, info.Head.Root, why)
}

// checkExtends runs checks 1 and 2 on the staged database ndb.
// REQUIRES: h passed checkCovers(info); ndb holds a snapshot whose state
// buildRestored checked against info.
func checkExtends(ndb *pebble.DB, info SnapshotInfo, h history) error {
	if err := checkStagedTree(ndb, info, h.all()); err != nil {
		return err
	}
	staged := &stagedTree{r: treeReader{db: ndb, cache: &nodeCache{}, size: info.Head.Size, tiles: map[uint64][]byte{}}}
	check := []prefixOf{h.head}
	if n := len(h.checkpoints); n > 0 {
		check = append(check, h.checkpoints[n-1])
	}
	for _, p := range check {
		pf, err := events.ConsistencyProof(context.Background(), staged, p.size, info.Head.Size)
		if err != nil {
			return fmt.Errorf("%w: consistency proof from %d to %d: %v", ErrBadSnapshot, p.size, info.Head.Size, err)
		}
		if err := events.VerifyConsistency(p.size, info.Head.Size, pf, p.root[:], info.Head.Root[:]); err != nil {
			return forks(p, info, fmt.Sprintf("and the consistency proof between them does not verify (%v)", err))
		}
	}
	return nil
}

// stagedTree is the events.HashReader of a staged database (or of the
// store's own, for rootAt).
type stagedTree struct{ r treeReader }

func (t *stagedTree) ReadHashes(_ context.Context, ids []events.NodeID) ([][]byte, error) {
	return t.r.readHashes(ids)
}

// checkStagedTree rebuilds the tree of ndb's events and checks it against
// the stored leaf tiles and nodes, the header's root, and the root of every
// prefix in prefixes (sorted by size, none beyond the snapshot's).
func checkStagedTree(ndb *pebble.DB, info SnapshotInfo, prefixes []prefixOf) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(format, args...))
	}
	size := info.Head.Size
	it, err := ndb.NewIter(spanOf(layout.SpaceEvents))
	if err != nil {
		return err
	}
	defer it.Close()
	rng := events.RangeFactory.NewEmptyRange(0)
	tile := make([]byte, 0, layout.TileWidth*32)
	var nodes uint64 // stored nodes the tree needs
	var visitErr error
	visit := func(id events.NodeID, hash []byte) {
		if id.Level == 0 || id.Level%layout.TileHeight != 0 || visitErr != nil {
			return
		}
		nodes++
		stored, err := dbGet(ndb, layout.NodeKey(id.Level, id.Index))
		switch {
		case err != nil:
			visitErr = bad("tree node %d/%d: %v", id.Level, id.Index, err)
		case !bytes.Equal(stored, hash):
			visitErr = bad("tree node %d/%d is not the hash of the events beneath it", id.Level, id.Index)
		}
	}
	next := 0 // the next prefix to compare
	for next < len(prefixes) && prefixes[next].size == 0 {
		next++ // the empty tree is a prefix of every tree
	}
	var pos uint64
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Key()) != 9 || binary.BigEndian.Uint64(it.Key()[1:]) != pos || pos >= size {
			return bad("event key %x where position %d of %d was expected", it.Key(), pos, size)
		}
		raw, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("restore: read staged event %d: %w", pos, err)
		}
		leaf := events.LeafHash(raw)
		if err := rng.Append(leaf[:], visit); err != nil {
			return bad("tree at %d: %v", pos, err)
		}
		if visitErr != nil {
			return visitErr
		}
		tile = append(tile, leaf[:]...)
		if len(tile) == layout.TileWidth*32 {
			t := pos / layout.TileWidth
			stored, err := dbGet(ndb, layout.LeafTileKey(t))
			if err != nil || !bytes.Equal(stored, tile) {
				return bad("leaf tile %d is not the hashes of events %d to %d (%v)", t, t*layout.TileWidth, pos, err)
			}
			tile = tile[:0]
		}
		pos++
		for ; next < len(prefixes) && prefixes[next].size == pos; next++ {
			r, err := rng.GetRootHash(nil)
			if err != nil {
				return bad("root at %d: %v", pos, err)
			}
			if p := prefixes[next]; [32]byte(r) != p.root {
				return forks(p, info, fmt.Sprintf("and its first %d events have root %x", pos, r))
			}
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("restore: read staged events: %w", err)
	}
	if pos != size {
		return bad("%d events, the header says %d", pos, size)
	}
	root := events.EmptyRoot
	if size > 0 {
		r, err := rng.GetRootHash(nil)
		if err != nil {
			return bad("root: %v", err)
		}
		root = [32]byte(r)
	}
	if root != info.Head.Root {
		return bad("the events' root is %x, the header says %x", root, info.Head.Root)
	}
	// Nothing stored beyond the tree: a node or tile the rebuilt tree does
	// not have would be served once its leaves exist.
	for _, space := range []struct {
		prefix byte
		want   uint64
	}{{byte(layout.SpaceNodes), nodes}, {byte(layout.SpaceLeafTiles), size / layout.TileWidth}} {
		n, err := countKeys(ndb, space.prefix)
		if err != nil {
			return err
		}
		if n != space.want {
			return bad("%d keys in key space %q, the tree of %d events has %d", n, space.prefix, size, space.want)
		}
	}
	return nil
}

// countKeys counts the keys of one key space.
func countKeys(db *pebble.DB, prefix byte) (uint64, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}, KeyTypes: pebble.IterKeyTypePointsOnly})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var n uint64
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Error()
}

// A snapshot not newer than the store (issue #20).
//
// Restore does not apply a snapshot at or behind the store's raft index,
// but the replicator keeps it in raft's snapshot store, serves it to
// followers that need one, and raft records the index it names (the
// replicator bounds that index: replicator/snapindex.go). So it must be
// what this store holds, not only claim to be: a prefix of the store's
// history (raft applies committed entries only, so any earlier state of
// the cluster is one), and the store's own state when it names the
// store's own raft index (one raft index, one state). checkNotNewer
// compares its header with the store's own tree (the root at the
// snapshot's size, read from the store's nodes, and at the store's head
// and signed checkpoints it covers), then stages it and checks that its
// tree is the tree of its events and has those roots (checkStagedTree):
// a header copied from an honest snapshot over forged events would
// otherwise be served. The staged folder is then removed and the store
// kept. The cost is an install's, paid only for such a snapshot: in
// practice the one a leader sends again when the answer to its install
// was lost (the follower installed it, and now holds exactly its state).

// checkNotNewer checks the snapshot streamed by sr, whose header info names
// a raft index at or behind the store's, against the store's history h, and
// returns nil when the store may be kept with the snapshot kept beside it,
// or the refusal: ErrSnapshotForks when it is not a prefix of h (or not h's
// head at h's own raft index), ErrBadSnapshot when its tree is not the tree
// of its events. The store is unchanged either way. REQUIRES: called by the
// single applier; info.Applied <= s.seq.applied; info's ledger id is the
// store's.
func (s *Store) checkNotNewer(sr *snapshotReader, info SnapshotInfo, h history) error {
	refuse := func(err error) error {
		s.cfg.Logger.Error("snapshot refused", "err", err)
		return err
	}
	head := h.head
	switch {
	case info.Head.Size > head.size:
		return refuse(forks(head, info, fmt.Sprintf("more events than this store, at raft index %d, not after this store's %d", info.Applied, s.seq.applied)))
	case info.Applied == s.seq.applied && (info.Head.Size != head.size || info.Head.Root != head.root || info.Head.RecordedAt != s.seq.lastRecorded):
		return refuse(forks(head, info, fmt.Sprintf("another state at this store's own raft index %d", info.Applied)))
	}
	root, err := s.rootAt(info.Head.Size)
	if err != nil {
		return fmt.Errorf("restore: this store's root at %d: %w", info.Head.Size, err)
	}
	own := prefixOf{size: info.Head.Size, root: root, what: "tree"}
	if root != info.Head.Root {
		return refuse(forks(own, info, "at a raft index not after this store's, so not a prefix of its history"))
	}
	prefixes := []prefixOf{own}
	for _, p := range h.all() {
		if p.size <= info.Head.Size {
			prefixes = append(prefixes, p)
		}
	}
	slices.SortStableFunc(prefixes, func(a, b prefixOf) int { return cmp.Compare(a.size, b.size) })
	fs := s.fs()
	ndb, tmp, err := s.stage(fs, sr, info)
	if err != nil {
		return refuse(err)
	}
	err = checkStagedTree(ndb, info, prefixes)
	err = errors.Join(err, ndb.Close())
	if rerr := fs.RemoveAll(tmp); rerr != nil {
		s.cfg.Logger.Warn("restore: could not remove the staged folder of a snapshot not newer than the store; the next restore or start removes it",
			"dir", tmp, "err", rerr)
	}
	if err != nil {
		return refuse(err)
	}
	s.cfg.Logger.Info("snapshot not newer than the store, and a prefix of its history: kept the store",
		"snapshot_index", info.Applied, "snapshot_events", info.Head.Size, "applied", s.seq.applied, "events", head.size)
	return nil
}

// rootAt returns the root of the store's tree at size, read from the
// store's own nodes. REQUIRES: called by the single applier; size <=
// s.seq.size.
func (s *Store) rootAt(size uint64) ([32]byte, error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	return events.RootAt(context.Background(), &stagedTree{r: s.treeReader(s.seq.size)}, size)
}
