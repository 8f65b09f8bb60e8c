package pebblelog

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/transparency-dev/merkle/compact"

	"github.com/greffe/greffe/events"
)

// Reading the tree. The store keeps full leaf tiles and the nodes at levels
// 8, 16, … (keys.go); any other node is folded from the tile beneath it, and
// leaves of the partial tile at the right edge are hashed from the events.
// Readers see only acknowledged leaves.

// nodeCache holds nodes of level >= 8 computed by folding: they cover at
// least 256 acknowledged leaves and never change. It is cleared when full.
type nodeCache struct {
	mu    sync.Mutex
	nodes map[compact.NodeID][]byte
}

const maxNodeCache = 1 << 16

func (c *nodeCache) get(id compact.NodeID) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.nodes[id]
	return h, ok
}

func (c *nodeCache) put(id compact.NodeID, h []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes == nil || len(c.nodes) >= maxNodeCache {
		c.nodes = make(map[compact.NodeID][]byte)
	}
	c.nodes[id] = h
}

// ReadHashes implements events.HashReader: it returns the hash of each
// perfect subtree root in ids, whose leaves must all be acknowledged.
func (s *Store) ReadHashes(ctx context.Context, ids []compact.NodeID) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	size := s.Head().Size
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	r := treeReader{s: s, size: size, tiles: map[uint64][]byte{}}
	out := make([][]byte, len(ids))
	for i, id := range ids {
		if _, end := id.Coverage(); end > size {
			return nil, fmt.Errorf("node %d/%d covers leaves up to %d, beyond head %d: %w", id.Level, id.Index, end, size, events.ErrNotFound)
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
	if level%tileHeight != 0 {
		return nil, fmt.Errorf("level %d is not a tile base", level)
	}
	size := s.Head().Size
	if lo > hi || hi > size>>level {
		return nil, fmt.Errorf("level %d nodes [%d, %d) beyond head %d: %w", level, lo, hi, size, events.ErrNotFound)
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	r := treeReader{s: s, size: size, tiles: map[uint64][]byte{}}
	return r.base(level, lo, hi)
}

// treeReader reads nodes for one call; it memoises leaf tiles.
// REQUIRES: s.dbMu held for reading.
type treeReader struct {
	s     *Store
	size  uint64
	tiles map[uint64][]byte // leaf tile index -> concatenated leaf hashes
}

func (r *treeReader) node(id compact.NodeID) ([]byte, error) {
	if id.Level >= tileHeight && id.Level%tileHeight == 0 {
		h, err := r.s.get(hashKey(id.Level, id.Index))
		if err != nil {
			return nil, fmt.Errorf("node %d/%d: %w", id.Level, id.Index, err)
		}
		return h, nil
	}
	if id.Level >= tileHeight {
		if h, ok := r.s.nodes.get(id); ok {
			return h, nil
		}
	}
	base := id.Level - id.Level%tileHeight
	shift := id.Level - base
	hashes, err := r.base(base, id.Index<<shift, (id.Index+1)<<shift)
	if err != nil {
		return nil, err
	}
	h := fold(hashes)
	if id.Level >= tileHeight {
		r.s.nodes.put(id, h)
	}
	return h, nil
}

// base returns nodes [lo, hi) of a tile-base level.
func (r *treeReader) base(level uint, lo, hi uint64) ([][]byte, error) {
	if level == 0 {
		return r.leaves(lo, hi)
	}
	it, err := r.s.db.NewIter(&pebble.IterOptions{LowerBound: hashKey(level, lo), UpperBound: hashKey(level, hi)})
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
		t := pos / tileWidth
		tile, err := r.leafTile(t)
		if err != nil {
			return nil, err
		}
		end := min(hi, (t+1)*tileWidth)
		for ; pos < end; pos++ {
			off := (pos % tileWidth) * 32
			if off+32 > uint64(len(tile)) {
				return nil, fmt.Errorf("leaf %d missing from tile %d: %w", pos, t, events.ErrCorrupt)
			}
			out = append(out, tile[off:off+32:off+32])
		}
	}
	return out, nil
}

// leafTile returns the leaf hashes of tile t: the stored tile when full, or
// the hashes of its acknowledged events when it is the partial right edge.
func (r *treeReader) leafTile(t uint64) ([]byte, error) {
	if tile, ok := r.tiles[t]; ok {
		return tile, nil
	}
	var tile []byte
	if (t+1)*tileWidth <= r.size {
		raw, err := r.s.get(leafTileKey(t))
		if err != nil {
			return nil, fmt.Errorf("leaf tile %d: %w", t, err)
		}
		if len(raw) != tileWidth*32 {
			return nil, fmt.Errorf("leaf tile %d of %d bytes: %w", t, len(raw), events.ErrCorrupt)
		}
		tile = raw
	} else {
		for pos := t * tileWidth; pos < r.size; pos++ {
			raw, err := r.s.get(eventKey(pos))
			if err != nil {
				return nil, fmt.Errorf("position %d: %w", pos, err)
			}
			h := events.LeafHash(raw)
			tile = append(tile, h[:]...)
		}
	}
	r.tiles[t] = tile
	return tile, nil
}

// fold hashes a power-of-two run of sibling nodes up to their root.
func fold(h [][]byte) []byte {
	if len(h) == 1 {
		return h[0]
	}
	level := make([][]byte, len(h)/2)
	for i := range level {
		level[i] = events.Hasher.HashChildren(h[2*i], h[2*i+1])
	}
	return fold(level)
}
