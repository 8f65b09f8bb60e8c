// Package kafka exports the ledger to a Kafka topic with
// github.com/segmentio/kafka-go: one message per event, in position order,
// keyed by stream (so a stream's events share a partition and keep their
// order), its value the event's public JSON and its headers the event's
// coordinates (see [Message]).
//
// # Effectively once
//
// kafka-go has no idempotent producer: a produce request that was applied
// but whose answer was lost (a timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND) is
// retried and written twice. The exporter cannot prevent that, so it makes
// duplicates harmless and rare instead:
//
//   - It keeps no state of its own. On every start and after every error it
//     reads the last message of each partition (the tail) and resumes just
//     after what Kafka holds: events already at their partition's tail are
//     skipped, so a restart adds no duplicate.
//   - Every message carries its event's global position. Positions grow
//     along a partition, so a consumer that drops any position it has
//     already seen (per partition, "position <= the highest seen") sees
//     each event exactly once. docs/ECOSYSTEM.md states this contract.
//
// Writes wait for all in-sync replicas (RequiredAcks: RequireAll) and one
// batch is in flight at a time, which is what makes the tails a faithful
// record of progress.
//
// The run loop (follow the log from where the topic stands, batch, write,
// record the position, back off and resume on errors) is package export's;
// this package is its sink for Kafka (exporter.go) and the message format
// (message.go). It may import events, export and kafka-go; it must not
// import node, api or cmd.
package kafka
