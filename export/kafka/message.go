package kafka

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/greffe/greffe/events"
)

// Header names of an exported message. They are a public format
// (docs/ECOSYSTEM.md): never renamed, never reused; new headers may be added.
const (
	// HeaderPosition is the event's global position, in decimal. Consumers
	// deduplicate on it.
	HeaderPosition = "position"
	// HeaderStream is the event's stream (also the message key).
	HeaderStream = "stream"
	// HeaderVersion is the event's version in its stream, in decimal.
	HeaderVersion = "version"
	// HeaderType is the event's type.
	HeaderType = "type"
	// HeaderEventID is the event's id, a UUID in its canonical text form.
	HeaderEventID = "event_id"
	// HeaderLeafHash is the event's RFC 6962 leaf hash, 64 lowercase hex
	// digits: with a checkpoint and an inclusion proof from the node, a
	// consumer can verify the message is in the ledger.
	HeaderLeafHash = "leaf_hash"
	// HeaderBatchStart is the exporter's progress when it sent the message,
	// in decimal: every event below it was already acknowledged by Kafka.
	// The exporter reads it back from partition tails to resume.
	HeaderBatchStart = "batch_start"
)

// Message is the Kafka message of one event: key = stream, value = the
// event's public JSON (events.Event.MarshalJSON), time = recorded_at, and
// the headers above.
//
// REQUIRES: batchStart <= e.Position.
func Message(e *events.Event, batchStart uint64) (kafkago.Message, error) {
	value, err := json.Marshal(e)
	if err != nil {
		return kafkago.Message{}, fmt.Errorf("encode position %d: %w", e.Position, err)
	}
	return kafkago.Message{
		Key:   []byte(e.Stream),
		Value: value,
		Time:  e.RecordedAt,
		Headers: []kafkago.Header{
			{Key: HeaderPosition, Value: strconv.AppendUint(nil, e.Position, 10)},
			{Key: HeaderStream, Value: []byte(e.Stream)},
			{Key: HeaderVersion, Value: strconv.AppendUint(nil, e.Version, 10)},
			{Key: HeaderType, Value: []byte(e.Type)},
			{Key: HeaderEventID, Value: []byte(e.ID.String())},
			{Key: HeaderLeafHash, Value: hex.AppendEncode(nil, e.LeafHash[:])},
			{Key: HeaderBatchStart, Value: strconv.AppendUint(nil, batchStart, 10)},
		},
	}, nil
}

// messageSize bounds the bytes kafka-go counts for m against
// Writer.BatchBytes (a record's fixed fields, key, value and headers, with
// their varint lengths at their widest).
func messageSize(m *kafkago.Message) int {
	n := 32 + len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// HeaderUint returns the decimal header named key, and whether it was there
// and parsed.
func HeaderUint(headers []kafkago.Header, key string) (uint64, bool) {
	for _, h := range headers {
		if h.Key == key {
			v, err := strconv.ParseUint(string(h.Value), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// PartitionOf returns the partition of a stream among n partitions: the
// murmur2 hash of the key, as the Java client's default partitioner (and the
// exporter's writer) compute it.
func PartitionOf(stream string, n int) int {
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	return kafkago.Murmur2Balancer{}.Balance(kafkago.Message{Key: []byte(stream)}, parts...)
}
