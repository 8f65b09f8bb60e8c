package audit

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"

	"github.com/greffe/greffe/events"
)

// Checking proofs: RFC 6962 inclusion, consistency and range proofs
// against signed roots, with transparency-dev/merkle. Asking a node for
// one is the online source's (audit/online: ProveInclusion,
// ProveConsistency).

// ProofError says why a proof fetched from a node does not verify. It is a
// finding about the node (exit code 1), not a failure to run.
type ProofError struct {
	// Kind is KindProofInvalid, or KindCheckpointSignature /
	// KindCheckpointMalformed when the checkpoint itself does not verify.
	Kind   string
	Detail string
}

func (e *ProofError) Error() string { return e.Kind + ": " + e.Detail }

// CodedError describes the finding as any coded error: the fault kind is
// its code, and its kind is corrupt (what the node served does not verify).
func (e *ProofError) CodedError() *events.Error {
	return &events.Error{Code: e.Kind, Kind: events.KindCorrupt, Message: e.Detail, Err: e}
}

// VerifyConsistencyProof checks an RFC 6962 consistency proof between two
// signed roots with transparency-dev/merkle, handling the empty tree
// explicitly: from size 0 the proof must be empty and root1 must be SHA-256
// of the empty string (proof.VerifyConsistency accepts any root1 then).
func VerifyConsistencyProof(size1, size2 uint64, hashes [][]byte, root1, root2 []byte) error {
	if size1 == 0 {
		if !bytes.Equal(root1, events.EmptyRoot[:]) {
			return errors.New("the root of the empty tree must be SHA-256 of the empty string")
		}
		if len(hashes) != 0 {
			return fmt.Errorf("a consistency proof from the empty tree is empty, got %d hashes", len(hashes))
		}
		return nil
	}
	if err := proof.VerifyConsistency(events.Hasher, size1, size2, hashes, root1, root2); err != nil {
		return fmt.Errorf("the consistency proof from %d to %d does not verify: %w", size1, size2, conciseProofError(err))
	}
	return nil
}

// VerifyInclusionProof checks an RFC 6962 inclusion proof of leafHash at
// index in the tree of size whose root is root, with transparency-dev/merkle.
func VerifyInclusionProof(index, size uint64, leafHash []byte, hashes [][]byte, root []byte) error {
	if err := proof.VerifyInclusion(events.Hasher, index, size, leafHash, hashes, root); err != nil {
		return fmt.Errorf("the inclusion proof of position %d at size %d does not verify: %w", index, size, conciseProofError(err))
	}
	return nil
}

// VerifyRangeProof checks that leafHashes are the leaves [begin, end) of
// the tree of size whose root is root, given left, the compact range [0,
// begin), and right, the compact range [end, size) (wire.RangeProof):
// the leaves appended to left's range, then right's range merged, must
// reach root. A range of the wrong shape (hashes that do not match the
// decomposition of their range) fails as well as a wrong hash.
func VerifyRangeProof(begin, end, size uint64, leafHashes, left, right [][]byte, root []byte) error {
	if begin >= end || end > size {
		return fmt.Errorf("the range proof covers [%d, %d), which is not a non-empty range within the tree of size %d", begin, end, size)
	}
	if uint64(len(leafHashes)) != end-begin {
		return fmt.Errorf("the range proof covers %d leaves, [%d, %d), and %d were given", end-begin, begin, end, len(leafHashes))
	}
	rng, err := events.RangeFactory.NewRange(0, begin, left)
	if err != nil {
		return fmt.Errorf("the range proof's left part, [0, %d): %w", begin, err)
	}
	for _, h := range leafHashes {
		if err := rng.Append(h, nil); err != nil {
			return fmt.Errorf("the range proof's leaves: %w", err)
		}
	}
	rightRange, err := events.RangeFactory.NewRange(end, size, right)
	if err != nil {
		return fmt.Errorf("the range proof's right part, [%d, %d): %w", end, size, err)
	}
	if err := rng.AppendRange(rightRange, nil); err != nil {
		return fmt.Errorf("the range proof's right part, [%d, %d): %w", end, size, err)
	}
	got, err := rng.GetRootHash(nil)
	if err != nil {
		return fmt.Errorf("the range proof's root: %w", err)
	}
	if !bytes.Equal(got, root) {
		return fmt.Errorf("the range proof of [%d, %d) at size %d does not verify: it leads to root %x, not %x", begin, end, size, got, root)
	}
	return nil
}

// rootMismatch restates proof.RootMismatchError on one line, in hex (its
// own message prints byte slices over several lines).
type rootMismatch struct{ proof.RootMismatchError }

func (e rootMismatch) Error() string {
	return fmt.Sprintf("the proof leads to root %x, not %x", e.CalculatedRoot, e.ExpectedRoot)
}

func (e rootMismatch) Unwrap() error { return e.RootMismatchError }

func conciseProofError(err error) error {
	var rm proof.RootMismatchError
	if errors.As(err, &rm) {
		return rootMismatch{rm}
	}
	return err
}
