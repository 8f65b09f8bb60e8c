package pebblelog_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// earlierFormats are the format strings of stores written before the
// store's own write-ahead log and before stream-index runs (layout).
var earlierFormats = []string{
	"greffe-ledger/1 event-format=1 hash=sha256 tree=rfc6962",
	"greffe-ledger/2 event-format=1 hash=sha256 tree=rfc6962 log=greffe-wal",
}

func recordedFormat(t *testing.T, dir string) string {
	t.Helper()
	in, err := inspect.Open(inspect.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	m := in.Meta()
	if m.FormatErr != nil {
		t.Fatal(m.FormatErr)
	}
	return m.Format
}

// A store of an earlier format (its stream index holds runs of one event)
// is opened and upgraded, so that binaries of that time, which would miss
// the records only in greffe-wal/ or read a run as one event, refuse it from
// then on; its events are untouched and its streams read as before.
func TestStore_EarlierFormatsAreUpgraded(t *testing.T) {
	for _, format := range earlierFormats {
		t.Run(format, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			s, _ := openStore(t, dir)
			// One event per append: the stream index is one key per event, as
			// the earlier formats wrote it.
			for range 3 {
				if _, err := s.Append(ctx, one("legacy", events.ExpectAny, ev("A", `{"n":1}`))); err != nil {
					t.Fatal(err)
				}
			}
			head := s.Head()
			want, err := s.ReadAll(ctx, events.ReadOptions{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := pebblelog.SetFormat(dir, format); err != nil {
				t.Fatal(err)
			}
			if got := recordedFormat(t, dir); got != format || !layout.Known(got) {
				t.Fatalf("format before reopen %q (known %v)", got, layout.Known(got))
			}

			s2, _ := openStore(t, dir)
			if s2.Head() != head {
				t.Fatalf("head after upgrade %+v, want %+v", s2.Head(), head)
			}
			got, err := s2.ReadAll(ctx, events.ReadOptions{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("events after upgrade (-before +after):\n%s", diff)
			}
			back, err := s2.ReadStream(ctx, "legacy", events.ReadOptions{From: 1, Limit: 10, Direction: events.Backward})
			if err != nil || len(back) != 2 || back[0].Position != want[1].Position || back[1].Position != want[0].Position {
				t.Fatalf("stream read backward after upgrade: %d events, err %v", len(back), err)
			}
			if _, err := s2.Append(ctx, one("legacy", events.ExpectVersion(2), ev("A", `{}`), ev("B", `{}`))); err != nil {
				t.Fatalf("append at the stream's version after upgrade: %v", err)
			}
			if err := s2.Close(); err != nil {
				t.Fatal(err)
			}
			if got := recordedFormat(t, dir); got != layout.StoreFormat {
				t.Fatalf("format after upgrade %q, want %q", got, layout.StoreFormat)
			}
		})
	}
}

// A format this binary does not know is refused and left as it is.
func TestStore_UnknownFormatRefused(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const future = "greffe-ledger/9 event-format=3 hash=sha256 tree=rfc6962"
	if err := pebblelog.SetFormat(dir, future); err != nil {
		t.Fatal(err)
	}
	_, err := pebblelog.Open(pebblelog.Config{Dir: dir, LedgerID: testLedger, CheckpointInterval: -1})
	if !errors.Is(err, pebblelog.ErrIncompatible) {
		t.Fatalf("open of format %q: err = %v, want ErrIncompatible", future, err)
	}
	if got := recordedFormat(t, dir); got != future || layout.Known(got) {
		t.Fatalf("format after refusal %q (known %v), want %q unchanged and unknown", got, layout.Known(got), future)
	}
}
