// Package pebblelog is the Pebble implementation of events.Log: one global
// ordered log, the stream and event-id indexes, the RFC 6962 Merkle tree and
// signed checkpoints, all in one Pebble database, with group commit.
//
// It may import events and Pebble; it must not import raft, HTTP or any other
// greffe package (the replicator drives it through Proposer and
// ApplyReplicated).
package pebblelog
