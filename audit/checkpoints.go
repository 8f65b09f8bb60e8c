package audit

import (
	"bytes"
	"context"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
)

// storedCheckpoint is a checkpoint note as stored under its size (or served).
type storedCheckpoint struct {
	key  uint64 // the size it is stored (or requested) under
	note []byte
}

// checkCheckpoints checks each checkpoint, in size order, against the
// recomputed tree of logSize positions: signature, origin, size, root, and
// the consistency proof from the previous verified one. It returns how many
// were checked and the largest one whose signature and root verified.
func checkCheckpoints(ctx context.Context, t *tree, logSize uint64, cps []storedCheckpoint, origin string, vs []note.Verifier, fs *faults) (int, *openedCheckpoint, error) {
	var (
		latest   *openedCheckpoint
		prev     *openedCheckpoint // previous signed checkpoint, for consistency
		lastGood uint64            // largest size whose signed root matched
	)
	for _, sc := range cps {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		oc := openCheckpoint(sc.note, origin, vs)
		size := sc.key
		if !oc.parsed {
			fs.add(Fault{Kind: oc.kind, Position: clampPos(size, logSize), Checkpoint: u64p(size), Detail: oc.detail})
			continue
		}
		if oc.size != sc.key {
			fs.add(Fault{Kind: KindCheckpointMalformed, Position: clampPos(size, logSize), Checkpoint: u64p(size),
				Detail: fmt.Sprintf("stored under size %d but commits to %d events", sc.key, oc.size)})
			continue
		}
		if oc.kind != "" {
			fs.add(Fault{Kind: oc.kind, Position: clampPos(size, logSize), Checkpoint: u64p(size), Detail: oc.detail})
		}
		if size > logSize {
			fs.add(Fault{Kind: KindCheckpointBeyondLog, Position: int64(logSize), End: int64(size), Checkpoint: u64p(size),
				Detail: fmt.Sprintf("the checkpoint commits to %d events, the log holds %d: the log was truncated", size, logSize)})
			continue
		}
		rootOK := t.root(size) == oc.root
		if !rootOK {
			fs.add(Fault{Kind: KindCheckpointRoot, Position: int64(lastGood), End: int64(max(size, lastGood+1)), Approximate: true, Checkpoint: u64p(size),
				Detail: fmt.Sprintf("the signed root of size %d differs from the root recomputed from the events; they differ after position %d (the last checkpoint that matched)", size, lastGood)})
		}
		if !oc.signed {
			continue
		}
		if prev != nil {
			if err := verifyConsistency(ctx, t, prev.size, size, prev.root, oc.root); err != nil {
				fs.add(Fault{Kind: KindCheckpointInconsistent, Position: int64(prev.size), End: int64(max(size, prev.size+1)), Approximate: true, Checkpoint: u64p(size),
					Detail: fmt.Sprintf("no consistency between the signed checkpoints of sizes %d and %d: %v", prev.size, size, err)})
			}
		}
		cp := oc
		prev = &cp
		if rootOK {
			lastGood = size
			latest = &cp
		}
	}
	return len(cps), latest, nil
}

// clampPos blames a checkpoint fault on the checkpoint's size, or the log's
// end when the checkpoint claims more.
func clampPos(size, logSize uint64) int64 { return int64(min(size, logSize)) }

// verifyConsistency builds the consistency proof between size1 and size2
// from the recomputed tree and checks it against the given roots with
// transparency-dev/merkle. From the empty tree the proof is empty and root1
// must be SHA-256 of the empty string.
func verifyConsistency(ctx context.Context, t *tree, size1, size2 uint64, root1, root2 [32]byte) error {
	p, err := events.ConsistencyProof(ctx, t, size1, size2)
	if err != nil {
		return err
	}
	return VerifyConsistencyProof(size1, size2, p, root1[:], root2[:])
}

// compareRange compares a compact range [0, size) with the tree's and
// returns the coverage of the first node that differs.
func compareRange(t *tree, size uint64, hashes [][]byte) (lo, hi uint64, differs bool) {
	ids := compact.RangeNodes(0, size, nil)
	if len(ids) != len(hashes) {
		return 0, size, true
	}
	for i, id := range ids {
		if !bytes.Equal(t.node(id.Level, id.Index), hashes[i]) {
			lo, hi := id.Coverage()
			return lo, hi, true
		}
	}
	return 0, 0, false
}
