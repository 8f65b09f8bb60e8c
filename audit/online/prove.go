package online

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/transparency-dev/tessera/api/layout"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Proving one fact to a person: an event is in the log, or a later log
// extends an earlier one. The node is asked for the proof, and the proof is
// checked here, against a checkpoint whose signature verifies, before it is
// shown.

// InclusionProof is a checked inclusion proof.
type InclusionProof struct {
	Position uint64 `json:"position"`
	Size     uint64 `json:"size"`
	// LeafHash is RFC 6962 HashLeaf of Entry, computed here.
	LeafHash []byte `json:"leaf_hash"`
	// Entry is the event's stored bytes as served in the entry bundle.
	Entry []byte `json:"entry"`
	// Root is the signed checkpoint's root, which the proof reaches.
	Root       []byte   `json:"root"`
	Hashes     [][]byte `json:"hashes"`
	Checkpoint string   `json:"checkpoint"`
	Verified   bool     `json:"verified"`
}

// ConsistencyProof is a checked consistency proof.
type ConsistencyProof struct {
	From     uint64   `json:"from"`
	To       uint64   `json:"to"`
	RootFrom []byte   `json:"root_from"`
	RootTo   []byte   `json:"root_to"`
	Hashes   [][]byte `json:"hashes"`
	// FromCheckpoint is empty when From is 0: the empty tree needs no
	// signature, its root is SHA-256 of the empty string.
	FromCheckpoint string `json:"from_checkpoint,omitempty"`
	ToCheckpoint   string `json:"to_checkpoint"`
	Verified       bool   `json:"verified"`
}

// prover holds what both proofs need: the origin and verifier set.
type prover struct {
	c      *client.Client
	origin string
	vs     []note.Verifier
}

func newProver(ctx context.Context, c *client.Client, vs []note.Verifier) (*prover, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("info: %w", err)
	}
	if len(vs) == 0 {
		if vs, err = audit.ParseVerifiers(info.VerifierKeys); err != nil {
			return nil, err
		}
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: the node publishes no verifier key; pass --verifier", audit.ErrConfig)
	}
	if err := audit.CheckVerifiers(vs, info.Origin); err != nil {
		return nil, err
	}
	return &prover{c: c, origin: info.Origin, vs: vs}, nil
}

// checkpoint fetches the signed checkpoint of size (0: the latest) and
// checks it.
func (p *prover) checkpoint(ctx context.Context, size uint64) (audit.OpenedCheckpoint, error) {
	raw, err := p.c.Checkpoint(ctx, size)
	if err != nil {
		return audit.OpenedCheckpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	oc := audit.OpenCheckpoint(raw, p.origin, p.vs)
	switch {
	case oc.Kind != "":
		return oc, &audit.ProofError{Kind: oc.Kind, Detail: oc.Detail}
	case size != 0 && oc.Size != size:
		return oc, &audit.ProofError{Kind: audit.KindCheckpointMalformed, Detail: fmt.Sprintf("asked for the checkpoint of size %d, got %d", size, oc.Size)}
	}
	return oc, nil
}

// ProveInclusion fetches the inclusion proof of position in the tree of
// size (0: the latest checkpoint's), the event's stored bytes and the
// signed checkpoint of that size, and checks that the leaf hash of the
// bytes, through the proof, reaches the signed root. vs may be empty: the
// node's published keys are used then.
func ProveInclusion(ctx context.Context, c *client.Client, vs []note.Verifier, position, size uint64) (*InclusionProof, error) {
	p, err := newProver(ctx, c, vs)
	if err != nil {
		return nil, err
	}
	cp, err := p.checkpoint(ctx, size)
	if err != nil {
		return nil, err
	}
	size = cp.Size
	if position >= size {
		return nil, fmt.Errorf("%w: position %d is not below size %d (the empty tree has no leaves)", audit.ErrConfig, position, size)
	}
	var out wire.InclusionOut
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/proof/inclusion?position=%d&size=%d", position, size), nil, &out); err != nil {
		return nil, fmt.Errorf("inclusion proof: %w", err)
	}
	entry, err := fetchEntry(ctx, c, position, size)
	if err != nil {
		return nil, err
	}
	leaf := events.LeafHash(entry)
	res := &InclusionProof{Position: position, Size: size, LeafHash: leaf[:], Entry: entry, Root: cp.Root[:], Hashes: out.Hashes, Checkpoint: string(cp.Note)}
	if !bytes.Equal(out.LeafHash, leaf[:]) {
		return res, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("the node's leaf hash %x… is not the hash of the entry it serves (%x…)", out.LeafHash[:min(6, len(out.LeafHash))], leaf[:6])}
	}
	if err := audit.VerifyInclusionProof(position, size, leaf[:], out.Hashes, cp.Root[:]); err != nil {
		return res, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: err.Error() + " against the signed checkpoint"}
	}
	res.Verified = true
	return res, nil
}

// fetchEntry returns the stored bytes of position from the entry bundle of
// the tree of size.
func fetchEntry(ctx context.Context, c *client.Client, position, size uint64) ([]byte, error) {
	idx := position / layout.EntryBundleWidth
	b, err := c.Get(ctx, "/tlog/"+layout.EntriesPath(idx, layout.PartialTileSize(0, idx, size)))
	if err != nil {
		return nil, fmt.Errorf("entry bundle %d: %w", idx, err)
	}
	entries, _ := audit.ParseEntryBundle(b, layout.EntryBundleWidth)
	if k := position - idx*layout.EntryBundleWidth; k < uint64(len(entries)) {
		return entries[k], nil
	}
	return nil, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: fmt.Sprintf("entry bundle %d does not hold position %d", idx, position)}
}

// ProveConsistency fetches the consistency proof between sizes from and to
// (to 0: the latest checkpoint's) and the signed checkpoints of both, and
// checks the proof with transparency-dev/merkle. From the empty tree the
// proof must be empty and the root is SHA-256 of the empty string: no
// checkpoint is needed for it.
func ProveConsistency(ctx context.Context, c *client.Client, vs []note.Verifier, from, to uint64) (*ConsistencyProof, error) {
	p, err := newProver(ctx, c, vs)
	if err != nil {
		return nil, err
	}
	cpTo, err := p.checkpoint(ctx, to)
	if err != nil {
		return nil, err
	}
	to = cpTo.Size
	if from > to {
		return nil, fmt.Errorf("%w: from %d is above to %d", audit.ErrConfig, from, to)
	}
	res := &ConsistencyProof{From: from, To: to, RootFrom: events.EmptyRoot[:], RootTo: cpTo.Root[:], ToCheckpoint: string(cpTo.Note)}
	if from > 0 {
		cpFrom, err := p.checkpoint(ctx, from)
		if err != nil {
			return nil, err
		}
		res.RootFrom, res.FromCheckpoint = cpFrom.Root[:], string(cpFrom.Note)
	}
	var out wire.ConsistencyOut
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/proof/consistency?from=%d&to=%d", from, to), nil, &out); err != nil {
		return nil, fmt.Errorf("consistency proof: %w", err)
	}
	res.Hashes = out.Hashes
	if err := audit.VerifyConsistencyProof(from, to, out.Hashes, res.RootFrom, res.RootTo); err != nil {
		return res, &audit.ProofError{Kind: audit.KindProofInvalid, Detail: err.Error()}
	}
	res.Verified = true
	return res, nil
}
