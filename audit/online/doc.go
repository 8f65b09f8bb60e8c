// Package online is the auditor's online source: VerifyServer verifies a
// running node through what it serves to anyone (the signed checkpoint,
// the C2SP entry bundles and hash tiles under /tlog/, the proof API, the
// read API for the indexes), feeding the audit core (audit/internal/verify)
// the served entries; ProveInclusion and ProveConsistency fetch one proof
// and check it against a signed checkpoint before it is shown.
//
// It may import audit and its core, events, client (the node's HTTP
// client), tessera's tile layout and x/mod's note; never a storage engine,
// api, node or cmd (internal/lint).
package online
