package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// Config configures a verification. Zero values mean defaults, which the
// verification fills in (audit/internal/verify.New); nothing can change
// while a verification runs.
type Config struct {
	// Verifiers are the note verifier keys checkpoints are checked with:
	// a checkpoint verifies when at least one of its signatures is by one of
	// them (during a key rotation, old checkpoints carry the old key and new
	// ones the new key), and no signature by one of them is altered. Each
	// must be named after the ledger's origin. Required when the log has
	// checkpoints; the CLI defaults to the node's published keys (online)
	// or <data>/keys (offline).
	Verifiers []note.Verifier
	// Witnesses and WitnessQuorum (online only) make a verification refuse
	// the node's checkpoint unless at least WitnessQuorum of Witnesses
	// (cosignature/v1 verifiers: ParseWitnessKeys) cosigned it, as a
	// checkpoint_not_witnessed fault; the node is asked for the newest
	// checkpoint that many of its witnesses cosigned. Default (0): no
	// cosignature is required.
	Witnesses     []note.Verifier
	WitnessQuorum int
	// Workers is the number of goroutines hashing events and verifying
	// signatures. Default (0 or negative): GOMAXPROCS.
	Workers int
	// MaxFaults bounds the faults kept in the report, lowest positions
	// first; FaultCount stays exact. Default (0 or negative): 100.
	MaxFaults int
	// Progress, when set, is called from time to time with the positions
	// replayed and the total expected (0 when unknown), on the verifying
	// goroutine: it must return quickly.
	Progress func(done, total uint64)
	// StateFile, when set, is the auditor's memory (see State): the last
	// verified checkpoint is read from it, a consistency proof from it to
	// the new checkpoint is demanded and checked, the evidence is kept in
	// StateFile + ".evidence/", and the file is updated when everything
	// verified.
	StateFile string
	// IndexSample (online only) is how many events have their event-id and
	// stream index entries looked up through the read API, spread over the
	// log (the first and last always). Default (0): 1024; negative: every
	// event (one or two requests per event).
	IndexSample int
	// ProofSample (online only) is how many inclusion proofs, and as many
	// consistency proofs, are fetched from the proof API and checked.
	// Default (0): 64; negative: none.
	ProofSample int
	// Concurrency (online only) is the number of requests in flight.
	// Default (0 or negative): 8.
	Concurrency int
}

// ErrConfig wraps every configuration problem: the verification could not
// run (exit code 2), which is not a fault of the ledger.
var ErrConfig = errors.New("audit: invalid configuration")

// CheckVerifiers refuses verifiers named after another origin: they can
// never verify this ledger's checkpoints, which would read as tampering.
// The error wraps ErrConfig.
func CheckVerifiers(vs []note.Verifier, origin string) error {
	var errs []error
	for _, v := range vs {
		if v.Name() != origin {
			errs = append(errs, fmt.Errorf("verifier %s+%08x is for %q, this ledger's origin is %q", v.Name(), v.KeyHash(), v.Name(), origin))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// ParseVerifiers parses note verifier keys ("<name>+<hash>+<key>").
func ParseVerifiers(keys []string) ([]note.Verifier, error) {
	out := make([]note.Verifier, 0, len(keys))
	for _, k := range keys {
		v, err := note.NewVerifier(strings.TrimSpace(k))
		if err != nil {
			return nil, fmt.Errorf("%w: verifier key %q: %w", ErrConfig, k, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// ReadVerifierFile reads verifier keys from a file, one per line; blank
// lines and lines starting with # are skipped.
func ReadVerifierFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: verifier file: %w", ErrConfig, err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out, sc.Err()
}

// OpenedCheckpoint is a checkpoint note checked against a verifier set
// (OpenCheckpoint).
type OpenedCheckpoint struct {
	// Size and Root are read from the body; valid when Parsed.
	Size uint64
	Root [32]byte
	// Note is the note as given (aliased, not copied).
	Note []byte
	// Signed: a configured key signed it and no configured key's signature
	// is altered.
	Signed bool
	// Kind and Detail say why it does not verify ("" when it does): a
	// fault kind (KindCheckpointSignature, KindCheckpointMalformed) and a
	// sentence.
	Kind, Detail string
	// Parsed: Size and Root were read from the body.
	Parsed bool
}

// OpenCheckpoint checks a signed checkpoint note of the ledger of origin
// against vs. Unlike events.OpenCheckpoint it classifies what is wrong (no
// known signature, an altered signature, a malformed body) and still reads
// the body of a badly signed note, so that its root can be compared too.
func OpenCheckpoint(raw []byte, origin string, vs []note.Verifier) OpenedCheckpoint {
	oc := OpenedCheckpoint{Note: raw}
	n, err := note.Open(raw, note.VerifierList(vs...))
	text := ""
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case err == nil:
		text = n.Text
		oc.Signed = true
	case errors.As(err, &unverified):
		text = unverified.Note.Text
		oc.Kind, oc.Detail = KindCheckpointSignature, "no signature by a configured verifier key"
	case errors.As(err, &invalid):
		oc.Kind, oc.Detail = KindCheckpointSignature, fmt.Sprintf("the signature by %s+%08x does not verify (altered)", invalid.Name, invalid.Hash)
		if i := bytes.LastIndex(raw, []byte("\n\n")); i >= 0 {
			text = string(raw[:i+1])
		}
	default:
		oc.Kind, oc.Detail = KindCheckpointMalformed, fmt.Sprintf("not a signed note: %v", err)
		return oc
	}
	var cp log.Checkpoint
	if _, err := cp.Unmarshal([]byte(text)); err != nil {
		oc.Signed = false
		oc.Kind, oc.Detail = KindCheckpointMalformed, fmt.Sprintf("checkpoint body: %v", err)
		return oc
	}
	if len(cp.Hash) != 32 {
		oc.Signed = false
		oc.Kind, oc.Detail = KindCheckpointMalformed, fmt.Sprintf("root of %d bytes", len(cp.Hash))
		return oc
	}
	oc.Size, oc.Root, oc.Parsed = cp.Size, [32]byte(cp.Hash), true
	if cp.Origin != origin {
		oc.Signed = false
		oc.Kind, oc.Detail = KindCheckpointMalformed, fmt.Sprintf("origin %q, this ledger is %q", cp.Origin, origin)
	}
	return oc
}
