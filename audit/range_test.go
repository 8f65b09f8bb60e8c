package audit_test

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/events"
)

// rangeHashes returns the compact range [begin, end) of leaves, built leaf
// by leaf.
func rangeHashes(t *testing.T, leaves [][]byte, begin, end uint64) [][]byte {
	t.Helper()
	r := events.RangeFactory.NewEmptyRange(begin)
	for _, l := range leaves[begin:end] {
		if err := r.Append(l, nil); err != nil {
			t.Fatal(err)
		}
	}
	return r.Hashes()
}

// TestVerifyRangeProof: for every non-empty range of every tree up to 33
// leaves, the compact ranges on either side prove the range's leaves
// against the root of RFC 6962's recursive definition (rfc6962Root, not
// compact ranges); a flipped hash of either side, a wrong leaf, the
// range moved by one or a hash dropped does not.
func TestVerifyRangeProof(t *testing.T) {
	const maxSize = 33
	leaves := make([][]byte, maxSize)
	for i := range leaves {
		h := events.LeafHash(fmt.Appendf(nil, "entry %d", i))
		leaves[i] = h[:]
	}
	flip := func(hs [][]byte, i int) [][]byte {
		out := make([][]byte, len(hs))
		copy(out, hs)
		b := append([]byte(nil), out[i]...)
		b[0] ^= 1
		out[i] = b
		return out
	}
	checked := 0
	for size := uint64(1); size <= maxSize; size++ {
		root := rfc6962Root(leaves[:size])
		for begin := uint64(0); begin < size; begin++ {
			for end := begin + 1; end <= size; end++ {
				left, right := rangeHashes(t, leaves, 0, begin), rangeHashes(t, leaves, end, size)
				in := leaves[begin:end]
				if err := audit.VerifyRangeProof(begin, end, size, in, left, right, root); err != nil {
					t.Fatalf("[%d, %d) of %d: %v", begin, end, size, err)
				}
				bad := map[string]error{}
				if len(left) > 0 {
					bad["left hash flipped"] = audit.VerifyRangeProof(begin, end, size, in, flip(left, len(left)-1), right, root)
					bad["left hash dropped"] = audit.VerifyRangeProof(begin, end, size, in, left[1:], right, root)
				}
				if len(right) > 0 {
					bad["right hash flipped"] = audit.VerifyRangeProof(begin, end, size, in, left, flip(right, 0), root)
					bad["right hash dropped"] = audit.VerifyRangeProof(begin, end, size, in, left, right[:len(right)-1], root)
				}
				bad["leaf flipped"] = audit.VerifyRangeProof(begin, end, size, flip(in, len(in)/2), left, right, root)
				if end < size {
					bad["range moved right"] = audit.VerifyRangeProof(begin+1, end+1, size, in, left, right, root)
				}
				bad["a leaf short"] = audit.VerifyRangeProof(begin, end, size, in[:len(in)-1], left, right, root)
				bad["beyond the tree"] = audit.VerifyRangeProof(begin, size+1, size, leaves[begin:min(size+1, maxSize)], left, nil, root)
				for what, err := range bad {
					if err == nil {
						t.Fatalf("[%d, %d) of %d, %s: verified", begin, end, size, what)
					}
				}
				checked++
			}
		}
	}
	if checked != maxSize*(maxSize+1)*(maxSize+2)/6 {
		t.Fatalf("checked %d ranges", checked)
	}
}

// rfc6962Root is the Merkle tree hash of RFC 6962 section 2.1, by its
// recursive definition: the split is the largest power of two below n.
func rfc6962Root(leaves [][]byte) []byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := rfc6962Root(leaves[:k]), rfc6962Root(leaves[k:])
	h := sha256.Sum256(append(append([]byte{1}, l...), r...))
	return h[:]
}
