package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
