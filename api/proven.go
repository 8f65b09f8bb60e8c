package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Proven answers (docs/API.md): ?prove=1 on a read (an event by id, a
// stream page, a page of the global log), an append or a command adds a
// "proof" to the answer: a signed checkpoint (with the cosignatures the
// node's witnesses gave it), the consistency proof from the size the client
// trusts (?trusted=N) to it, and for every event of the answer its stored
// bytes and inclusion proof. A client checks all of it without a request
// per event (client/verified). ?witness_quorum=K asks for a checkpoint that
// K of the node's witnesses cosigned.

// Cosignatures is what the API needs from the node's witness collector
// (*witness.Collector). Every method is safe for concurrent use.
type Cosignatures interface {
	// Cosigned returns cp's note with the cosignature lines collected for
	// it appended (cp.Note when none were).
	Cosigned(cp events.Checkpoint) []byte
	// NewestCosigned returns the newest checkpoint that at least quorum
	// witnesses cosigned, its note with their lines; false when none.
	NewestCosigned(quorum int) (events.Checkpoint, bool)
	// WaitCosigned waits until ctx ends for a checkpoint of at least size
	// that quorum witnesses cosigned, and returns it as NewestCosigned.
	WaitCosigned(ctx context.Context, size uint64, quorum int) (events.Checkpoint, error)
	// Quorum is the node's --witness-quorum: the cosignatures a checkpoint
	// needs to be served as the latest; Witnesses how many witnesses
	// there are.
	Quorum() int
	Witnesses() int
}

// maxWitnessWait bounds how long a proven answer waits for a checkpoint
// that enough witnesses cosigned: a witness round trip takes milliseconds;
// one that is down is retried with a backoff of up to 10 s.
const maxWitnessWait = 10 * time.Second

// maxWitnessQuorum bounds ?witness_quorum (a note holds at most 100
// signatures).
const maxWitnessQuorum = 100

// proofRequest is what ?prove=1 (or ?prove=range) asks for.
type proofRequest struct {
	trusted uint64
	quorum  int
	// ranged is ?prove=range: an answer whose events are one run of
	// consecutive positions (a page of the global log) is proven by one
	// range proof instead of an inclusion proof per event.
	ranged bool
}

// noRelease is the release of a read that took nothing.
func noRelease() {}

// provenRead takes a place among the proven reads (api/limits.go) for a
// read that asks for a proof, or answers 429 and returns false; a read
// without ?prove takes none. For a page (o not nil) it also bounds the
// events proven one by one (maxProvenEntries): every proven page but a
// page of the global log (global) proven by one range proof. A bad
// ?prove is left to proven, which refuses it after the read.
func (s *Server) provenRead(w http.ResponseWriter, r *http.Request, o *events.ReadOptions, global bool) (release func(), ok bool) {
	mode := r.URL.Query().Get("prove")
	if mode == "" {
		return noRelease, true
	}
	release, ok = acquire(w, r, s.quotas.proven, retryAfterProven, wire.CodeTooManyProvenReads, "proven reads",
		"api.Config.MaxProvenReadsPerPrincipal and MaxProvenReads")
	if ok && o != nil && !(global && mode == "range") {
		o.Limit = min(o.EffectiveLimit(), maxProvenEntries)
	}
	return release, ok
}

// parseProve reads prove, trusted and witness_quorum; ok is false without
// prove=1.
func parseProve(r *http.Request) (p proofRequest, ok bool, err error) {
	q := r.URL.Query()
	switch q.Get("prove") {
	case "":
		return p, false, nil
	case "1", "true":
	case "range":
		p.ranged = true
	default:
		return p, false, &wire.Error{Code: wire.CodeInvalidQuery, Field: "prove", Message: "prove is 1 (or true) to add the proof to the answer, or range to prove a run of consecutive positions with one range proof"}
	}
	if p.trusted, err = queryUint(r, "trusted", 0, false); err != nil {
		return p, false, err
	}
	if p.quorum, err = witnessQuorum(r); err != nil {
		return p, false, err
	}
	return p, true, nil
}

// witnessQuorum reads ?witness_quorum (0 when absent).
func witnessQuorum(r *http.Request) (int, error) {
	v := r.URL.Query().Get("witness_quorum")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxWitnessQuorum {
		return 0, &wire.Error{Code: wire.CodeInvalidQuery, Field: "witness_quorum", Message: fmt.Sprintf("witness_quorum %q: use 0 to %d", v, maxWitnessQuorum)}
	}
	return n, nil
}

// servedNote returns the note GET /v1/checkpoint serves for cp: with the
// cosignatures collected for it; for the latest (no size asked), the
// newest checkpoint that the quorum asked for (witness_quorum, default the
// node's --witness-quorum) cosigned, when there is one.
func (s *Server) servedNote(r *http.Request, cp events.Checkpoint, latest bool) ([]byte, error) {
	q, err := witnessQuorum(r)
	if err != nil {
		return nil, err
	}
	cs := s.cfg.Cosignatures
	if cs == nil {
		return cp.Note, nil
	}
	if !r.URL.Query().Has("witness_quorum") {
		q = cs.Quorum()
	}
	if latest && q > 0 {
		if c, ok := cs.NewestCosigned(q); ok {
			return c.Note, nil
		}
	}
	return cs.Cosigned(cp), nil
}

// proven answers a request that asked for a proof, and reports whether it
// did: the JSON of answer with a "proof" field for the events at
// positions (in the answer's order). A read that cannot be proven is an
// error answer; a write (an append, a command) happened already, so its
// answer stays 200 and carries "proof_error" instead.
func (s *Server) proven(w http.ResponseWriter, r *http.Request, answer any, positions []uint64, write bool) bool {
	p, ok, err := parseProve(r)
	if err == nil && !ok {
		return false
	}
	var proof *wire.Proof
	if err == nil {
		proof, err = s.buildProof(r.Context(), p, positions)
	}
	if err != nil && !write {
		if toAPIError(err).Code == wire.CodeCheckpointNotWitnessed {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, err)
		return true
	}
	b, merr := marshalAnswer(answer) // the events as stored
	if merr != nil || len(b) < 2 || b[len(b)-1] != '}' {
		writeError(w, fmt.Errorf("proven answer: %v", merr))
		return true
	}
	tail := map[string]any{"proof": proof}
	if err != nil {
		tail["proof_error"] = toAPIError(err)
	}
	tb, _ := json.Marshal(tail)
	out := b[:len(b)-1]
	if !bytes.Equal(out, []byte("{")) {
		out = append(out, ',')
	}
	out = append(append(out, tb[1:]...), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return true
}

// buildProof builds the proof of the events at positions: the checkpoint,
// the consistency proof from p.trusted, and each event's bytes and
// inclusion proof.
func (s *Server) buildProof(ctx context.Context, p proofRequest, positions []uint64) (*wire.Proof, error) {
	cp, err := s.proofCheckpoint(ctx, p, positions)
	if err != nil {
		return nil, err
	}
	out := &wire.Proof{Checkpoint: string(cp.Note), Trusted: p.trusted, Consistency: [][]byte{}, Entries: make([]wire.ProvenEntry, len(positions))}
	if p.trusted > 0 && p.trusted < cp.Size {
		if out.Consistency, err = events.ConsistencyProof(ctx, s.ledger, p.trusted, cp.Size); err != nil {
			return nil, err
		}
	}
	raws, err := s.readEntries(ctx, positions)
	if err != nil {
		return nil, err
	}
	if begin, end, ok := oneRun(positions); p.ranged && ok {
		if out.Range, err = rangeProof(ctx, s.ledger, begin, end, cp.Size); err != nil {
			return nil, err
		}
		for i, pos := range positions {
			out.Entries[i] = wire.ProvenEntry{Position: pos, Entry: raws[i], Hashes: [][]byte{}}
		}
		return out, nil
	}
	for i, pos := range positions {
		hashes, err := events.InclusionProof(ctx, s.ledger, pos, cp.Size)
		if err != nil {
			return nil, err
		}
		out.Entries[i] = wire.ProvenEntry{Position: pos, Entry: raws[i], Hashes: hashes}
	}
	return out, nil
}

// proofCheckpoint chooses the checkpoint a proof is against: the newest
// (signed now if the log grew), or, with a witness quorum, the newest that
// many witnesses cosigned once one covers the answer and the trusted size,
// waiting up to maxWitnessWait for it. A quorum the node cannot meet (no
// witnesses, or fewer) gets the newest checkpoint, with what it has: the
// client then refuses it, which is the point.
func (s *Server) proofCheckpoint(ctx context.Context, p proofRequest, positions []uint64) (events.Checkpoint, error) {
	cs := s.cfg.Cosignatures
	if p.quorum == 0 || cs == nil || p.quorum > cs.Witnesses() {
		cp, err := s.ledger.LatestCheckpoint(ctx)
		if errors.Is(err, events.ErrNoSigner) {
			return cp, &wire.Error{Code: wire.CodeUnavailable, Message: "the node has no checkpoint signing key yet: nothing can be proven"}
		}
		if err != nil || cs == nil {
			return cp, err
		}
		cp.Note = cs.Cosigned(cp)
		return cp, nil
	}
	need := min(max(p.trusted, maxEnd(positions)), s.ledger.Head().Size)
	wctx, cancel := context.WithTimeout(ctx, maxWitnessWait)
	defer cancel()
	cp, err := cs.WaitCosigned(wctx, need, p.quorum)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return cp, &wire.Error{Code: wire.CodeCheckpointNotWitnessed,
			Message: fmt.Sprintf("no checkpoint of at least %d events was cosigned by %d of the node's witnesses within %s (GET /metrics: greffe_witness_*); retry later", need, p.quorum, maxWitnessWait)}
	}
	return cp, err
}

// oneRun reports whether positions are one run of consecutive positions,
// ascending or descending, and returns the run as [begin, end).
func oneRun(positions []uint64) (begin, end uint64, ok bool) {
	if len(positions) == 0 {
		return 0, 0, false
	}
	first, last := positions[0], positions[len(positions)-1]
	step := uint64(1)
	if last < first {
		step = ^uint64(0) // -1
	}
	for i := 1; i < len(positions); i++ {
		if positions[i] != positions[i-1]+step {
			return 0, 0, false
		}
	}
	return min(first, last), max(first, last) + 1, true
}

// rangeProof is the proof of the leaves [begin, end) in the tree of size:
// the compact ranges of [0, begin) and [end, size), the perfect subtrees a
// verifier merges with the range of the leaves it hashes itself to reach
// the root (transparency-dev/merkle's compact ranges). Two ranges of at
// most log2(size) hashes each, where a page of n events proven one by one
// carries n inclusion proofs of about log2(size) hashes.
func rangeProof(ctx context.Context, r events.HashReader, begin, end, size uint64) (*wire.RangeProof, error) {
	out := &wire.RangeProof{Begin: begin, End: end}
	var err error
	if out.Left, err = events.RangeHashes(ctx, r, 0, begin); err != nil {
		return nil, err
	}
	if out.Right, err = events.RangeHashes(ctx, r, end, size); err != nil {
		return nil, err
	}
	return out, nil
}

// maxEnd returns the smallest tree size that holds every position.
func maxEnd(positions []uint64) uint64 {
	var end uint64
	for _, p := range positions {
		end = max(end, p+1)
	}
	return end
}

// readEntries returns the stored bytes of the events at positions, one
// read per run of consecutive positions (a page of the global log is one
// run, forward or backward).
func (s *Server) readEntries(ctx context.Context, positions []uint64) ([][]byte, error) {
	out := make([][]byte, len(positions))
	for i := 0; i < len(positions); {
		j, step := i+1, int64(0)
		if j < len(positions) {
			step = int64(positions[j]) - int64(positions[i])
		}
		if step == 1 || step == -1 {
			for j < len(positions) && int64(positions[j])-int64(positions[j-1]) == step {
				j++
			}
		} else {
			j = i + 1
		}
		lo, hi := positions[i], positions[j-1]
		if lo > hi {
			lo, hi = hi, lo
		}
		raws, err := s.ledger.ReadRaw(ctx, lo, hi+1)
		if err != nil {
			return nil, err
		}
		if len(raws) != int(hi-lo+1) {
			return nil, fmt.Errorf("read entries [%d, %d]: %d read: %w", lo, hi, len(raws), events.ErrCorrupt)
		}
		for k := i; k < j; k++ {
			out[k] = raws[positions[k]-lo]
		}
		i = j
	}
	return out, nil
}

// positionsOf returns the positions of evs, in their order.
func positionsOf(evs []events.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i := range evs {
		out[i] = evs[i].Position
	}
	return out
}

// appendedPositions returns the positions of an append's events.
func appendedPositions(o events.Outcome) []uint64 {
	out := make([]uint64, len(o.Events))
	for i := range o.Events {
		out[i] = o.Events[i].Position
	}
	return out
}

// commandPositions returns the positions of a command's events.
func commandPositions(out wire.CommandOut) []uint64 {
	ps := make([]uint64, len(out.Events))
	for i := range out.Events {
		ps[i] = out.Events[i].Position
	}
	return ps
}
