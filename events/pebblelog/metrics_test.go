package pebblelog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
)

// TestHistograms_Buckets places values at and around bucket bounds: a
// bound is inclusive (Prometheus's "le"), anything past the last bound is
// counted in +Inf.
func TestHistograms_Buckets(t *testing.T) {
	sizes := []struct {
		n      int
		bucket int
	}{
		{0, 0}, {1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {8192, 13}, {8193, 14}, {1 << 20, 14},
	}
	for _, tc := range sizes {
		var h sizeHistogram
		h.observe(tc.n)
		s := h.snapshot()
		want := make([]uint64, batchBuckets+1)
		want[tc.bucket] = 1
		if d := cmp.Diff(want, s.Counts); d != "" || s.Count != 1 || s.Sum != float64(tc.n) {
			t.Errorf("batch of %d: count %d sum %v, buckets (-want +got):\n%s", tc.n, s.Count, s.Sum, d)
		}
	}
	latencies := []struct {
		d      time.Duration
		bucket int
	}{
		{0, 0}, {50 * time.Microsecond, 0}, {51 * time.Microsecond, 1}, {time.Millisecond, 4},
		{3 * time.Millisecond, 6}, {10 * time.Second, len(latencyBounds) - 1}, {time.Minute, len(latencyBounds)},
	}
	for _, tc := range latencies {
		var h latencyHistogram
		h.observe(tc.d)
		s := h.snapshot()
		want := make([]uint64, len(latencyBounds)+1)
		want[tc.bucket] = 1
		if d := cmp.Diff(want, s.Counts); d != "" || s.Count != 1 || s.Sum != tc.d.Seconds() {
			t.Errorf("latency %s: count %d sum %v, buckets (-want +got):\n%s", tc.d, s.Count, s.Sum, d)
		}
	}
}

// TestStore_Histograms: every append is timed, every committed batch
// counted with its events and its fsync; a duplicate batch writes nothing
// and is counted as a batch of 0.
func TestStore_Histograms(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := events.AppendRequest{Streams: []events.StreamAppend{{Stream: "orders-1", Expected: events.ExpectAny,
		Events: []events.Proposed{{ID: [16]byte{1}, Type: "A", Data: []byte(`{}`), Metadata: []byte(`{}`)}, {ID: [16]byte{2}, Type: "B", Data: []byte(`{}`), Metadata: []byte(`{}`)}}}}}
	for range 2 { // the second is a duplicate
		if _, err := s.Append(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	h := s.Histograms()
	type counts struct {
		Appends, Batches, Fsyncs uint64
		Events                   float64
	}
	got := counts{h.Append.Count, h.BatchEvents.Count, h.Fsync.Count, h.BatchEvents.Sum}
	if d := cmp.Diff(counts{Appends: 2, Batches: 2, Fsyncs: 2, Events: 2}, got); d != "" {
		t.Errorf("histograms (-want +got):\n%s", d)
	}
	// The events are in the write-ahead log only (nothing flushed yet):
	// the usage counts its segment files.
	var walBytes int64
	files, err := os.ReadDir(filepath.Join(dir, "greffe-wal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		fi, err := f.Info()
		if err != nil {
			t.Fatal(err)
		}
		walBytes += fi.Size()
	}
	tables := s.db.Metrics().DiskSpaceUsage()
	if u := s.DiskUsage(); walBytes == 0 || u < tables+uint64(walBytes) {
		t.Errorf("DiskUsage %d with %d bytes of Pebble files and %d of log segments; want both counted", u, tables, walBytes)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if u := s.DiskUsage(); u != 0 {
		t.Errorf("DiskUsage after Close: %d", u)
	}
}
