// Package events holds greffe's centre: the event envelope ([Event],
// [Proposed]), its canonical binary encoding and RFC 6962 leaf hash, append
// conditions ([Expected]), the unit of replication ([Batch]), the [Log]
// contract every store implements, the Merkle helpers that turn stored nodes
// into proofs, signed C2SP checkpoints, and the stored-format digests
// greffe defines by a formula (a binding's identity, an argv's hash, a
// key's id: digest.go), which the deciders, the client and the auditor
// share. It also holds the two things
// every edge shares: the one shape of a coded error ([Error], with its
// [Kind]: refused, failed, uncertain, corrupt; other packages' coded errors
// present themselves as one through [Coded]), and the one strict decoder
// of JSON input ([DecodeJSON]), whose errors are that shape with the
// documented field paths.
//
// The package does no I/O beyond what its callers hand it. It may import the
// standard library, github.com/google/uuid, the transparency-dev / x/mod
// note libraries and github.com/go-json-experiment/json (encoding/json/v2
// ahead of the standard library: moving to it is an import change), and
// the module's byte-level JSON toolkit, internal/jsonscan (standard library
// only), whose validator is the log's rule for data and metadata
// ([ValidJSON]): one copy for the log and the edge that decodes into it,
// and the DSSE reference library (github.com/secure-systems-lab/
// go-securesystemslib/dsse), which computes the pre-authentication
// encoding a signed event's envelope is verified over (signed.go): the
// standard of signature envelopes, not a format of our own. Stored data
// has one decoder, [DecodeStored]. events also owns the vocabulary of the
// Merkle tree and of the checkpoint signers ([NodeID], [Range], [Signer]),
// so that the store stores what events computes and imports neither. It
// must not import Pebble, raft, HTTP or any other greffe package.
package events
