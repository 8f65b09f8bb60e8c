package pebblelog_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// formatBeforeLog is the format string stores held before the store's own
// write-ahead log (keys.go).
const formatBeforeLog = "greffe-ledger/1 event-format=1 hash=sha256 tree=rfc6962"

func recordedFormat(t *testing.T, dir string) string {
	t.Helper()
	in, err := pebblelog.OpenInspector(pebblelog.InspectConfig{Dir: dir})
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

// A store written before the store's own log is opened and upgraded, so
// that binaries of that time, which would miss the records only in
// greffe-wal/, refuse it from then on; its events are untouched.
func TestStore_FormatBeforeTheLogIsUpgraded(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	if _, err := s.Append(ctx, one("legacy", events.ExpectNoStream, ev("A", `{"n":1}`), ev("B", `{"n":2}`))); err != nil {
		t.Fatal(err)
	}
	head := s.Head()
	want, err := s.ReadAll(ctx, events.ReadOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pebblelog.SetFormat(dir, formatBeforeLog); err != nil {
		t.Fatal(err)
	}
	if got := recordedFormat(t, dir); got != formatBeforeLog || !pebblelog.KnownFormat(got) {
		t.Fatalf("format before reopen %q (known %v)", got, pebblelog.KnownFormat(got))
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
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := recordedFormat(t, dir); got != pebblelog.StoreFormat {
		t.Fatalf("format after upgrade %q, want %q", got, pebblelog.StoreFormat)
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
	if got := recordedFormat(t, dir); got != future || pebblelog.KnownFormat(got) {
		t.Fatalf("format after refusal %q (known %v), want %q unchanged and unknown", got, pebblelog.KnownFormat(got), future)
	}
}
