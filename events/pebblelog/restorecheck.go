package pebblelog

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"

	"github.com/greffe/greffe/events"
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
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCheckpoint}, UpperBound: []byte{prefixCheckpoint + 1}})
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
		if err := proof.VerifyConsistency(events.Hasher, p.size, info.Head.Size, pf, p.root[:], info.Head.Root[:]); err != nil {
			return forks(p, info, fmt.Sprintf("and the consistency proof between them does not verify (%v)", err))
		}
	}
	return nil
}

// stagedTree is the events.HashReader of a staged database.
type stagedTree struct{ r treeReader }

func (t *stagedTree) ReadHashes(_ context.Context, ids []compact.NodeID) ([][]byte, error) {
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
	it, err := ndb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEvent}, UpperBound: []byte{prefixEvent + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	rng := events.RangeFactory.NewEmptyRange(0)
	tile := make([]byte, 0, tileWidth*32)
	var nodes uint64 // stored nodes the tree needs
	var visitErr error
	visit := func(id compact.NodeID, hash []byte) {
		if id.Level == 0 || id.Level%tileHeight != 0 || visitErr != nil {
			return
		}
		nodes++
		stored, err := dbGet(ndb, hashKey(id.Level, id.Index))
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
		if len(tile) == tileWidth*32 {
			t := pos / tileWidth
			stored, err := dbGet(ndb, leafTileKey(t))
			if err != nil || !bytes.Equal(stored, tile) {
				return bad("leaf tile %d is not the hashes of events %d to %d (%v)", t, t*tileWidth, pos, err)
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
	}{{prefixHash, nodes}, {prefixLeafTile, size / tileWidth}} {
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
