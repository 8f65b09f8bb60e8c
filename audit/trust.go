package audit

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/witness"
)

// Trusting a checkpoint without trusting the node: what `greffe verify
// --witness-quorum` and the verified client (client/verified) both
// require of a checkpoint before they believe a proof against it, and how
// the auditor's memory (State) moves forward. One verifier, two callers.

// KindCheckpointNotWitnessed: the checkpoint carries fewer valid
// cosignatures than the witness quorum asks for, by the witness keys given
// (--witness, --witness-quorum). Stable, like every fault kind.
const KindCheckpointNotWitnessed = "checkpoint_not_witnessed"

// CheckpointPolicy is what a checkpoint must carry to be trusted: a
// signature by one of the log's keys, and none of theirs altered (as every
// checkpoint check of this package), and, when Quorum > 0, cosignatures
// (C2SP tlog-cosignature, cosignature/v1) by at least Quorum distinct keys
// of Witnesses, none of theirs altered. Signatures by other keys are
// ignored.
type CheckpointPolicy struct {
	// Origin is the ledger's checkpoint origin.
	Origin string
	// Verifiers are the log's note verifier keys, named Origin.
	Verifiers []note.Verifier
	// Witnesses are cosignature/v1 verifiers (ParseWitnessKeys).
	Witnesses []note.Verifier
	// Quorum is how many of Witnesses must have cosigned; 0 asks for none.
	Quorum int
}

// ParseWitnessKeys reads witnesses' cosignature/v1 verifier keys (type
// 0x04 or 0x06; witness.ParseCosignatureVerifier says why a type 0x01 key
// is refused).
func ParseWitnessKeys(keys []string) ([]note.Verifier, error) {
	out := make([]note.Verifier, 0, len(keys))
	seen := map[string]bool{}
	for _, k := range keys {
		v, err := witness.ParseCosignatureVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		id := fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
		if seen[id] {
			return nil, fmt.Errorf("%w: witness key %s is given twice", ErrConfig, id)
		}
		seen[id] = true
		out = append(out, v)
	}
	return out, nil
}

// Validate refuses a policy that no checkpoint can meet.
func (p CheckpointPolicy) Validate() error {
	var errs []error
	if len(p.Verifiers) == 0 {
		errs = append(errs, errors.New("no checkpoint verifier key"))
	} else if err := CheckVerifiers(p.Verifiers, p.Origin); err != nil {
		errs = append(errs, err)
	}
	if p.Quorum < 0 || p.Quorum > len(p.Witnesses) {
		errs = append(errs, fmt.Errorf("a witness quorum of %d with %d witness key(s): give at least as many --witness keys as the quorum", p.Quorum, len(p.Witnesses)))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// Open checks raw against the policy and returns the checkpoint. A
// checkpoint that does not meet it is a *ProofError: KindCheckpointMalformed,
// KindCheckpointSignature (no signature by a log key, or an altered
// signature by a log or witness key) or KindCheckpointNotWitnessed, whose
// detail names the checkpoint.
func (p CheckpointPolicy) Open(raw []byte) (events.Checkpoint, error) {
	oc := OpenCheckpoint(raw, p.Origin, p.Verifiers)
	if oc.Kind != "" {
		what := "the checkpoint"
		if oc.Parsed {
			what = fmt.Sprintf("the checkpoint of size %d", oc.Size)
		}
		return events.Checkpoint{}, &ProofError{Kind: oc.Kind, Detail: what + ": " + oc.Detail}
	}
	cp := events.Checkpoint{Origin: p.Origin, Size: oc.Size, Root: oc.Root, Note: raw}
	if err := p.CheckWitnessed(raw, oc.Size); err != nil {
		return cp, err
	}
	return cp, nil
}

// CheckWitnessed checks that at least Quorum of Witnesses cosigned raw, a
// checkpoint of size, and that none of their cosignatures is altered;
// nothing when Quorum is 0. A checkpoint that falls short is a
// *ProofError: KindCheckpointNotWitnessed, KindCheckpointSignature (an
// altered cosignature) or KindCheckpointMalformed.
func (p CheckpointPolicy) CheckWitnessed(raw []byte, size uint64) error {
	if p.Quorum == 0 {
		return nil
	}
	ws, quorum := p.Witnesses, p.Quorum
	n, err := note.Open(raw, note.VerifierList(ws...))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	valid := 0
	switch {
	case err == nil:
		valid = len(n.Sigs)
	case errors.As(err, &unverified):
	case errors.As(err, &invalid):
		return &ProofError{Kind: KindCheckpointSignature, Detail: fmt.Sprintf("the checkpoint of size %d: the cosignature by witness %s+%08x does not verify (altered)", size, invalid.Name, invalid.Hash)}
	default:
		return &ProofError{Kind: KindCheckpointMalformed, Detail: fmt.Sprintf("the checkpoint of size %d: %v", size, err)}
	}
	if valid < quorum {
		names := make([]string, len(ws))
		for i, w := range ws {
			names[i] = w.Name()
		}
		return &ProofError{Kind: KindCheckpointNotWitnessed, Detail: fmt.Sprintf("the checkpoint of size %d carries %d valid cosignature(s) by the witness keys given (%s), %d required",
			size, valid, strings.Join(names, ", "), quorum)}
	}
	return nil
}

// Advance moves the auditor's memory st (nil: nothing trusted yet) to cp,
// a checkpoint the policy opened, given proof, the consistency proof from
// st.Size to cp.Size. It returns the state remembering cp, st itself when
// cp is the checkpoint st remembers, or a *ProofError: KindRollback when cp
// is older than st, KindFork when the proof does not take st's root to
// cp's. The returned state keeps no tile nodes (they are the offline and
// online verifications' aid to locate a fork; a later `greffe verify` with
// the same file locates it to the remembered range instead).
func Advance(st *State, cp events.Checkpoint, proof [][]byte, source string) (*State, error) {
	next := &State{Origin: cp.Origin, Source: source, Size: cp.Size, Root: append([]byte(nil), cp.Root[:]...), Checkpoint: string(cp.Note), VerifiedAt: time.Now().UTC()}
	if st == nil {
		return next, nil
	}
	if st.Origin != cp.Origin {
		return nil, fmt.Errorf("%w: the state remembers ledger %q, the checkpoint is of %q", ErrConfig, st.Origin, cp.Origin)
	}
	if cp.Size < st.Size {
		return nil, &ProofError{Kind: KindRollback, Detail: fmt.Sprintf("the node answers with the checkpoint of size %d, below the %d already verified (%s): history was truncated or rolled back", cp.Size, st.Size, st.Source)}
	}
	if cp.Size == st.Size && bytes.Equal(cp.Root[:], st.Root) {
		return st, nil
	}
	if err := VerifyConsistencyProof(st.Size, cp.Size, proof, st.Root, cp.Root[:]); err != nil {
		return nil, &ProofError{Kind: KindFork, Detail: fmt.Sprintf("the checkpoint of size %d is not consistent with the one of size %d already verified (%v): history was rewritten or forked", cp.Size, st.Size, err)}
	}
	return next, nil
}

// WriteState replaces the state file path with s atomically (a temporary
// file, fsynced, renamed), the file `greffe verify --state` reads.
func WriteState(path string, s *State) error { return writeState(path, s) }

// WriteEvidence keeps ev next to the state file path, as
// path.evidence/consistency-<from>-<to>.json, and returns its name.
func WriteEvidence(path string, ev *Evidence) (string, error) { return writeEvidence(path, ev) }
