package pebblelog_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// The stream index holds one key per run (the events one append writes to
// one stream). Reads from any version, in both directions and with any
// limit, must give what a per-event index would: checked against a model
// over runs of several lengths, separated by another stream's events.
func TestStore_StreamRunsReadLikeAnEventIndex(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	type vp struct{ Version, Position uint64 }
	var model []vp // the stream's events, by version
	for i, n := range []int{1, 5, 3, 1, 10, 2} {
		ps := make([]events.Proposed, n)
		for j := range ps {
			ps[j] = ev("R", fmt.Sprintf(`{"run":%d,"j":%d}`, i, j))
		}
		// A multi-stream append: the other stream's events come first, so
		// that the runs' positions are not contiguous with each other.
		o, err := s.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{
			{Stream: "other", Events: []events.Proposed{ev("O", `{}`), ev("O", `{}`)}},
			{Stream: "runs", Events: ps},
		}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range o.Events[2:] {
			model = append(model, vp{e.Version, e.Position})
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	in, err := inspect.Open(inspect.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		Stream          string
		Version, Pos, N uint64
	}
	var runs []run
	err = in.Scan(ctx, layout.SpaceStreams, func(e inspect.Entry) error {
		stream, version, ok := layout.ParseStreamKey(e.Key)
		pos, n, okv := layout.ParseStreamRun(e.Value)
		if !ok || !okv {
			t.Fatalf("malformed stream-index entry %x -> %x", e.Key, e.Value)
		}
		runs = append(runs, run{string(stream), version, pos, n})
		return nil
	})
	in.Close()
	if err != nil {
		t.Fatal(err)
	}
	wantRuns := []run{
		{"other", 0, 0, 2}, {"other", 2, 3, 2}, {"other", 4, 10, 2}, {"other", 6, 15, 2}, {"other", 8, 18, 2}, {"other", 10, 30, 2},
		{"runs", 0, 2, 1}, {"runs", 1, 5, 5}, {"runs", 6, 12, 3}, {"runs", 9, 17, 1}, {"runs", 10, 20, 10}, {"runs", 20, 32, 2},
	}
	if diff := cmp.Diff(wantRuns, runs); diff != "" {
		t.Fatalf("stream index (-want +got):\n%s", diff)
	}

	s, _ = openStore(t, dir)
	last := uint64(len(model) - 1)
	for _, dir := range []events.Direction{events.Forward, events.Backward} {
		for from := uint64(0); from <= last+2; from++ {
			for limit := 1; limit <= len(model)+1; limit++ {
				var want []vp
				if dir == events.Forward {
					for v := from; v <= last && len(want) < limit; v++ {
						want = append(want, model[v])
					}
				} else {
					for v := int64(min(from, last)); v >= 0 && len(want) < limit; v-- {
						want = append(want, model[v])
					}
				}
				evs, err := s.ReadStream(ctx, "runs", events.ReadOptions{From: from, Limit: limit, Direction: dir})
				if err != nil {
					t.Fatalf("read %v from %d limit %d: %v", dir, from, limit, err)
				}
				var got []vp
				for _, e := range evs {
					got = append(got, vp{e.Version, e.Position})
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("read %v from %d limit %d (-model +store):\n%s", dir, from, limit, diff)
				}
			}
		}
	}
	evs, err := s.ReadStream(ctx, "runs", events.ReadOptions{From: events.FromEnd, Limit: 3, Direction: events.Backward})
	if err != nil || len(evs) != 3 || evs[0].Version != last || evs[2].Version != last-2 {
		t.Fatalf("read backward from the end: %d events, err %v", len(evs), err)
	}
	// The stream's version after a reopen comes from its last run.
	if _, err := s.Append(ctx, one("runs", events.ExpectVersion(last), ev("R", `{}`))); err != nil {
		t.Fatalf("append at version %d after reopen: %v", last, err)
	}
	var cerr *events.ConditionError
	if _, err := s.Append(ctx, one("runs", events.ExpectVersion(last), ev("R", `{}`))); !errors.As(err, &cerr) || cerr.Actual != int64(last+1) {
		t.Fatalf("stale condition: err %v, want a ConditionError with actual %d", err, last+1)
	}
}
