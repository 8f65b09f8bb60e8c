// Package api is greffe's HTTP surface: the log (appends, reads, Server-Sent
// Events subscriptions, checkpoints), proofs and the C2SP tlog-tiles layout,
// and the routes other packages mount (commands, projections, cluster,
// dashboard). Paths and error codes are a public contract (docs/API.md).
//
// It may import every greffe package but cmd.
package api
