package inspect_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// The inspector reads what the real store writes: its tests write through
// the store, close it (or keep it open, to hold its locks), and inspect.

const testLedger = "00000000-0000-4000-8000-000000000001"

// openStore opens a store in dir, closed when the test ends.
func openStore(t *testing.T, dir string) *pebblelog.Store {
	t.Helper()
	s, err := pebblelog.Open(pebblelog.Config{Dir: dir, LedgerID: testLedger, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// appendData appends one event of type typ holding data to stream.
func appendData(t *testing.T, s *pebblelog.Store, stream, typ, data string) {
	t.Helper()
	p := events.Proposed{ID: uuid.New(), Type: typ, Data: json.RawMessage(data), Metadata: json.RawMessage(`{}`)}
	r := events.AppendRequest{Streams: []events.StreamAppend{{Stream: stream, Expected: events.ExpectAny, Events: []events.Proposed{p}}}}
	if _, err := s.Append(t.Context(), r); err != nil {
		t.Fatal(err)
	}
}
