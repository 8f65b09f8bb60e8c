package verify

import (
	"context"
	"fmt"

	"github.com/transparency-dev/merkle/compact"

	"github.com/greffe/greffe/events"
)

// tree is the Merkle tree recomputed from the stored event bytes, every
// node of it: levels[l] is the concatenation of the 32-byte hashes of the
// complete nodes (l, 0), (l, 1), …. It costs 64 bytes per event, which buys
// exact comparisons with every stored tile and node, roots at any size and
// consistency proofs without reading the store again. Not safe for
// concurrent mutation; concurrent reads after complete are safe.
type tree struct {
	levels [][]byte
}

func newTree(sizeHint uint64) *tree {
	t := &tree{levels: make([][]byte, 0, 64)}
	for l := uint(0); l == 0 || sizeHint>>l > 0; l++ {
		t.levels = append(t.levels, make([]byte, 0, 32*(sizeHint>>l)))
	}
	return t
}

// size returns the number of leaves.
func (t *tree) size() uint64 { return uint64(len(t.levels[0]) / 32) }

// level returns the hashes of level l, growing the level list as needed.
func (t *tree) level(l uint) *[]byte {
	for uint(len(t.levels)) <= l {
		t.levels = append(t.levels, nil)
	}
	return &t.levels[l]
}

// node returns the hash of a complete node, or nil when it is not computed.
func (t *tree) node(l uint, i uint64) []byte {
	if l >= uint(len(t.levels)) || uint64(len(t.levels[l])/32) <= i {
		return nil
	}
	return t.levels[l][32*i : 32*i+32 : 32*i+32]
}

// complete computes every complete node not yet computed, level by level.
func (t *tree) complete() {
	n := t.size()
	for l := uint(1); n>>l > 0; l++ {
		want := n >> l
		below := t.levels[l-1]
		dst := t.level(l)
		for have := uint64(len(*dst) / 32); have < want; have++ {
			h := events.NodeHash(below[64*have:64*have+32], below[64*have+32:64*have+64])
			*dst = append(*dst, h[:]...)
		}
	}
}

// ReadHashes implements events.HashReader over the computed nodes.
func (t *tree) ReadHashes(_ context.Context, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h := t.node(id.Level, id.Index)
		if h == nil {
			return nil, fmt.Errorf("node %d/%d beyond the recomputed tree of %d leaves: %w", id.Level, id.Index, t.size(), events.ErrNotFound)
		}
		out[i] = h
	}
	return out, nil
}

// root returns the root of the first size leaves. REQUIRES: complete was
// called and size <= t.size().
func (t *tree) root(size uint64) [32]byte {
	r, err := events.RootAt(context.Background(), t, size)
	if err != nil {
		panic(fmt.Sprintf("root of a complete tree: %v", err)) // invariant
	}
	return r
}

// rangeHashes returns the compact range [0, size) as stored in the state.
func (t *tree) rangeHashes(size uint64) [][]byte {
	ids := compact.RangeNodes(0, size, nil)
	hs, err := t.ReadHashes(context.Background(), ids)
	if err != nil {
		panic(fmt.Sprintf("range of a complete tree: %v", err)) // invariant
	}
	return hs
}

// foldTile computes the nodes of levels 1..8 above 256 leaf hashes
// (concatenated) and appends them to out[1..8].
func foldTile(leaves []byte, out *[9][]byte) {
	cur := leaves
	var scratch [128 * 32]byte
	for l := 1; l <= 8; l++ {
		n := len(cur) / 64
		next := scratch[:n*32]
		for i := 0; i < n; i++ {
			h := events.NodeHash(cur[64*i:64*i+32], cur[64*i+32:64*i+64])
			copy(next[32*i:], h[:])
		}
		out[l] = append(out[l], next...)
		cur = next
	}
}
