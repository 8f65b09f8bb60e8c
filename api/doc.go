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
// It may import every greffe package but cmd.
package api
