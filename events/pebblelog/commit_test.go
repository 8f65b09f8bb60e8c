package pebblelog

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// TestCommitter_AppendQueuedAfterDrain pins, one step at a time, the
// interleaving of issue #14 that TestStore_AppendRacingClose can only hit
// by chance: an Append passes the closed check, Close stops the committer
// (the sequencer drains the request queue and returns), and only then does
// the Append put its request in the queue. Nothing reads the queue any
// more, so the Append must answer ErrClosed (nothing was written) instead
// of waiting for an answer that never comes.
func TestCommitter_AppendQueuedAfterDrain(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// What Close does before the Append reaches the queue, without setting
	// closed: the Append has already checked it.
	s.cancel()
	s.wg.Wait()
	// Another append is in progress, so this one queues instead of
	// committing on its own goroutine (tryDirect).
	s.commit.active.Add(1)
	defer s.commit.active.Add(-1)

	// A lost request would wait forever; the deadline turns that into
	// ErrOutcomeUnknown, which fails the test.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	r := events.AppendRequest{Streams: []events.StreamAppend{{Stream: "r", Expected: events.ExpectAny,
		Events: []events.Proposed{{ID: uuid.New(), Type: "T", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}}}}}
	if _, err := s.Append(ctx, r); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("append queued after the committer stopped: err = %v, want ErrClosed", err)
	}
}
