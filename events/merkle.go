package events

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Hasher is the RFC 6962 SHA-256 hasher used for every greffe tree.
var Hasher = rfc6962.DefaultHasher

// RangeFactory builds compact ranges with RFC 6962 node hashing.
var RangeFactory = &compact.RangeFactory{Hash: HashChildren}

// HashChildren is RFC 6962's interior node hash SHA-256(0x01 || l || r), the
// same as Hasher.HashChildren with one allocation (the result) instead of
// three: the store computes one per appended event.
func HashChildren(l, r []byte) []byte {
	if len(l) != sha256.Size || len(r) != sha256.Size {
		return Hasher.HashChildren(l, r)
	}
	sum := NodeHash(l, r)
	return sum[:]
}

// NodeHash is HashChildren of two 32-byte children without allocating, for
// loops that hash many nodes (the auditor rebuilds whole trees with it).
// REQUIRES: len(l) == len(r) == 32.
func NodeHash(l, r []byte) [32]byte {
	var in [1 + 2*sha256.Size]byte
	in[0] = rfc6962.RFC6962NodeHashPrefix
	copy(in[1:], l)
	copy(in[1+sha256.Size:], r)
	return sha256.Sum256(in[:])
}

// EmptyRoot is the root of the empty tree: SHA-256 of the empty string.
var EmptyRoot = sha256.Sum256(nil)

// HashReader returns the stored hashes of perfect subtree roots ("nodes"),
// one per id, in order. A node that is not stored yields an error wrapping
// ErrNotFound. The Merkle code computes; the store stores; neither knows
// about the other.
type HashReader interface {
	ReadHashes(ctx context.Context, ids []compact.NodeID) ([][]byte, error)
}

// InclusionProof builds the RFC 6962 inclusion proof of leaf index in the tree
// of the given size from stored nodes. REQUIRES: index < size.
func InclusionProof(ctx context.Context, r HashReader, index, size uint64) ([][]byte, error) {
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("inclusion proof: %w", err)
	}
	return buildProof(ctx, r, nodes)
}

// ConsistencyProof builds the RFC 6962 consistency proof between sizes
// size1 <= size2. From the empty tree (size1 = 0) it is the empty proof.
func ConsistencyProof(ctx context.Context, r HashReader, size1, size2 uint64) ([][]byte, error) {
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, fmt.Errorf("consistency proof: %w", err)
	}
	return buildProof(ctx, r, nodes)
}

func buildProof(ctx context.Context, r HashReader, nodes proof.Nodes) ([][]byte, error) {
	if len(nodes.IDs) == 0 {
		return [][]byte{}, nil
	}
	hashes, err := r.ReadHashes(ctx, nodes.IDs)
	if err != nil {
		return nil, err
	}
	return nodes.Rehash(hashes, HashChildren)
}

// RangeHashes returns the hashes of the compact range [begin, end): the
// roots of its perfect subtrees, left to right (compact.RangeNodes), read
// from stored nodes. Empty when begin == end.
func RangeHashes(ctx context.Context, r HashReader, begin, end uint64) ([][]byte, error) {
	if begin > end {
		return nil, fmt.Errorf("range [%d, %d): begin after end", begin, end)
	}
	if begin == end {
		return [][]byte{}, nil
	}
	return r.ReadHashes(ctx, compact.RangeNodes(begin, end, nil))
}

// RootAt computes the root of the first size leaves from stored nodes.
func RootAt(ctx context.Context, r HashReader, size uint64) ([32]byte, error) {
	if size == 0 {
		return EmptyRoot, nil
	}
	ids := compact.RangeNodes(0, size, nil)
	hashes, err := r.ReadHashes(ctx, ids)
	if err != nil {
		return [32]byte{}, err
	}
	rng, err := RangeFactory.NewRange(0, size, hashes)
	if err != nil {
		return [32]byte{}, fmt.Errorf("root at %d: %w", size, err)
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		return [32]byte{}, fmt.Errorf("root at %d: %w", size, err)
	}
	return [32]byte(root), nil
}

// NodeID names a node of the tree by its level and index
// (transparency-dev/merkle's compact.NodeID): the store addresses the
// hashes it keeps by it. Range is a compact range of the tree, which the
// store folds each batch's leaves into (RangeFactory makes one). events
// computes the tree; the store stores it and imports no Merkle library
// (internal/lint).
type (
	NodeID = compact.NodeID
	Range  = compact.Range
)

// VerifyConsistency checks an RFC 6962 consistency proof from the tree of
// size1 with root1 to the tree of size2 with root2.
func VerifyConsistency(size1, size2 uint64, hashes [][]byte, root1, root2 []byte) error {
	return proof.VerifyConsistency(Hasher, size1, size2, hashes, root1, root2)
}
