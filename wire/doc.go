// Package wire is the contract between a greffe node and its clients: the
// JSON bodies of the HTTP API (docs/API.md, docs/COMMANDS.md,
// docs/CLUSTER.md), the error every failed request answers (Error, in an
// ErrorBody) and the public error codes of the HTTP layer and of the
// cluster. Package api serves these types and package client decodes them,
// so that both ends read one definition; the OpenAPI document
// (docs/openapi.json) is reflected from them, under their Go names.
//
// The codes of the layers below the API stay beside their gates (events,
// commands, aggregates, projections); the codes here are those of the edge
// itself and of the cluster, which the replicator answers and the clients
// match (client/endpoints.go retries on not_leader elsewhere).
//
// It holds data and no behaviour: no I/O, no HTTP. It imports the standard
// library and events, whose envelope types (Event, Expected, Envelope,
// StreamInfo) the bodies carry as they are; nothing else of greffe, so
// that anything may import it.
package wire
