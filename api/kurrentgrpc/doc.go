// Package kurrentgrpc serves the subset of the KurrentDB (EventStoreDB) gRPC
// protocol that the official clients need to append, read and subscribe:
// event_store.client.streams.Streams Read and Append,
// event_store.client.server_features.ServerFeatures GetSupportedMethods and
// event_store.client.gossip.Gossip Read. It is tested against
// github.com/EventStore/EventStore-Client-Go/v4, whose generated server
// interfaces it implements.
//
// # Mapping
//
// A KurrentDB stream is a greffe stream and its revision is the greffe
// version. A $all position is the greffe global position: commit and prepare
// positions are both set to it. Data and custom metadata are the stored JSON
// bytes; the "created" system metadata is RecordedAt in 100 ns ticks since
// the Unix epoch; "content-type" is application/json (the ledger stores JSON
// objects only). Reads of $all follow KurrentDB: forwards from a position
// includes it, backwards from a position starts just below it, and a
// subscription from a position starts just after it.
//
// greffe's rules hold here too: domain streams (events.IsReserved) are
// read-only, history is never deleted (Delete and Tombstone are refused with
// append_only), and every refusal carries its stable code in the message and
// in the "greffe-code" trailer.
//
// Every resource a client holds is bounded (limits.go): streams per
// connection, Read calls per principal and in total (too_many_streams),
// pages in bytes, and the time a send may wait for a client that does not
// read.
//
// The package may import events, the EventStore client's generated protos,
// grpc, and internal/quota and internal/progress (the caps and write
// bounds it shares with the HTTP API); it must not import node or cmd.
package kurrentgrpc
