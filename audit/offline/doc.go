// Package offline is the auditor's offline source: VerifyDir verifies the
// data folder of a stopped node (or a copy of it) read-only, scanning each
// key space once in key order and feeding the audit core
// (audit/internal/verify) the stored event bytes, index entries,
// checkpoints, tiles and recorded head; damaged storage is a fault
// (audit.KindStorageCorrupt), one per damaged file.
//
// It may import audit and its core, events, the on-disk format
// (events/pebblelog/layout) and the read-only inspector
// (events/pebblelog/inspect); never the store's write path
// (events/pebblelog), client, api, node or cmd (internal/lint).
package offline
