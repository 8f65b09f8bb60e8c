// Package kurrent mirrors the ledger into a KurrentDB (EventStoreDB) with the
// official Go client, github.com/EventStore/EventStore-Client-Go/v4: every
// event goes to the stream of the same name, with its id, type, data and
// metadata bytes, in position order.
//
// # Resuming
//
// The mirror keeps no state of its own. On start (and after an error) it
// reads the target's $all backwards from the end, skips system streams
// ("$…") and events this ledger does not know, and looks the first event it
// knows up by id in the source: the mirror resumes just after that event's
// position. Appends are atomic and one is in flight at a time, so the $all
// tail is an exact record of progress: an append whose answer was lost is
// found there and not written again. Event ids give a second guard:
// KurrentDB (and greffe's own gRPC surface) answer a repeated append of the
// same ids as a success without writing.
//
// A mirror started from position 0 appends with the exact expected revision
// (the event's version − 1), so target revisions equal greffe versions and a
// stream someone else wrote to is detected (mirror_diverged) instead of
// interleaved. A mirror started further (Config.From) cannot know the
// streams' earlier versions and appends with "any".
//
// The run loop (follow the log from where the target stands, batch,
// append, record the position, back off and resume on errors) is package
// export's; this package is its sink for KurrentDB. It may import events,
// export and the EventStore client (and grpc, whose statuses its errors
// are); it must not import node, api or cmd.
package kurrent
