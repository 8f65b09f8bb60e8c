package pebblelog_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
)

// TestStore_ReadsBoundedInBytes: a read with MaxBytes stops before the
// event that would take its page above it (issue #20: a page of 10,000
// events of 64 KiB was 640 MB allocated for one request), keeps at least
// one event, and paging on from after the last event (forward and
// backward, global and per stream) reads every event once, in order, with
// the leaf hashes of an unbounded read. Full tells the pages that stopped
// short from the last.
func TestStore_ReadsBoundedInBytes(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, t.TempDir())
	const n = 40
	for i := range n {
		stream := []string{"a", "b"}[i%2]
		data := fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", 50_000))
		if _, err := s.Append(ctx, one(stream, events.ExpectAny, ev("Big", data))); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ReadAll(ctx, events.ReadOptions{Limit: n})
	if err != nil || len(all) != n {
		t.Fatalf("unbounded read: %d events, %v", len(all), err)
	}
	const budget = 120_000 // two events of ~50 KB, not three
	type row struct {
		Pos  uint64
		Leaf [32]byte
	}
	rows := func(evs []events.Event) []row {
		out := make([]row, len(evs))
		for i, e := range evs {
			out[i] = row{e.Position, e.LeafHash}
		}
		return out
	}
	bytesOf := func(evs []events.Event) int {
		total := 0
		for i := range evs {
			total += events.EncodedSize(&evs[i])
		}
		return total
	}
	// walk pages from from until a page is not Full, checking each
	// page's bytes; next gives the from after an event (false: none).
	type reader func(o events.ReadOptions) ([]events.Event, error)
	walk := func(t *testing.T, read reader, dir events.Direction, from uint64, next func(events.Event) (uint64, bool)) []events.Event {
		t.Helper()
		var got []events.Event
		for range 2 * n {
			o := events.ReadOptions{From: from, Limit: events.MaxReadLimit, Direction: dir, MaxBytes: budget}
			page, err := read(o)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 1 && bytesOf(page) > budget {
				t.Fatalf("page from %d: %d events of %d bytes, above the budget %d", from, len(page), bytesOf(page), budget)
			}
			got = append(got, page...)
			if !o.Full(page) {
				return got
			}
			if len(page) == 0 {
				t.Fatalf("an empty page from %d said it was full", from)
			}
			var more bool
			if from, more = next(page[len(page)-1]); !more {
				return got
			}
		}
		t.Fatal("paging did not end")
		return nil
	}
	byPos := func(e events.Event) (uint64, bool) { return e.Position + 1, true }
	down := func(e events.Event) (uint64, bool) { return e.Position - 1, e.Position > 0 }
	reverse := func(evs []events.Event) []events.Event {
		out := make([]events.Event, 0, len(evs))
		for i := len(evs) - 1; i >= 0; i-- {
			out = append(out, evs[i])
		}
		return out
	}
	stream := func(name string) []events.Event {
		var out []events.Event
		for _, e := range all {
			if e.Stream == name {
				out = append(out, e)
			}
		}
		return out
	}
	readAll := func(o events.ReadOptions) ([]events.Event, error) { return s.ReadAll(ctx, o) }
	readB := func(o events.ReadOptions) ([]events.Event, error) { return s.ReadStream(ctx, "b", o) }
	tests := []struct {
		name string
		got  func(t *testing.T) []events.Event
		want []events.Event
	}{
		{"global forward", func(t *testing.T) []events.Event { return walk(t, readAll, events.Forward, 0, byPos) }, all},
		{"global backward", func(t *testing.T) []events.Event {
			return walk(t, readAll, events.Backward, events.FromEnd, down)
		}, reverse(all)},
		{"stream forward", func(t *testing.T) []events.Event {
			return walk(t, readB, events.Forward, 0, func(e events.Event) (uint64, bool) { return e.Version + 1, true })
		}, stream("b")},
		{"stream backward", func(t *testing.T) []events.Event {
			return walk(t, readB, events.Backward, events.FromEnd, func(e events.Event) (uint64, bool) { return e.Version - 1, e.Version > 0 })
		}, reverse(stream("b"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(rows(tc.want), rows(tc.got(t))); diff != "" {
				t.Fatalf("paged in bytes (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("an event above the budget comes alone", func(t *testing.T) {
		page, err := s.ReadAll(ctx, events.ReadOptions{From: 7, Limit: 5, MaxBytes: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(rows(all[7:8]), rows(page)); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
	})
	t.Run("without MaxBytes the count alone bounds", func(t *testing.T) {
		page, err := s.ReadAll(ctx, events.ReadOptions{From: 0, Limit: 30})
		if err != nil || len(page) != 30 || !(events.ReadOptions{Limit: 30}).Full(page) {
			t.Fatalf("%d events, %v", len(page), err)
		}
	})
}

// TestStore_SubscribePagesInBytes: a subscription reads the log in pages
// bounded in bytes (a subscriber whose consumer stalls holds one page, not
// 1,024 events of up to 64 KiB) and still delivers every event once, in
// order, across pages of large events.
func TestStore_SubscribePagesInBytes(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, t.TempDir())
	const n = 60 // 60 × ~60 KB: three pages of 1 MiB
	for i := range n {
		data := fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("y", 60_000))
		if _, err := s.Append(ctx, one("big", events.ExpectAny, ev("Big", data))); err != nil {
			t.Fatal(err)
		}
	}
	errDone := errors.New("done")
	var got []uint64
	err := s.Subscribe(ctx, 0, events.Filter{}, func(e events.Event) error {
		got = append(got, e.Position)
		if len(got) == n {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("subscribe: %v", err)
	}
	want := make([]uint64, n)
	for i := range want {
		want[i] = uint64(i)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
