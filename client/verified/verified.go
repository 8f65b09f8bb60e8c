package verified

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Config configures a verified client. Nothing can change once New returns.
type Config struct {
	// Verifiers are the log's note verifier keys (audit.ParseVerifiers).
	// Empty: the keys the node publishes (GET /v1/info), trusted on first
	// use as `greffe verify --server` does; give them for a node you do not
	// already trust.
	Verifiers []note.Verifier
	// Witnesses and WitnessQuorum: a checkpoint is believed only with valid
	// cosignatures by at least WitnessQuorum of Witnesses
	// (audit.ParseWitnessKeys), and the node is asked for one (it waits up
	// to 10 s for its witnesses). Default (0): none required.
	Witnesses     []note.Verifier
	WitnessQuorum int
	// StateFile keeps the trusted state across runs, in the format of
	// `greffe verify --state` (audit.State); it is read by New and
	// replaced (atomically) each time the state moves forward. "": the
	// state lives in memory and starts empty.
	StateFile string
	// MaxStreamEndScan bounds the events of the global log a stream read
	// reads, proven, after the page's newest event to prove that the
	// stream has no later one, where the page claims the stream's end
	// (omission.go); a claim that would need more is refused with an
	// *UnprovenEndError. 0: DefaultMaxStreamEndScan (10,000). Negative:
	// none; an end is then proven only when the checkpoint ends with it.
	MaxStreamEndScan int
}

// Client is a client whose answers are proven. Safe for concurrent use:
// concurrent calls each check their own answer, and the trusted state moves
// only forward.
type Client struct {
	c       *client.Client
	policy  audit.CheckpointPolicy
	file    string
	maxScan int // Config.MaxStreamEndScan, 0 for none

	// persistMu serializes writes of the state file, each of the state
	// read after it is held; taken before mu, never while holding it.
	persistMu sync.Mutex

	mu sync.Mutex
	st *audit.State // guarded by mu; nil: nothing trusted yet
	// opened is the last checkpoint note whose signatures passed the
	// policy, and what it opened to (guarded by mu): the same bytes under
	// the same keys pass again, so a read answered against the checkpoint
	// of the read before skips its signature checks.
	opened struct {
		note string
		cp   events.Checkpoint
	}
}

// New returns a verified client over c. It reads the state file, if any,
// and, without Verifiers, the node's published keys.
func New(ctx context.Context, c *client.Client, cfg Config) (*Client, error) {
	var st *audit.State
	if cfg.StateFile != "" {
		var err error
		if st, err = audit.ReadState(cfg.StateFile); err != nil {
			return nil, err
		}
	}
	vs := cfg.Verifiers
	origin := ""
	if len(vs) == 0 {
		info, err := c.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("verified client: the node's keys: %w", err)
		}
		if vs, err = audit.ParseVerifiers(info.VerifierKeys); err != nil {
			return nil, err
		}
		origin = info.Origin
	}
	if origin == "" && len(vs) > 0 {
		origin = vs[0].Name()
	}
	p := audit.CheckpointPolicy{Origin: origin, Verifiers: vs, Witnesses: cfg.Witnesses, Quorum: cfg.WitnessQuorum}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if st != nil && st.Origin != origin {
		return nil, fmt.Errorf("%w: state file %s remembers ledger %q, these keys are for %q", audit.ErrConfig, cfg.StateFile, st.Origin, origin)
	}
	maxScan := cfg.MaxStreamEndScan
	switch {
	case maxScan == 0:
		maxScan = DefaultMaxStreamEndScan
	case maxScan < 0:
		maxScan = 0
	}
	return &Client{c: c, policy: p, file: cfg.StateFile, maxScan: maxScan, st: st}, nil
}

// State returns a copy of the trusted state (nil: nothing verified yet).
func (v *Client) State() *audit.State {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.st == nil {
		return nil
	}
	s := *v.st
	return &s
}

// query is the proof request for an answer: from the size trusted now.
func (v *Client) query() (client.ProofQuery, *audit.State) {
	v.mu.Lock()
	defer v.mu.Unlock()
	q := client.ProofQuery{WitnessQuorum: v.policy.Quorum, Range: true}
	if v.st != nil {
		q.Trusted = v.st.Size
	}
	return q, v.st
}

// maxRaces bounds how often accept re-links a checkpoint to a state that
// concurrent calls moved meanwhile (each time costs one request).
const maxRaces = 8

// accept checks p's checkpoint against the policy and against sent (the
// state the request was made from), moves the trusted state forward to it
// when it is newer, and returns it. A checkpoint older than the state a
// concurrent call moved to meanwhile is linked to that state by a
// consistency proof asked of the node, and believed without moving it.
func (v *Client) accept(ctx context.Context, sent *audit.State, p *wire.Proof) (events.Checkpoint, error) {
	if p == nil {
		return events.Checkpoint{}, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: "the node's answer carries no proof"}
	}
	cp, err := v.open(p.Checkpoint)
	if err != nil {
		return cp, err
	}
	if sent != nil && p.Trusted != sent.Size {
		return cp, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the consistency proof to the checkpoint of size %d starts at size %d, the client asked from %d", cp.Size, p.Trusted, sent.Size)}
	}
	next, err := audit.Advance(sent, cp, p.Consistency, v.c.Base)
	if err != nil {
		return cp, err
	}
	for range maxRaces {
		v.mu.Lock()
		cur := v.st
		if cur == sent || sameState(cur, next) {
			moved := cur != next && (cur == nil || next.Size > cur.Size)
			if moved {
				v.st = next
			}
			v.mu.Unlock()
			if moved {
				return cp, v.persist()
			}
			return cp, nil
		}
		v.mu.Unlock()
		// Another call moved the state from sent to cur meanwhile: link cp
		// to cur, whichever is newer.
		if cp.Size >= cur.Size {
			proof, err := v.consistency(ctx, cur.Size, cp.Size)
			if err != nil {
				return cp, err
			}
			if next, err = audit.Advance(cur, cp, proof, v.c.Base); err != nil {
				return cp, err
			}
			sent = cur
			continue
		}
		proof, err := v.consistency(ctx, cp.Size, cur.Size)
		if err != nil {
			return cp, err
		}
		if err := audit.VerifyConsistencyProof(cp.Size, cur.Size, proof, cp.Root[:], cur.Root); err != nil {
			return cp, &audit.ProofError{Kind: audit.KindFork, Detail: fmt.Sprintf("the checkpoint of size %d is not consistent with the one of size %d already verified (%v): history was rewritten or forked", cp.Size, cur.Size, err)}
		}
		return cp, nil
	}
	return cp, fmt.Errorf("verified client: the trusted state moved %d times while one answer was checked", maxRaces)
}

// open checks a checkpoint note against the policy, or returns what the
// same note opened to last time.
func (v *Client) open(note string) (events.Checkpoint, error) {
	v.mu.Lock()
	if note == v.opened.note && note != "" {
		cp := v.opened.cp
		v.mu.Unlock()
		return cp, nil
	}
	v.mu.Unlock()
	cp, err := v.policy.Open([]byte(note))
	if err != nil {
		return cp, err
	}
	v.mu.Lock()
	v.opened.note, v.opened.cp = note, cp
	v.mu.Unlock()
	return cp, nil
}

func sameState(a, b *audit.State) bool {
	return a != nil && b != nil && a.Size == b.Size && bytes.Equal(a.Root, b.Root)
}

// consistency asks the node for the consistency proof between two sizes
// (its roots are not read: both come from checkpoints already verified).
func (v *Client) consistency(ctx context.Context, from, to uint64) ([][]byte, error) {
	if from == 0 || from == to {
		return nil, nil
	}
	var out wire.ConsistencyOut
	if err := v.c.Do(ctx, "GET", fmt.Sprintf("/v1/proof/consistency?from=%d&to=%d", from, to), nil, &out); err != nil {
		return nil, fmt.Errorf("consistency proof %d to %d: %w", from, to, err)
	}
	return out.Hashes, nil
}

// persist writes the trusted state to the state file, if there is one.
func (v *Client) persist() error {
	if v.file == "" {
		return nil
	}
	v.persistMu.Lock()
	defer v.persistMu.Unlock()
	st := v.State()
	if err := audit.WriteState(v.file, st); err != nil {
		return fmt.Errorf("verified client: write the state: %w", err)
	}
	return nil
}

// proven checks the entries of p against cp, in the order of want (the
// positions the answer names), and returns the events decoded from the
// proven bytes.
func proven(cp events.Checkpoint, p *wire.Proof, want []uint64) ([]events.Event, error) {
	if len(p.Entries) != len(want) {
		return nil, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the answer names %d event(s), its proof carries %d", len(want), len(p.Entries))}
	}
	out := make([]events.Event, len(want))
	leaves := make([][32]byte, len(want))
	for i, pe := range p.Entries {
		if pe.Position != want[i] {
			return nil, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the event at position %d of the answer is proven at position %d", want[i], pe.Position)}
		}
		leaves[i] = events.LeafHash(pe.Entry)
		if pe.Position >= cp.Size {
			return nil, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the event at position %d is beyond the checkpoint of size %d", pe.Position, cp.Size)}
		}
		if p.Range != nil {
			continue // proven together below
		}
		if err := audit.VerifyInclusionProof(pe.Position, cp.Size, leaves[i][:], pe.Hashes, cp.Root[:]); err != nil {
			return nil, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the event at position %d: its inclusion proof in the checkpoint of size %d does not verify: %v", pe.Position, cp.Size, err)}
		}
	}
	if p.Range != nil {
		if err := provenRange(cp, p, leaves); err != nil {
			return nil, err
		}
	}
	for i, pe := range p.Entries {
		e, err := events.Decode(pe.Entry)
		if err != nil {
			return nil, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the event at position %d: its proven bytes do not decode: %v", pe.Position, err)}
		}
		e.Position = pe.Position
		out[i] = e
	}
	return out, nil
}

// provenRange checks p.Range, the one proof of all of p's entries: they
// must be the run [Begin, End) of positions, in ascending or descending
// order, and their leaf hashes must lead to the checkpoint's root.
func provenRange(cp events.Checkpoint, p *wire.Proof, leaves [][32]byte) error {
	r := p.Range
	n := uint64(len(p.Entries))
	if n == 0 || r.End < r.Begin || r.End-r.Begin != n {
		return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the range proof covers [%d, %d) and the answer holds %d event(s)", r.Begin, r.End, n)}
	}
	ordered := make([][]byte, n)
	descending := n > 1 && p.Entries[0].Position > p.Entries[1].Position
	for i, pe := range p.Entries {
		k := uint64(i)
		if descending {
			k = n - 1 - uint64(i)
		}
		if pe.Position != r.Begin+k {
			return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the event at place %d of the answer is at position %d, outside the order of the range proof of [%d, %d)", i, pe.Position, r.Begin, r.End)}
		}
		ordered[k] = leaves[i][:]
	}
	if err := audit.VerifyRangeProof(r.Begin, r.End, cp.Size, ordered, r.Left, r.Right, cp.Root[:]); err != nil {
		what := fmt.Sprintf("the events at positions %d to %d", r.Begin, r.End-1)
		if n == 1 {
			what = fmt.Sprintf("the event at position %d", r.Begin)
		}
		return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("%s: %v", what, err)}
	}
	return nil
}

// same checks that the answer's event a is the proven one (e): a node
// that serves one event's JSON with another's proof is caught here.
func same(a, e events.Event) error {
	if a.Position != e.Position || a.ID != e.ID || a.Stream != e.Stream || a.Version != e.Version || a.Type != e.Type || (a.LeafHash != [32]byte{} && a.LeafHash != e.LeafHash) {
		return &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the event at position %d (%s@%d, id %s) is not the one its proof holds (%s@%d, id %s)",
			a.Position, a.Stream, a.Version, a.ID, e.Stream, e.Version, e.ID)}
	}
	return nil
}

// IsProofFailure reports whether err is a failed verification (a forged
// proof, a rollback, a fork, a checkpoint without its signatures), as
// opposed to a node that could not be reached or refused the request.
func IsProofFailure(err error) bool {
	var pe *audit.ProofError
	return errors.As(err, &pe)
}
