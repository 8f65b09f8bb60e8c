package pebblelog

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// Reading the tree. The store keeps full leaf tiles and the nodes at levels
// 8, 16, … (layout); any other node is folded from the tile beneath it, and
// leaves of the partial tile at the right edge are hashed from the events.
// Readers see only acknowledged leaves.

// nodeCache holds what proofs keep reading and never changes once its
// leaves are acknowledged, so that a proof costs a few hashes instead of
// Pebble reads and hundreds of hashes (BenchmarkInclusionProof):
//
//   - nodes of level >= 8, stored or folded, and nodes of levels 4-7 of the
//     partial tile at the right edge (cleared when full);
//   - full leaf tiles (at most maxTileCache, a random one evicted when full):
//     the siblings of levels 0-3 are folded from them;
//   - the 16 level-4 nodes of full tiles ("summaries", cleared when full):
//     the siblings of levels 4-7 are folded from them;
//   - the leaf hashes of the partial tile at the right edge (edge): without
//     it every proof touching the right border (nearly every proof at the
//     head) would read and hash up to 255 events. The cached prefix stays
//     valid as the tile fills.
//
// The tile-derived entries are tied to the Pebble handle they were read
// from (db): a restore swaps the handle, which drops them.
type nodeCache struct {
	mu    sync.Mutex
	nodes map[events.NodeID][]byte // guarded by mu
	db    *pebble.DB               // guarded by mu: the handle tiles, sums and edge were read from
	tiles map[uint64][]byte        // guarded by mu
	sums  map[uint64]*[16][32]byte // guarded by mu
	edge  edgeTile                 // guarded by mu
}

// edgeTile is the cached prefix of a partial leaf tile.
type edgeTile struct {
	index  uint64
	leaves []byte // append-only; a prefix handed out is never written again
}

// Cache bounds. maxNodeCache nodes cost about 100 bytes each; a tile 8 KiB
// (maxTileCache: 32 MiB, the tiles of a million events, filled by proofs
// only); a summary 512 bytes (maxSumCache: 8 MiB, the tiles of 4 million
// events).
const (
	maxNodeCache = 1 << 16
	maxTileCache = 4096
	maxSumCache  = 1 << 14
)

func (c *nodeCache) get(id events.NodeID) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.nodes[id]
	return h, ok
}

func (c *nodeCache) put(id events.NodeID, h []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes == nil || len(c.nodes) >= maxNodeCache {
		c.nodes = make(map[events.NodeID][]byte)
	}
	c.nodes[id] = h
}

// sameDBLocked drops the tile-derived entries read from another handle.
// REQUIRES: c.mu held.
func (c *nodeCache) sameDBLocked(db *pebble.DB) {
	if c.db != db {
		c.db, c.tiles, c.sums, c.edge = db, nil, nil, edgeTile{}
	}
}

func (c *nodeCache) tile(db *pebble.DB, t uint64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sameDBLocked(db)
	return c.tiles[t]
}

func (c *nodeCache) putTile(db *pebble.DB, t uint64, leaves []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sameDBLocked(db)
	if c.tiles == nil {
		c.tiles = make(map[uint64][]byte)
	}
	if len(c.tiles) >= maxTileCache {
		for k := range c.tiles { // map order is random: a random victim
			delete(c.tiles, k)
			break
		}
	}
	c.tiles[t] = leaves
}

func (c *nodeCache) sum(db *pebble.DB, t uint64) *[16][32]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sameDBLocked(db)
	return c.sums[t]
}

func (c *nodeCache) putSum(db *pebble.DB, t uint64, sum *[16][32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sameDBLocked(db)
	if c.sums == nil || len(c.sums) >= maxSumCache {
		c.sums = make(map[uint64]*[16][32]byte)
	}
	c.sums[t] = sum
}

// edgeLeaves returns the cached leaves of partial tile t read from db (a
// prefix: possibly fewer than needed).
func (c *nodeCache) edgeLeaves(db *pebble.DB, t uint64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sameDBLocked(db)
	if c.edge.index != t {
		return nil
	}
	l := c.edge.leaves
	return l[:len(l):len(l)]
}

// putEdge records a longer prefix of partial tile t.
func (c *nodeCache) putEdge(db *pebble.DB, t uint64, leaves []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sameDBLocked(db)
	if c.edge.index == t && len(c.edge.leaves) >= len(leaves) {
		return
	}
	c.edge = edgeTile{index: t, leaves: leaves}
}

// ReadHashes implements events.HashReader: it returns the hash of each
// perfect subtree root in ids, whose leaves must all be acknowledged.
func (s *Store) ReadHashes(ctx context.Context, ids []events.NodeID) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	size := s.Head().Size
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	r := s.treeReader(size)
	r.keepTiles = true
	return r.readHashes(ids)
}

// readHashes returns the hash of each node in ids, whose leaves must all be
// within r.size.
func (r *treeReader) readHashes(ids []events.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		if _, end := id.Coverage(); end > r.size {
			return nil, fmt.Errorf("node %d/%d covers leaves up to %d, beyond head %d: %w", id.Level, id.Index, end, r.size, events.ErrNotFound)
		}
		h, err := r.node(id)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// ReadLevel returns the hashes of nodes [lo, hi) at a tile-base level
// (0, 8, 16, …), in order: the content of a C2SP tile. Every node must cover
// acknowledged leaves only.
func (s *Store) ReadLevel(ctx context.Context, level uint, lo, hi uint64) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if level%layout.TileHeight != 0 {
		return nil, fmt.Errorf("level %d is not a tile base", level)
	}
	size := s.Head().Size
	if lo > hi || hi > size>>level {
		return nil, fmt.Errorf("level %d nodes [%d, %d) beyond head %d: %w", level, lo, hi, size, events.ErrNotFound)
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	r := s.treeReader(size)
	return r.base(level, lo, hi)
}

// treeReader reads nodes for one call; it memoises leaf tiles. It reads
// the store's database (Store.treeReader), or a staged one that a restore
// checks before swapping it in (restorecheck.go).
type treeReader struct {
	db    *pebble.DB
	cache *nodeCache
	// noteDamage, when set, sees every read's error (Store.noteDamage: a
	// damaged block fails the store; a staged database is not the store's).
	noteDamage func(*error)
	size       uint64
	tiles      map[uint64][]byte // leaf tile index -> concatenated leaf hashes
	// keepTiles puts the full tiles read into the store's tile cache. Only
	// proofs do: sequential reads of the log (pages, tiles served) would
	// only churn it.
	keepTiles bool
}

// treeReader reads the store's tree of size leaves.
// REQUIRES: s.dbMu held for reading while it is used.
func (s *Store) treeReader(size uint64) treeReader {
	return treeReader{db: s.db, cache: &s.nodes, noteDamage: s.noteDamage, size: size, tiles: map[uint64][]byte{}}
}

func (r *treeReader) get(key []byte) (_ []byte, err error) {
	if r.noteDamage != nil {
		defer r.noteDamage(&err)
	}
	return dbGet(r.db, key)
}

func (r *treeReader) node(id events.NodeID) ([]byte, error) {
	// Nodes of level >= 4 are cached: a complete node never changes. (In
	// the partial tile at the right edge, level-4 to 7 nodes are folded
	// from up to 128 leaves, and nearly every proof at the head needs
	// one.)
	if id.Level >= sumLevel {
		if h, ok := r.cache.get(id); ok {
			return h, nil
		}
	}
	if id.Level >= layout.TileHeight && id.Level%layout.TileHeight == 0 {
		h, err := r.get(layout.NodeKey(id.Level, id.Index))
		if err != nil {
			return nil, fmt.Errorf("node %d/%d: %w", id.Level, id.Index, err)
		}
		r.cache.put(id, h)
		return h, nil
	}
	if id.Level >= sumLevel && id.Level < layout.TileHeight {
		// Levels 4-7 inside a full tile: fold the tile's level-4 nodes.
		first := id.Index << id.Level
		if t := first / layout.TileWidth; (t+1)*layout.TileWidth <= r.size {
			sum, err := r.summary(t)
			if err != nil {
				return nil, err
			}
			j := first/(1<<sumLevel) - t*(layout.TileWidth>>sumLevel)
			n := uint64(1) << (id.Level - sumLevel)
			hs := make([][]byte, n)
			for k := range hs {
				hs[k] = sum[j+uint64(k)][:]
			}
			return fold(hs), nil
		}
	}
	base := id.Level - id.Level%layout.TileHeight
	shift := id.Level - base
	hashes, err := r.base(base, id.Index<<shift, (id.Index+1)<<shift)
	if err != nil {
		return nil, err
	}
	h := fold(hashes)
	if id.Level >= sumLevel {
		r.cache.put(id, h)
	}
	return h, nil
}

// sumLevel is the level of the nodes a tile summary holds: 16 per tile.
const sumLevel = 4

// summary returns the level-4 nodes of full tile t, folding them from its
// leaves (240 hashes) the first time.
func (r *treeReader) summary(t uint64) (*[16][32]byte, error) {
	if sum := r.cache.sum(r.db, t); sum != nil {
		return sum, nil
	}
	leaves, err := r.leafTile(t)
	if err != nil {
		return nil, err
	}
	sum := new([16][32]byte)
	group := make([][]byte, 1<<sumLevel)
	for i := range sum {
		for k := range group {
			off := (i<<sumLevel + k) * 32
			group[k] = leaves[off : off+32]
		}
		copy(sum[i][:], fold(group))
	}
	r.cache.putSum(r.db, t, sum)
	return sum, nil
}

// base returns nodes [lo, hi) of a tile-base level.
func (r *treeReader) base(level uint, lo, hi uint64) ([][]byte, error) {
	if level == 0 {
		return r.leaves(lo, hi)
	}
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: layout.NodeKey(level, lo), UpperBound: layout.NodeKey(level, hi)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := make([][]byte, 0, hi-lo)
	for ok := it.First(); ok; ok = it.Next() {
		if idx := binary.BigEndian.Uint64(it.Key()[2:]); idx != lo+uint64(len(out)) || len(it.Value()) != 32 {
			return nil, fmt.Errorf("node %d/%d missing: %w", level, lo+uint64(len(out)), events.ErrCorrupt)
		}
		out = append(out, append([]byte(nil), it.Value()...))
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if uint64(len(out)) != hi-lo {
		return nil, fmt.Errorf("node %d/%d missing: %w", level, lo+uint64(len(out)), events.ErrCorrupt)
	}
	return out, nil
}

// leaves returns leaf hashes [lo, hi).
func (r *treeReader) leaves(lo, hi uint64) ([][]byte, error) {
	out := make([][]byte, 0, hi-lo)
	for pos := lo; pos < hi; {
		t := pos / layout.TileWidth
		tile, err := r.leafTile(t)
		if err != nil {
			return nil, err
		}
		end := min(hi, (t+1)*layout.TileWidth)
		for ; pos < end; pos++ {
			off := (pos % layout.TileWidth) * 32
			if off+32 > uint64(len(tile)) {
				return nil, fmt.Errorf("leaf %d missing from tile %d: %w", pos, t, events.ErrCorrupt)
			}
			out = append(out, tile[off:off+32:off+32])
		}
	}
	return out, nil
}

// leafTile returns the leaf hashes of tile t: the stored tile when full, or
// the hashes of its acknowledged events when it is the partial right edge
// (from the edge cache, hashing only the events it does not hold yet).
func (r *treeReader) leafTile(t uint64) ([]byte, error) {
	if tile, ok := r.tiles[t]; ok {
		return tile, nil
	}
	var tile []byte
	if (t+1)*layout.TileWidth <= r.size {
		if tile = r.cache.tile(r.db, t); tile == nil {
			raw, err := r.get(layout.LeafTileKey(t))
			if err != nil {
				return nil, fmt.Errorf("leaf tile %d: %w", t, err)
			}
			if len(raw) != layout.TileWidth*32 {
				return nil, fmt.Errorf("leaf tile %d of %d bytes: %w", t, len(raw), events.ErrCorrupt)
			}
			tile = raw
			if r.keepTiles {
				r.cache.putTile(r.db, t, tile)
			}
		}
	} else {
		need := (r.size - t*layout.TileWidth) * 32
		cached := r.cache.edgeLeaves(r.db, t)
		if uint64(len(cached)) >= need {
			tile = cached[:need:need]
		} else {
			tile = make([]byte, len(cached), need)
			copy(tile, cached)
			it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: layout.EventKey(t*layout.TileWidth + uint64(len(cached))/32), UpperBound: layout.EventKey(r.size)})
			if err != nil {
				return nil, err
			}
			for ok := it.First(); ok; ok = it.Next() {
				if pos := binary.BigEndian.Uint64(it.Key()[1:]); pos != t*layout.TileWidth+uint64(len(tile))/32 {
					_ = it.Close()
					return nil, fmt.Errorf("position %d missing: %w", t*layout.TileWidth+uint64(len(tile))/32, events.ErrCorrupt)
				}
				h := events.LeafHash(it.Value())
				tile = append(tile, h[:]...)
			}
			if err := it.Close(); err != nil {
				return nil, err
			}
			if uint64(len(tile)) != need {
				return nil, fmt.Errorf("position %d missing: %w", t*layout.TileWidth+uint64(len(tile))/32, events.ErrCorrupt)
			}
			r.cache.putEdge(r.db, t, tile)
		}
	}
	r.tiles[t] = tile
	return tile, nil
}

// fold hashes a power-of-two run of sibling nodes up to their root, in one
// scratch buffer and without allocating per node (proof serving folds up to
// 247 nodes per inclusion proof).
func fold(h [][]byte) []byte {
	if len(h) == 1 {
		return h[0]
	}
	buf := make([]byte, 32*len(h)/2)
	var in [65]byte
	in[0] = 1 // RFC 6962 node prefix
	for i := 0; i < len(h)/2; i++ {
		copy(in[1:33], h[2*i])
		copy(in[33:], h[2*i+1])
		sum := sha256.Sum256(in[:])
		copy(buf[32*i:], sum[:])
	}
	for n := len(h) / 2; n > 1; n /= 2 {
		for i := 0; i < n/2; i++ {
			copy(in[1:], buf[64*i:64*i+64])
			sum := sha256.Sum256(in[:])
			copy(buf[32*i:], sum[:])
		}
	}
	return buf[:32:32]
}
