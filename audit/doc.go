// Package audit is the core of greffe's auditor: what verifying a ledger
// without trusting the node that wrote or serves it means, with no storage
// engine and no network in it. It holds the verification's configuration
// and outcome (Config, Report, the typed Faults and their Kinds), the
// checkpoint rules (OpenCheckpoint classifies what is wrong with a signed
// note; a CheckpointPolicy says what a checkpoint must carry to be
// trusted: the log's signature and, when asked, a quorum of witness
// cosignatures), the proof checks (VerifyInclusionProof,
// VerifyConsistencyProof, VerifyRangeProof), the C2SP entry-bundle format
// (ParseEntryBundle), and the trust state: a State file remembers the last
// verified checkpoint, so that the next run demands a consistency proof
// from it and a rewritten or forked history is caught even when the new
// tree is self-consistent; Advance moves a State to a newer checkpoint.
// The verified client (client/verified) shares the policy and Advance, and
// links no storage engine through them.
//
// The verification itself re-derives everything from the stored event
// bytes: each leaf hash, the Merkle tree, the root and signature of every
// checkpoint, consistency between checkpoints, the stream and event-id
// indexes, and every DSSE signature carried by an event against the key
// valid at that position. Its engine is audit/internal/verify (replay,
// recomputed tree, index, checkpoint and state checks); its two sources
// sit beside this package:
//
//   - audit/offline (VerifyDir): a stopped node's data, read-only through
//     events/pebblelog/layout and events/pebblelog/inspect, never the
//     store's write path.
//   - audit/online (VerifyServer, ProveInclusion, ProveConsistency): a
//     running server through its public read API and C2SP tlog-tiles,
//     through client.
//
// On tampering or inconsistency a verification reports typed Faults sorted
// by position; the first one is the first bad position and what is wrong
// with it.
//
// The package holds verification logic only (no flags, no output format).
// It may import events, witness (the cosignature key parser), the
// transparency-dev libraries (merkle, formats), x/mod's note and
// internal/atomicfile (the state file); never a storage engine, client,
// api, node or cmd (internal/lint, TestLint_Imports).
package audit
