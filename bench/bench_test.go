package bench_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/bench"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// TestRun_WarmUpIsAppendedButNotCounted runs the load against a real store
// and counts, in the store, what the warm-up and the load wrote.
func TestRun_WarmUpIsAppendedButNotCounted(t *testing.T) {
	s, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res := bench.Run(t.Context(), bench.InProcess(s), bench.Config{Writers: 2, EventsPerAppend: 3, Duration: 300 * time.Millisecond, WarmUp: 1050})
	if res.FirstError != "" || res.Errors != 0 {
		t.Fatalf("run failed: %d errors, first %q", res.Errors, res.FirstError)
	}
	if res.Events == 0 {
		t.Fatal("the load appended nothing")
	}
	got := map[string]int{}
	for from := uint64(0); ; {
		page, err := s.ReadAll(t.Context(), events.ReadOptions{From: from, Limit: events.MaxReadLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			kind, _, _ := strings.Cut(e.Stream, "-")
			got[kind+" "+e.Type]++
		}
		from = page[len(page)-1].Position + 1
	}
	// An append still in flight when the duration ends may be written but
	// is not acknowledged in time, so not counted: at most one per writer.
	loaded := got["bench BenchEvent"]
	if loaded < int(res.Events) || loaded > int(res.Events)+2*3 {
		t.Errorf("the store holds %d load events, the run counted %d (at most one append of 3 per writer may be uncounted)", loaded, res.Events)
	}
	got["bench BenchEvent"] = 0
	// 1050 rounds up to whole appends of 100.
	want := map[string]int{"warmup WarmUp": 1100, "bench BenchEvent": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events in the store by stream kind and type (-want +got):\n%s", diff)
	}
	if res.WarmedUp != 1050 {
		t.Errorf("WarmedUp = %d, want 1050", res.WarmedUp)
	}
}

type failing struct{}

func (failing) Append(context.Context, string, []events.Proposed) error {
	return errors.New("refused")
}

func TestRun_WarmUpFailureStopsTheRun(t *testing.T) {
	res := bench.Run(t.Context(), failing{}, bench.Config{Duration: time.Second, WarmUp: 500})
	if res.FirstError != "warm-up: refused" || res.Events != 0 || res.Elapsed != 0 {
		t.Errorf("got first error %q, %d events in %s; want the warm-up's error and no load", res.FirstError, res.Events, res.Elapsed)
	}
}

func TestFsyncRates_LeaveNothingBehind(t *testing.T) {
	dir := t.TempDir()
	for name, rate := range map[string]func(string, time.Duration) (float64, error){
		"append": bench.FsyncRate, "in place": bench.InPlaceFsyncRate,
	} {
		r, err := rate(dir, 50*time.Millisecond)
		if err != nil || r <= 0 {
			t.Errorf("%s: %.0f fsyncs/s, err %v; want a positive rate", name, r, err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left in the folder, want none", len(left))
	}
}
