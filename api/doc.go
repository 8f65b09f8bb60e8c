// Package api is greffe's HTTP surface: the log (appends, reads, Server-Sent
// Events subscriptions, checkpoints), proofs and the C2SP tlog-tiles layout,
// and the routes other packages mount (commands, projections, cluster,
// dashboard). Paths and error codes are a public contract (docs/API.md).
//
// It also serves its own contract, GET /v1/openapi.json (api/openapi.go),
// whose schemas github.com/invopop/jsonschema reflects from the Go types:
// a generator, not a hand-written document, is the only way the schemas
// stay the types'.
//
// Every resource a client can hold is bounded (api/limits.go): SSE
// subscriptions and proven reads per principal and in total, pages in
// bytes, and the time a client may take to read an answer. Without tokens
// it answers loopback names and its own pages only (api/browser.go).
//
// It depends on interfaces, each defined here with only what it calls:
// Ledger (and the capabilities FailingLedger, StreamLister) of the store,
// Backups of the backup taker, Cluster and Router of the raft member,
// ReadModels of the projections, KeyRing and Cosignatures; node hands it
// the concrete parts and pins them (node/node.go). The bodies it serves and
// its error codes are package wire's, which the client speaks too.
//
// It imports events, wire, commands, projections, aggregates (the command
// catalogue, roles and event data types the schemas are reflected from),
// internal/jsonscan, quota, progress and netpolicy; never a store, raft, a
// client, backup, node or cmd (internal/lint). It still links Pebble
// through projections, whose runner stores its rows in Pebble.
package api
