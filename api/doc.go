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
// It may import every greffe package but cmd.
package api
