// Package verify is the auditor's engine, shared by its two sources
// (audit/offline, audit/online): a Run collects faults and builds the
// audit.Report; Replay hashes, decodes and checks the events a source
// feeds, in position order, and recomputes the Merkle tree (Replayed);
// CheckStreamIndex, CheckIDIndex, CheckCheckpoints, CheckWitnessed and
// CheckState compare what the source holds or serves with the replayed
// log. A source knows where bytes come from; this package knows what they
// must be.
//
// It may import audit, events, the transparency-dev libraries, x/mod's
// note, the DSSE library and x/sync; never a storage engine, client or
// anything the auditor audits (internal/lint).
package verify
