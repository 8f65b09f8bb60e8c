package wire

// The bodies of the proof routes (GET /v1/proof/…) and the "proof" field
// that ?prove=1 adds to an answer (docs/API.md, "Proven answers"): the
// checkpoint it is proven against, the consistency proof from the size the
// client already trusts, and each event's stored bytes with its inclusion
// proof. client/verified checks them.

// InclusionOut is an RFC 6962 inclusion proof: Hashes in RFC order, base64.
type InclusionOut struct {
	// Position is the event's position.
	Position uint64 `json:"position"`
	// Size is the log size the proof is for.
	Size uint64 `json:"size"`
	// LeafHash is the event's Merkle leaf hash, base64.
	LeafHash []byte `json:"leaf_hash"`
	// Root is the Merkle root at size, base64.
	Root []byte `json:"root"`
	// Hashes are the proof's hashes (RFC 6962), base64, leaf to root.
	Hashes [][]byte `json:"hashes"`
}

// ConsistencyOut is an RFC 6962 consistency proof between two sizes. From
// the empty tree it is the empty proof, and RootFrom is SHA-256("").
type ConsistencyOut struct {
	// From is the smaller log size.
	From uint64 `json:"from"`
	// To is the larger log size.
	To uint64 `json:"to"`
	// RootFrom is the Merkle root at from, base64.
	RootFrom []byte `json:"root_from"`
	// RootTo is the Merkle root at to, base64.
	RootTo []byte `json:"root_to"`
	// Hashes are the consistency proof's hashes (RFC 6962), base64.
	Hashes [][]byte `json:"hashes"`
}

// Proof is what ?prove=1 adds to an answer, as its "proof" field.
type Proof struct {
	// Checkpoint is the signed checkpoint note the proofs are against,
	// with the witnesses' cosignature lines the node collected for it.
	Checkpoint string `json:"checkpoint"`
	// Trusted is the request's trusted size; Consistency is the RFC 6962
	// consistency proof from it to the checkpoint's size (empty when
	// Trusted is 0 or not below the checkpoint's size).
	Trusted     uint64   `json:"trusted"`
	Consistency [][]byte `json:"consistency"`
	// Entries are the answer's events, in the answer's order.
	Entries []ProvenEntry `json:"entries"`
	// Range, asked for with ?prove=range and given when the answer's
	// events are one run of consecutive positions, proves all of them at
	// once; the entries then carry no hashes of their own.
	Range *RangeProof `json:"range,omitempty"`
}

// RangeProof proves the leaves [Begin, End) of the checkpoint's tree: Left
// holds the compact range [0, Begin) and Right the compact range [End,
// size), each the roots of its perfect subtrees from left to right (the
// decomposition of transparency-dev/merkle's compact.RangeNodes). A
// verifier appends the leaf hashes of the entries, in position order, to
// Left's range, merges Right's, and compares the root with the checkpoint's.
type RangeProof struct {
	Begin uint64   `json:"begin"`
	End   uint64   `json:"end"`
	Left  [][]byte `json:"left"`
	Right [][]byte `json:"right"`
}

// ProvenEntry is one event of a proven answer: its stored bytes (the
// canonical encoding, docs/FORMAT.md, whose RFC 6962 leaf hash is
// SHA-256(0x00 ‖ Entry)) and the inclusion proof of its position in the
// checkpoint's tree, in RFC 6962 order.
type ProvenEntry struct {
	Position uint64   `json:"position"`
	Entry    []byte   `json:"entry"`
	Hashes   [][]byte `json:"hashes"`
}
