// Package events holds greffe's centre: the event envelope ([Event],
// [Proposed]), its canonical binary encoding and RFC 6962 leaf hash, append
// conditions ([Expected]), the unit of replication ([Batch]), the [Log]
// contract every store implements, the Merkle helpers that turn stored nodes
// into proofs, and signed C2SP checkpoints.
//
// The package does no I/O beyond what its callers hand it. It may import the
// standard library, github.com/google/uuid and the transparency-dev / x/mod
// note libraries; it must not import Pebble, raft, HTTP or any other greffe
// package.
package events
