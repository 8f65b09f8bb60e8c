package verify

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/events"
)

// CheckCheckpoints checks each checkpoint, in size order, against the
// tree recomputed by r (of r.Size() positions): signature, origin, size,
// root, and the consistency proof from the previous verified one. It
// returns how many were checked and the largest one whose signature and
// root verified.
func (run *Run) CheckCheckpoints(ctx context.Context, r *Replayed, cps []StoredCheckpoint, origin string, vs []note.Verifier) (int, *audit.OpenedCheckpoint, error) {
	t, logSize, fs := r.tree, r.Size(), run.faults
	var (
		latest   *audit.OpenedCheckpoint
		prev     *audit.OpenedCheckpoint // previous signed checkpoint, for consistency
		lastGood uint64                  // largest size whose signed root matched
	)
	for _, sc := range cps {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		oc := audit.OpenCheckpoint(sc.Note, origin, vs)
		size := sc.Size
		if !oc.Parsed {
			fs.add(audit.Fault{Kind: oc.Kind, Position: clampPos(size, logSize), Checkpoint: u64p(size), Detail: oc.Detail})
			continue
		}
		if oc.Size != sc.Size {
			fs.add(audit.Fault{Kind: audit.KindCheckpointMalformed, Position: clampPos(size, logSize), Checkpoint: u64p(size),
				Detail: fmt.Sprintf("stored under size %d but commits to %d events", sc.Size, oc.Size)})
			continue
		}
		if oc.Kind != "" {
			fs.add(audit.Fault{Kind: oc.Kind, Position: clampPos(size, logSize), Checkpoint: u64p(size), Detail: oc.Detail})
		}
		if size > logSize {
			fs.add(audit.Fault{Kind: audit.KindCheckpointBeyondLog, Position: int64(logSize), End: int64(size), Checkpoint: u64p(size),
				Detail: fmt.Sprintf("the checkpoint commits to %d events, the log holds %d: the log was truncated", size, logSize)})
			continue
		}
		rootOK := t.root(size) == oc.Root
		if !rootOK {
			fs.add(audit.Fault{Kind: audit.KindCheckpointRoot, Position: int64(lastGood), End: int64(max(size, lastGood+1)), Approximate: true, Checkpoint: u64p(size),
				Detail: fmt.Sprintf("the signed root of size %d differs from the root recomputed from the events; they differ after position %d (the last checkpoint that matched)", size, lastGood)})
		}
		if !oc.Signed {
			continue
		}
		if prev != nil {
			if err := verifyConsistency(ctx, t, prev.Size, size, prev.Root, oc.Root); err != nil {
				fs.add(audit.Fault{Kind: audit.KindCheckpointInconsistent, Position: int64(prev.Size), End: int64(max(size, prev.Size+1)), Approximate: true, Checkpoint: u64p(size),
					Detail: fmt.Sprintf("no consistency between the signed checkpoints of sizes %d and %d: %v", prev.Size, size, err)})
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

// CheckWitnessed adds a fault when the policy asks for cosignatures that
// raw, the checkpoint of size, does not carry (audit.CheckpointPolicy's
// CheckWitnessed), blamed on size or the end of the r's log.
func (run *Run) CheckWitnessed(p audit.CheckpointPolicy, raw []byte, size uint64, r *Replayed) {
	var pe *audit.ProofError
	if err := p.CheckWitnessed(raw, size); errors.As(err, &pe) {
		run.faults.add(audit.Fault{Kind: pe.Kind, Position: clampPos(size, r.Size()), Checkpoint: u64p(size), Detail: pe.Detail})
	}
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
	return audit.VerifyConsistencyProof(size1, size2, p, root1[:], root2[:])
}
