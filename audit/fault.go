package audit

import (
	"fmt"
	"slices"
	"time"
)

// Fault kinds. They are stable codes (docs/AUDIT.md): never renamed, never
// reused. Each names what is wrong, not how it was found.
const (
	// KindStorageCorrupt: a file of the store does not read back as it was
	// written: a table, blob file, MANIFEST, OPTIONS file or write-ahead log
	// segment fails a checksum or a format check, or the MANIFEST lost the
	// tables that hold the ledger. What the file held cannot be verified,
	// and the verification stops there. File names it; Position is the
	// first position it hides when the damage showed in the event key
	// space, NoPosition otherwise.
	KindStorageCorrupt = "storage_corrupt"
	// KindStoreIdentity: the store's format or ledger id is missing or not
	// one this binary knows.
	KindStoreIdentity = "store_identity"
	// KindMalformedKey: a key or index value of the wrong shape.
	KindMalformedKey = "malformed_key"
	// KindEventMissing: no event at a position below the head (deleted, or
	// the log truncated).
	KindEventMissing = "event_missing"
	// KindEventBeyondHead: an event stored at or above the recorded head.
	KindEventBeyondHead = "event_beyond_head"
	// KindEventUndecodable: the stored bytes are not a canonical event.
	KindEventUndecodable = "event_undecodable"
	// KindPositionMismatch: the event stored at position p encodes another
	// position (events moved or swapped).
	KindPositionMismatch = "position_mismatch"
	// KindLeafHashMismatch: the leaf hash of the stored bytes differs from
	// the stored (or served) leaf tile: the event's bytes were changed.
	KindLeafHashMismatch = "leaf_hash_mismatch"
	// KindLeafTileMissing: a full leaf tile is not stored (or not served).
	KindLeafTileMissing = "leaf_tile_missing"
	// KindNodeHashMismatch: a stored (or served) tree node differs from the
	// one recomputed from the leaves.
	KindNodeHashMismatch = "node_hash_mismatch"
	// KindNodeMissing: a tile-base node is not stored (or not served).
	KindNodeMissing = "node_missing"
	// KindUnexpectedEntry: a tile or node stored beyond the log.
	KindUnexpectedEntry = "unexpected_entry"
	// KindStateMismatch: the recorded head (size, compact range, last
	// recorded time) differs from the recomputed one.
	KindStateMismatch = "state_mismatch"
	// KindRecordedAtBackwards: recorded_at moves backwards along the log.
	KindRecordedAtBackwards = "recorded_at_backwards"
	// KindStreamVersion: an event's stream version is not the next one of
	// its stream.
	KindStreamVersion = "stream_version_mismatch"
	// KindDuplicateEventID: two events share an id.
	KindDuplicateEventID = "duplicate_event_id"
	// KindStreamIndexMismatch: a stream-index entry points to another
	// event than the one with that stream and version.
	KindStreamIndexMismatch = "stream_index_mismatch"
	// KindStreamIndexMissing: an event has no stream-index entry.
	KindStreamIndexMissing = "stream_index_missing"
	// KindIDIndexMismatch: an event-id index entry points to another event.
	KindIDIndexMismatch = "id_index_mismatch"
	// KindIDIndexMissing: an event is not in the event-id index.
	KindIDIndexMissing = "id_index_missing"
	// KindSignatureInvalid: a signature carried by an event does not verify
	// against the key ring at that position; Reason says why
	// (unknown_key, revoked_key, bad_signature).
	KindSignatureInvalid = "event_signature_invalid"
	// KindCheckpointMalformed: a stored checkpoint does not parse, names
	// another origin, or is stored under another size.
	KindCheckpointMalformed = "checkpoint_malformed"
	// KindCheckpointSignature: no signature of a checkpoint verifies with the
	// configured verifier set, or a known key's signature is altered.
	KindCheckpointSignature = "checkpoint_signature_invalid"
	// KindCheckpointRoot: a checkpoint's root differs from the root
	// recomputed from the events.
	KindCheckpointRoot = "checkpoint_root_mismatch"
	// KindCheckpointBeyondLog: a checkpoint commits to more events than the
	// log holds (the log was truncated).
	KindCheckpointBeyondLog = "checkpoint_beyond_log"
	// KindCheckpointInconsistent: the consistency proof between two
	// successive checkpoints does not verify.
	KindCheckpointInconsistent = "checkpoint_inconsistent"
	// KindFork: the remembered checkpoint (--state) is not consistent with
	// the new one: history was rewritten or forked.
	KindFork = "fork_detected"
	// KindRollback: the log is smaller than the remembered checkpoint.
	KindRollback = "log_rolled_back"
	// KindProofInvalid: a proof served by the node does not verify against
	// the recomputed tree and the signed checkpoint.
	KindProofInvalid = "proof_invalid"
	// KindServerCorrupt: the node itself answered that its stored data is
	// corrupt.
	KindServerCorrupt = "server_reports_corrupt"
)

// kindOrder orders faults at the same position: the most fundamental
// first (a missing or moved event explains a hash mismatch at its
// position, which explains a checkpoint that does not match).
var kindOrder = []string{
	KindStorageCorrupt, KindStoreIdentity, KindMalformedKey, KindEventMissing, KindCheckpointBeyondLog, KindEventBeyondHead,
	KindEventUndecodable, KindPositionMismatch, KindLeafHashMismatch, KindLeafTileMissing,
	KindNodeHashMismatch, KindNodeMissing, KindUnexpectedEntry, KindDuplicateEventID,
	KindStreamVersion, KindRecordedAtBackwards, KindSignatureInvalid,
	KindStreamIndexMismatch, KindStreamIndexMissing, KindIDIndexMismatch, KindIDIndexMissing,
	KindStateMismatch, KindServerCorrupt, KindProofInvalid,
	KindCheckpointMalformed, KindCheckpointSignature, KindCheckpointRoot, KindCheckpointInconsistent,
	KindRollback, KindFork,
}

// Kinds returns every fault kind, most fundamental first.
func Kinds() []string { return slices.Clone(kindOrder) }

// NoPosition is the Position of a fault that no position can be blamed
// for (a store-level problem such as a missing format record).
const NoPosition int64 = -1

// Fault is one thing found wrong.
type Fault struct {
	// Kind is the stable code of what is wrong (the Kind… constants).
	Kind string `json:"kind"`
	// Position is the first bad position, or NoPosition. For a checkpoint
	// fault it is the first position the evidence can blame (0 when only
	// the whole checkpoint can be blamed).
	Position int64 `json:"position"`
	// End, when above Position+1, ends the positions [Position, End) the
	// fault covers: every one of them is bad (missing events), or, when
	// Approximate, the first bad one is somewhere among them. Zero means
	// Position alone.
	End int64 `json:"end,omitempty"`
	// Approximate says that the evidence locates the first bad position
	// only to [Position, End): a subtree hash or a signed root differs and
	// no finer evidence exists.
	Approximate bool `json:"approximate,omitempty"`
	// Checkpoint is the size of the checkpoint concerned, for checkpoint,
	// fork and rollback faults.
	Checkpoint *uint64 `json:"checkpoint_size,omitempty"`
	// Reason refines Kind for signatures: unknown_key, revoked_key,
	// bad_signature.
	Reason string `json:"reason,omitempty"`
	// KeyID is the signer's key id, for signature faults.
	KeyID string `json:"key_id,omitempty"`
	// File is the damaged file, for storage faults: a path relative to
	// the verified folder (Report.Source), or "." for the folder itself
	// when no single file can be blamed.
	File string `json:"file,omitempty"`
	// Offset is where in File the damage starts, in bytes, when known.
	Offset *int64 `json:"offset,omitempty"`
	// KeySpace is the key space being read when the damage showed, for
	// storage faults (event, leaf tile, tree node, stream index, event-id
	// index, checkpoint, meta).
	KeySpace string `json:"key_space,omitempty"`
	// Detail says what was found, for a person.
	Detail string `json:"detail"`
}

func (f Fault) String() string {
	where := "store"
	switch {
	case f.Position == NoPosition:
	case f.Approximate && f.End > f.Position+1:
		where = fmt.Sprintf("somewhere in positions [%d, %d)", f.Position, f.End)
	case f.End > f.Position+1:
		where = fmt.Sprintf("positions [%d, %d)", f.Position, f.End)
	default:
		where = fmt.Sprintf("position %d", f.Position)
	}
	if f.Checkpoint != nil {
		where += fmt.Sprintf(" (checkpoint of size %d)", *f.Checkpoint)
	}
	s := fmt.Sprintf("%s: %s", where, f.Kind)
	if f.File != "" {
		s += " in " + f.File
		if f.Offset != nil {
			s += fmt.Sprintf(" at offset %d", *f.Offset)
		}
	}
	if f.Reason != "" {
		s += " (" + f.Reason + ")"
	}
	return s + ": " + f.Detail
}

// Report is the outcome of a verification.
type Report struct {
	// Source is the data folder or server verified.
	Source string `json:"source"`
	// LedgerID and Origin identify the ledger.
	LedgerID string `json:"ledger_id"`
	Origin   string `json:"origin"`
	// Events is the number of events verified (positions replayed).
	Events uint64 `json:"events"`
	// Streams is the number of distinct streams.
	Streams int `json:"streams"`
	// Checkpoints is the number of signed checkpoints whose signature and
	// root were checked.
	Checkpoints int `json:"checkpoints"`
	// Signatures is the number of DSSE signatures carried by events that
	// were checked.
	Signatures int `json:"signatures"`
	// Size and Root are the recomputed head the verification covers.
	Size uint64 `json:"size"`
	Root []byte `json:"root"`
	// Elapsed is the wall time of the verification.
	Elapsed time.Duration `json:"elapsed_ns"`
	// EventsPerSec is Events / Elapsed.
	EventsPerSec float64 `json:"events_per_sec"`
	// Verified is true when no fault was found.
	Verified bool `json:"verified"`
	// First is the first fault by position (nil when verified).
	First *Fault `json:"first_fault,omitempty"`
	// Faults are the first faults by position (at most Config.MaxFaults);
	// FaultCount is how many were found in all.
	Faults     []Fault `json:"faults,omitempty"`
	FaultCount int     `json:"fault_count"`
	// State is what the --state check did, when a state file was given.
	State *StateOutcome `json:"state,omitempty"`
}
