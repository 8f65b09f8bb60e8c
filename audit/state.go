package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/atomicfile"
)

// State is the auditor's memory: the last checkpoint it verified. The next
// verification demands a consistency proof from it to the new checkpoint
// and checks it with transparency-dev/merkle, so a history rewritten or
// forked after it is caught even when the new tree is self-consistent and
// correctly signed.
//
// Besides the checkpoint it keeps the level-8 node of every full tile and
// the leaf hashes of the last, partial tile (32 bytes per 256 events): a
// fork is then located to within one tile, and exactly within the last.
type State struct {
	// Origin is the ledger's checkpoint origin; a state is never used for
	// another ledger.
	Origin string `json:"origin"`
	// Source is the data folder or server last verified.
	Source string `json:"source"`
	// Size and Root are those of Checkpoint.
	Size uint64 `json:"size"`
	Root []byte `json:"root"`
	// Checkpoint is the signed note, as verified.
	Checkpoint string `json:"checkpoint"`
	// TileNodes are the level-8 nodes of the full tiles below Size,
	// concatenated; EdgeLeaves the leaf hashes of positions
	// [256·(Size/256), Size).
	TileNodes  []byte `json:"tile_nodes"`
	EdgeLeaves []byte `json:"edge_leaves"`
	// VerifiedAt is when the checkpoint was verified.
	VerifiedAt time.Time `json:"verified_at"`
}

// StateOutcome says what a verification did with its state file.
type StateOutcome struct {
	// Previous is the remembered size (nil on the first run).
	Previous *uint64 `json:"previous_size,omitempty"`
	// Current is the size of the newly verified checkpoint (0 when the log
	// has none that verifies).
	Current uint64 `json:"current_size"`
	// Proof is the consistency proof from Previous to Current.
	Proof [][]byte `json:"proof,omitempty"`
	// Consistent is true when the proof verified (or on the first run).
	Consistent bool `json:"consistent"`
	// Evidence is the file keeping both checkpoints and the proof.
	Evidence string `json:"evidence,omitempty"`
	// Updated is true when the state file now remembers Current.
	Updated bool `json:"updated"`
}

// Evidence is what a state check keeps next to the state file: both
// checkpoints and the proof between them, enough to show a third party.
type Evidence struct {
	Origin        string    `json:"origin"`
	From          uint64    `json:"from"`
	To            uint64    `json:"to"`
	OldCheckpoint string    `json:"old_checkpoint"`
	NewCheckpoint string    `json:"new_checkpoint"`
	Proof         [][]byte  `json:"proof"`
	Consistent    bool      `json:"consistent"`
	Error         string    `json:"error,omitempty"`
	CheckedAt     time.Time `json:"checked_at"`
}

// proofSource gives the consistency proof between two sizes: the server's
// proof API online, the recomputed tree offline.
type proofSource interface {
	consistency(ctx context.Context, from, to uint64) ([][]byte, error)
}

// localProofs builds proofs from the recomputed tree.
type localProofs struct{ t *tree }

func (l localProofs) consistency(ctx context.Context, from, to uint64) ([][]byte, error) {
	return events.ConsistencyProof(ctx, l.t, from, to)
}

// ReadState reads a state file; a missing file is (nil, nil).
func ReadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: state file: %w", ErrConfig, err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: state file %s: %w", ErrConfig, path, err)
	}
	if len(s.Root) != 32 || len(s.TileNodes)%32 != 0 || len(s.EdgeLeaves)%32 != 0 {
		return nil, fmt.Errorf("%w: state file %s: malformed hashes", ErrConfig, path)
	}
	return &s, nil
}

// checkState runs the --state check after a verification: t is the
// recomputed tree, latest the largest checkpoint that verified (nil when
// none). The state is updated only when no fault at all was found.
func checkState(ctx context.Context, path, source, origin string, t *tree, latest *openedCheckpoint, fs *faults, ps proofSource) (*StateOutcome, error) {
	old, err := ReadState(path)
	if err != nil {
		return nil, err
	}
	if old != nil && old.Origin != origin {
		return nil, fmt.Errorf("%w: state file %s remembers ledger %q, this ledger is %q", ErrConfig, path, old.Origin, origin)
	}
	out := &StateOutcome{Consistent: old == nil}
	if old != nil {
		out.Previous = u64p(old.Size)
	}
	if latest == nil {
		return out, nil
	}
	out.Current = latest.size
	if old != nil {
		ev := Evidence{Origin: origin, From: old.Size, To: latest.size, OldCheckpoint: old.Checkpoint, NewCheckpoint: string(latest.note), CheckedAt: time.Now().UTC()}
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
				fs.add(Fault{Kind: KindRollback, Position: int64(latest.size), End: int64(old.Size), Checkpoint: u64p(old.Size),
					Detail: fmt.Sprintf("the log's newest checkpoint commits to %d events, fewer than the %d remembered: history was truncated", latest.size, old.Size)})
			} else {
				lo, hi := locateFork(old, t)
				fs.add(Fault{Kind: KindFork, Position: int64(lo), End: int64(hi), Approximate: hi > lo+1, Checkpoint: u64p(old.Size),
					Detail: fmt.Sprintf("the remembered checkpoint of size %d is not consistent with the new checkpoint of size %d (%v): history was rewritten or forked; the first differing events are in [%d, %d)", old.Size, latest.size, cerr, lo, hi)})
			}
		}
		ev.Consistent = out.Consistent
		p, err := writeEvidence(path, &ev)
		if err != nil {
			return nil, err
		}
		out.Evidence = p
	}
	if out.Consistent && fs.total() == 0 {
		if err := writeState(path, newState(origin, source, latest, t)); err != nil {
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
func consistentWith(ctx context.Context, old *State, latest *openedCheckpoint, ps proofSource, ev *Evidence) (inconsistent, fatal error) {
	if latest.size < old.Size {
		return &rollbackError{from: old.Size, to: latest.size}, nil
	}
	// From the empty tree the proof is empty (VerifyConsistencyProof
	// checks that the remembered root is SHA-256 of the empty string).
	if old.Size == 0 {
		ev.Proof = [][]byte{}
		return VerifyConsistencyProof(0, latest.size, nil, old.Root, latest.root[:]), nil
	}
	p, err := ps.consistency(ctx, old.Size, latest.size)
	if err != nil {
		if _, ok := answered(err); !ok {
			return nil, fmt.Errorf("consistency proof from %d to %d: %w", old.Size, latest.size, err)
		}
		return fmt.Errorf("the node refused the consistency proof: %w", err), nil
	}
	ev.Proof = p
	return VerifyConsistencyProof(old.Size, latest.size, p, old.Root, latest.root[:]), nil
}

// locateFork finds the first tile (or, in the remembered partial tile, the
// first leaf) where the recomputed tree differs from the remembered one.
func locateFork(old *State, t *tree) (lo, hi uint64) {
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

func newState(origin, source string, cp *openedCheckpoint, t *tree) *State {
	full := cp.size / 256
	s := &State{Origin: origin, Source: source, Size: cp.size, Root: append([]byte(nil), cp.root[:]...),
		Checkpoint: string(cp.note), VerifiedAt: time.Now().UTC()}
	if full > 0 {
		s.TileNodes = append([]byte(nil), t.levels[8][:32*full]...)
	}
	s.EdgeLeaves = append([]byte{}, t.levels[0][32*full*256:32*cp.size]...)
	return s
}

// writeState replaces the state file atomically (temporary file, fsync,
// rename, folder fsync), so that a crash leaves the old or the new state,
// never half.
func writeState(path string, s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'))
}

// writeEvidence stores ev as <state>.evidence/consistency-<from>-<to>.json.
func writeEvidence(statePath string, ev *Evidence) (string, error) {
	dir := statePath + ".evidence"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("evidence: %w", err)
	}
	b, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, fmt.Sprintf("consistency-%d-%d.json", ev.From, ev.To))
	if err := atomicfile.WriteFile(p, append(b, '\n')); err != nil {
		return "", err
	}
	return p, nil
}
