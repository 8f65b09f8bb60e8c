package pebblelog_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// TestInspector_ScanEventsSeesEveryKey: the windowed scan of the event key
// space returns exactly what one plain scan returns, whatever is stored
// there: positions far apart, keys of the wrong shape between windows and
// inside them.
func TestInspector_ScanEventsSeesEveryKey(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	for i := range 10 {
		if _, err := s.Append(t.Context(), one("w", events.ExpectAny, ev("W", fmt.Sprintf(`{"i":%d}`, i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: silent{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]byte{
		[]byte("e"),                        // before position 0
		append(pebblelog.EventKey(5), 'x'), // inside a window
		[]byte("e\x00\x01"),                // between windows, after every small position
		pebblelog.EventKey(1 << 40),        // far away
		pebblelog.EventKey(^uint64(0)),     // the last window of the space
	} {
		if err := db.Set(k, []byte("v"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	in, err := pebblelog.OpenInspector(pebblelog.InspectConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	collect := func(scan func(fn func(pebblelog.Entry) error) error) []string {
		var keys []string
		if err := scan(func(e pebblelog.Entry) error {
			keys = append(keys, fmt.Sprintf("%x", e.Key))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return keys
	}
	want := collect(func(fn func(pebblelog.Entry) error) error { return in.Scan(t.Context(), pebblelog.SpaceEvents, fn) })
	if len(want) != 15 {
		t.Fatalf("plain scan found %d keys, want 15", len(want))
	}
	for _, window := range []uint64{1, 3, 4, 1 << 16} {
		got := collect(func(fn func(pebblelog.Entry) error) error { return in.ScanEvents(t.Context(), window, fn) })
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("window %d (-want +got):\n%s", window, diff)
		}
	}
}

// TestInspector_Refusals: a store held by a running node, and a folder
// that holds no store.
func TestInspector_Refusals(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir) // held until the test ends
	if _, err := pebblelog.OpenInspector(pebblelog.InspectConfig{Dir: dir}); !errors.Is(err, pebblelog.ErrLocked) {
		t.Errorf("store held by a node: %v, want ErrLocked", err)
	}
	if _, err := pebblelog.OpenInspector(pebblelog.InspectConfig{Dir: t.TempDir() + "/none"}); !errors.Is(err, events.ErrNotFound) {
		t.Errorf("no store: %v, want ErrNotFound", err)
	}

}

// silent drops Pebble's logs.
type silent struct{}

func (silent) Infof(string, ...any)           {}
func (silent) Errorf(string, ...any)          {}
func (silent) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
