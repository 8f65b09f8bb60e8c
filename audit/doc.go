// Package audit verifies a greffe ledger without trusting the node that
// wrote or serves it. It re-derives everything from the stored event bytes:
// each leaf hash, the Merkle tree, the root and signature of every
// checkpoint, consistency between checkpoints, the stream and event-id
// indexes, and every DSSE signature carried by an event against the key
// valid at that position. It verifies either a stopped node's data
// ([VerifyDir], read-only) or a running server through its public read API
// and C2SP tlog-tiles ([VerifyServer]), and builds and checks proofs
// ([ProveInclusion], [ProveConsistency]). A [CheckpointPolicy] says what a
// checkpoint must carry to be trusted (the log's signature and, when asked,
// a quorum of witness cosignatures); [Advance] moves a State to a newer
// checkpoint: both are shared with the verified client (client/verified).
//
// On tampering or inconsistency it reports typed [Fault]s sorted by
// position; the first one is the first bad position and what is wrong with
// it. A [State] file remembers the last verified checkpoint so that the
// next run demands a consistency proof from it: a rewritten or forked
// history is caught even when the new tree is self-consistent.
//
// The package holds verification logic only (no flags, no output format).
// It may import events, events/pebblelog (its read-only Inspector),
// aggregates (stream prefixes), client, witness (the cosignature key
// parser), the transparency-dev libraries (merkle, formats, tessera's tile
// layout), x/mod's note, x/sync's errgroup, the DSSE library and
// internal/atomicfile (the state file); it must
// not import api, node or cmd (TestLint_Imports).
package audit
