package events

import (
	"errors"
	"fmt"
	"strings"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// OriginPrefix starts every greffe checkpoint origin: "greffe/<ledger-id>".
const OriginPrefix = "greffe/"

// Origin returns the C2SP checkpoint origin of a ledger.
func Origin(ledgerID string) string { return OriginPrefix + ledgerID }

// Checkpoint is a signed C2SP tlog-checkpoint note committing to the first
// Size events of the log.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   [32]byte
	// Note is the signed note, exactly as served.
	Note []byte
}

// SignCheckpoint signs the checkpoint body (origin, size, base64 root) with
// every signer. Several signers are allowed (C2SP): during a key rotation a
// checkpoint carries both the old and the new key's signature. All signers
// must be named origin, so that standard clients find the log's signature.
func SignCheckpoint(origin string, size uint64, root [32]byte, signers ...note.Signer) (Checkpoint, error) {
	if len(signers) == 0 {
		return Checkpoint{}, errors.New("sign checkpoint: no signer")
	}
	for _, s := range signers {
		if s.Name() != origin {
			return Checkpoint{}, fmt.Errorf("sign checkpoint: signer %q is not named after origin %q", s.Name(), origin)
		}
	}
	body := log.Checkpoint{Origin: origin, Size: size, Hash: root[:]}.Marshal()
	signed, err := note.Sign(&note.Note{Text: string(body)}, signers...)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("sign checkpoint: %w", err)
	}
	return Checkpoint{Origin: origin, Size: size, Root: root, Note: signed}, nil
}

// CheckpointError says why a checkpoint does not verify.
type CheckpointError struct{ Reason string }

func (e *CheckpointError) Error() string { return "checkpoint: " + e.Reason }

// OpenCheckpoint verifies a signed checkpoint note: at least one signature by
// a key of verifiers (all named origin) must verify, the body must parse and
// its origin must be origin. Signatures by unknown keys are ignored (a
// witness may cosign); a signature by a known key that does not verify is an
// error. It returns the checkpoint and the names+hashes of verified keys.
func OpenCheckpoint(b []byte, origin string, verifiers ...note.Verifier) (Checkpoint, []note.Signature, error) {
	if len(verifiers) == 0 {
		return Checkpoint{}, nil, &CheckpointError{"no verifier key configured"}
	}
	n, err := note.Open(b, note.VerifierList(verifiers...))
	if err != nil {
		var unk *note.UnverifiedNoteError
		if errors.As(err, &unk) {
			return Checkpoint{}, nil, &CheckpointError{"no signature by a known key"}
		}
		return Checkpoint{}, nil, &CheckpointError{fmt.Sprintf("signature does not verify: %v", err)}
	}
	var cp log.Checkpoint
	rest, err := cp.Unmarshal([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, nil, &CheckpointError{fmt.Sprintf("body: %v", err)}
	}
	if cp.Origin != origin {
		return Checkpoint{}, nil, &CheckpointError{fmt.Sprintf("origin %q, want %q", cp.Origin, origin)}
	}
	if len(cp.Hash) != 32 {
		return Checkpoint{}, nil, &CheckpointError{fmt.Sprintf("root hash of %d bytes", len(cp.Hash))}
	}
	if len(rest) > 0 && !strings.HasSuffix(string(rest), "\n") {
		return Checkpoint{}, nil, &CheckpointError{"extension lines not newline-terminated"}
	}
	return Checkpoint{Origin: cp.Origin, Size: cp.Size, Root: [32]byte(cp.Hash), Note: b}, n.Sigs, nil
}

// Signer signs checkpoints: a note signer (golang.org/x/mod/sumdb/note)
// named after the ledger's origin. The store holds them and signs with
// SignCheckpoint; events owns the vocabulary so that the store imports no
// signature library (internal/lint).
type Signer = note.Signer

// ParseStoredCheckpoint reads a checkpoint note that the log stored itself,
// without verifying its signatures (the store trusts its own writes; an
// auditor checks them against keys with OpenCheckpoint). A note or a body
// that does not parse is ErrCorrupt.
func ParseStoredCheckpoint(b []byte) (Checkpoint, error) {
	n, err := note.Open(b, note.VerifierList())
	var unverified *note.UnverifiedNoteError
	if errors.As(err, &unverified) {
		n, err = unverified.Note, nil
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	var c log.Checkpoint
	if _, err := c.Unmarshal([]byte(n.Text)); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint body: %v: %w", err, ErrCorrupt)
	}
	if len(c.Hash) != 32 {
		return Checkpoint{}, fmt.Errorf("checkpoint root of %d bytes: %w", len(c.Hash), ErrCorrupt)
	}
	return Checkpoint{Origin: c.Origin, Size: c.Size, Root: [32]byte(c.Hash), Note: append([]byte(nil), b...)}, nil
}
