// Package metrics holds the Prometheus collectors of a greffe node: one
// registry per node (never the process-wide default registry, so that
// several nodes in one process, as in tests, keep their numbers apart),
// served by GET /metrics.
//
// The collectors read the components' own counters at scrape time (the
// store's Stats and Histograms, the replicator's status, the projections'
// positions, the Kafka exporter's lag, the SSE subscriptions' positions,
// the witnesses' last cosignatures, the surfaces' caps) instead of instrumenting their hot
// paths; the only hot-path cost is the store's fixed-bucket histograms, a
// few atomic adds per batch.
//
// It may import events, the store, commands (for the refusals stream's
// name), projections, witness and internal/quota (for their status types),
// wire (the cluster status the replicator reports) and the Prometheus
// client; it must not import api, node or the replicator, which node wires
// in through the Raft interface.
package metrics
