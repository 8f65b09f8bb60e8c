package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/greffe/greffe/audit"
)

// Prover gives the consistency proof between two sizes of the log being
// verified: the server's proof API online, the recomputed tree offline
// (*Replayed).
type Prover interface {
	// ConsistencyProof returns the RFC 6962 proof from size from to size
	// to. An error marked Refused is the source's answer (evidence about
	// it); any other means the proof could not be asked for at all.
	ConsistencyProof(ctx context.Context, from, to uint64) ([][]byte, error)
}

// Refused marks err as the source's answer refusing what was asked (a
// node's HTTP error): evidence about the source, not a failure to reach
// it. Its text is err's.
func Refused(err error) error { return refusal{err} }

type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// CheckState runs the --state check (Config.StateFile) after a
// verification: r is the replayed log, latest the largest checkpoint that
// verified (nil when none), ps where the consistency proof from the
// remembered checkpoint comes from. The state file is updated only when
// no fault at all was found.
func (run *Run) CheckState(ctx context.Context, r *Replayed, latest *audit.OpenedCheckpoint, origin string, ps Prover) (*audit.StateOutcome, error) {
	path, source, t, fs := run.cfg.StateFile, run.report.Source, r.tree, run.faults
	old, err := audit.ReadState(path)
	if err != nil {
		return nil, err
	}
	if old != nil && old.Origin != origin {
		return nil, fmt.Errorf("%w: state file %s remembers ledger %q, this ledger is %q", audit.ErrConfig, path, old.Origin, origin)
	}
	out := &audit.StateOutcome{Consistent: old == nil}
	if old != nil {
		out.Previous = u64p(old.Size)
	}
	if latest == nil {
		return out, nil
	}
	out.Current = latest.Size
	if old != nil {
		ev := audit.Evidence{Origin: origin, From: old.Size, To: latest.Size, OldCheckpoint: old.Checkpoint, NewCheckpoint: string(latest.Note), CheckedAt: time.Now().UTC()}
		cerr, fatal := consistentWith(ctx, old, latest, ps, &ev)
		if fatal != nil {
			return nil, fatal
		}
		out.Proof = ev.Proof
		out.Consistent = cerr == nil
		if cerr != nil {
			ev.Error = cerr.Error()
			var rb *rollbackError
			if errors.As(cerr, &rb) {
				fs.add(audit.Fault{Kind: audit.KindRollback, Position: int64(latest.Size), End: int64(old.Size), Checkpoint: u64p(old.Size),
					Detail: fmt.Sprintf("the log's newest checkpoint commits to %d events, fewer than the %d remembered: history was truncated", latest.Size, old.Size)})
			} else {
				lo, hi := locateFork(old, t)
				fs.add(audit.Fault{Kind: audit.KindFork, Position: int64(lo), End: int64(hi), Approximate: hi > lo+1, Checkpoint: u64p(old.Size),
					Detail: fmt.Sprintf("the remembered checkpoint of size %d is not consistent with the new checkpoint of size %d (%v): history was rewritten or forked; the first differing events are in [%d, %d)", old.Size, latest.Size, cerr, lo, hi)})
			}
		}
		ev.Consistent = out.Consistent
		p, err := audit.WriteEvidence(path, &ev)
		if err != nil {
			return nil, err
		}
		out.Evidence = p
	}
	if out.Consistent && fs.total() == 0 {
		if err := audit.WriteState(path, newState(origin, source, latest, t)); err != nil {
			return nil, err
		}
		out.Updated = true
	}
	return out, nil
}

type rollbackError struct{ from, to uint64 }

func (e *rollbackError) Error() string {
	return fmt.Sprintf("size %d is below the remembered %d", e.to, e.from)
}

// consistentWith demands the consistency proof from the remembered
// checkpoint to latest and checks it against both signed roots. It returns
// why they are not consistent, or fatal when the proof could not be asked
// for at all (the node is unreachable: nothing was learnt).
func consistentWith(ctx context.Context, old *audit.State, latest *audit.OpenedCheckpoint, ps Prover, ev *audit.Evidence) (inconsistent, fatal error) {
	if latest.Size < old.Size {
		return &rollbackError{from: old.Size, to: latest.Size}, nil
	}
	// From the empty tree the proof is empty (audit.VerifyConsistencyProof
	// checks that the remembered root is SHA-256 of the empty string).
	if old.Size == 0 {
		ev.Proof = [][]byte{}
		return audit.VerifyConsistencyProof(0, latest.Size, nil, old.Root, latest.Root[:]), nil
	}
	p, err := ps.ConsistencyProof(ctx, old.Size, latest.Size)
	if err != nil {
		if !errors.As(err, new(refusal)) {
			return nil, fmt.Errorf("consistency proof from %d to %d: %w", old.Size, latest.Size, err)
		}
		return fmt.Errorf("the node refused the consistency proof: %w", err), nil
	}
	ev.Proof = p
	return audit.VerifyConsistencyProof(old.Size, latest.Size, p, old.Root, latest.Root[:]), nil
}

// locateFork finds the first tile (or, in the remembered partial tile, the
// first leaf) where the recomputed tree differs from the remembered one.
func locateFork(old *audit.State, t *tree) (lo, hi uint64) {
	tiles := uint64(len(old.TileNodes) / 32)
	for i := uint64(0); i < tiles; i++ {
		if !bytes.Equal(t.node(8, i), old.TileNodes[32*i:32*i+32]) {
			return i * 256, (i + 1) * 256
		}
	}
	base := tiles * 256
	for i := uint64(0); i < uint64(len(old.EdgeLeaves)/32); i++ {
		if !bytes.Equal(t.node(0, base+i), old.EdgeLeaves[32*i:32*i+32]) {
			return base + i, base + i + 1
		}
	}
	return 0, max(old.Size, 1)
}

func newState(origin, source string, cp *audit.OpenedCheckpoint, t *tree) *audit.State {
	full := cp.Size / 256
	s := &audit.State{Origin: origin, Source: source, Size: cp.Size, Root: append([]byte(nil), cp.Root[:]...),
		Checkpoint: string(cp.Note), VerifiedAt: time.Now().UTC()}
	if full > 0 {
		s.TileNodes = append([]byte(nil), t.levels[8][:32*full]...)
	}
	s.EdgeLeaves = append([]byte{}, t.levels[0][32*full*256:32*cp.Size]...)
	return s
}
