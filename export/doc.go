// Package export copies the ledger into other systems, one folder per
// system (kafka: a Kafka topic; kurrent: a KurrentDB mirror), all driven
// by the one run loop here (Loop): follow the log from where the target
// stands, batch what is ready, hand the batch to the system's Sink, record
// the position the target acknowledged, back off and resume on an error
// retrying may fix, stop on one it cannot (Error), at Config.Until, or
// when the context ends.
//
// No exporter keeps state of its own: each run, and each session after an
// error, resumes from what the target holds (Sink.Resume), and one batch
// is in flight at a time, so that the target's own record of progress is
// faithful. An exporter is derived from the log (ARCHITECTURE.md, "The log
// is the only truth"): dropped, it is rebuilt from position 0.
//
// It imports events and x/sync; each exporter adds its system's client
// (kafka-go, the EventStore client). Nothing here imports the store, raft,
// api, node or cmd: an exporter reads any events.Subscriber (the store
// under `greffe serve`, a node's HTTP API under `greffe export`).
package export
