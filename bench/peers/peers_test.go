package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMain lets the test binary serve as the peers' server processes:
// etcdSystem and natsSystem re-execute os.Executable() with serve-etcd or
// serve-nats, which is this binary under go test.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "serve-") {
		if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testSystems builds greffe once into a temporary folder and returns the
// three single systems and the cluster.
func testSystems(t *testing.T) ([]system, system) {
	t.Helper()
	bin, err := buildGreffe(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	reader, err := greffeReaderNamed("entries")
	if err != nil {
		t.Fatal(err)
	}
	return []system{greffeSystem{bin: bin, reader: reader}, etcdSystem{self: self}, natsSystem{self: self}},
		greffeClusterSystem{bin: bin, reader: reader}
}

// TestPeers_EveryShapeAgainstEverySystem keeps the module from rotting: it
// runs shapes A–E against greffe, etcd and NATS for a second each (shape
// D over a few thousand events) and checks that every run produced a
// positive rate and the table has every ratio.
func TestPeers_EveryShapeAgainstEverySystem(t *testing.T) {
	singles, cluster := testSystems(t)
	st := settings{Rounds: 1, Duration: time.Second, ReadEvents: 3000, Dir: t.TempDir(), Log: t.Output()}
	runs := runShapes(t.Context(), st, shapes(), singles, cluster)
	var got []string
	for _, m := range runs {
		got = append(got, m.Shape+" "+m.System)
		if m.Error != "" || m.EventsPerSec <= 0 || m.Events == 0 {
			t.Errorf("%s", m)
		}
		if m.Shape == "D" && m.Events != uint64(st.ReadEvents) {
			t.Errorf("shape D read %d events from %s, want %d", m.Events, m.System, st.ReadEvents)
		}
	}
	want := []string{"A greffe", "A etcd", "A nats", "B greffe", "B etcd", "B nats", "C greffe", "C etcd", "C nats",
		"D greffe", "D etcd", "D nats", "E greffe-3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("runs by shape and system (-want +got):\n%s", diff)
	}
	rows, failures := summarize(shapes(), []string{"greffe", "etcd", "nats"}, st.ReadEvents, runs)
	if len(failures) > 0 {
		t.Errorf("failures: %q", failures)
	}
	for _, row := range rows {
		if row.Target.Met == nil {
			t.Errorf("shape %s: no ratio against %s (ratios %v)", row.Shape, row.Target.Against, row.Ratios)
		}
	}
	var text bytes.Buffer
	r := report{Header: newHeader(nil, st), Systems: []string{"greffe", "etcd", "nats"}, Shapes: rows, Runs: runs}
	if err := r.writeText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
}

// TestFsyncs_OneSyncPerAcknowledgement is the durability check of the
// README: with one writer and one event per append, each system's server
// calls fsync or fdatasync at least once per acknowledgement. It needs
// strace and the right to ptrace the servers; without them it skips.
func TestFsyncs_OneSyncPerAcknowledgement(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed (apt-get install strace)")
	}
	singles, _ := testSystems(t)
	for _, c := range checkFsyncs(t.Context(), singles, 200, t.TempDir()) {
		t.Logf("%s: %d appends, under load %v, idle %v, %.2f per acknowledgement", c.System, c.Appends, c.Load, c.Idle, c.PerAck)
		switch {
		case errors.Is(c.err, errNotAttached):
			t.Skipf("%s: %s", c.System, c.Error)
		case c.Error != "":
			t.Errorf("%s: %s", c.System, c.Error)
		case c.PerAck < 1:
			t.Errorf("%s: %.2f fsyncs per acknowledgement, want at least 1 (load %v)", c.System, c.PerAck, c.Load)
		}
	}
}

func TestParseStraceSummary(t *testing.T) {
	tests := []struct {
		name, in string
		want     map[string]int
	}{
		{
			name: "both, one with errors",
			in: `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 90.00    0.412345         206      2001           fdatasync
 10.00    0.012345          12        12         3 fsync
------ ----------- ----------- --------- --------- ----------------
100.00    0.424690         210      2013         3 total
`,
			want: map[string]int{"fdatasync": 2001, "fsync": 12},
		},
		{
			name: "no calls",
			in: `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
  0.00    0.000000           0         0           total
`,
			want: map[string]int{"fdatasync": 0, "fsync": 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStraceSummary(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummarize_MediansRangesRatiosTargets(t *testing.T) {
	runs := []measurement{
		{Round: 1, Shape: "A", System: "greffe", EventsPerSec: 100},
		{Round: 2, Shape: "A", System: "greffe", EventsPerSec: 300},
		{Round: 3, Shape: "A", System: "greffe", EventsPerSec: 200},
		{Round: 1, Shape: "A", System: "etcd", EventsPerSec: 150},
		{Round: 2, Shape: "A", System: "etcd", EventsPerSec: 250},
		{Round: 3, Shape: "A", System: "etcd", Error: "start: boom"},
		{Round: 1, Shape: "C", System: "greffe", EventsPerSec: 1000},
		{Round: 1, Shape: "E", System: "greffe-3", EventsPerSec: 700},
	}
	shs := shapes()
	rows, failures := summarize([]shape{shs[0], shs[2], shs[4]}, []string{"greffe", "etcd"}, 10, runs)
	if len(failures) != 1 || !strings.Contains(failures[0], "boom") {
		t.Errorf("failures = %q, want the one failed run", failures)
	}
	yes := true
	want := []shapeRow{
		{Shape: "A", What: "1 writer × 1 event",
			Results: map[string]summary{
				"greffe": {Median: 200, Min: 100, Max: 300, Rates: []float64{100, 300, 200}},
				"etcd":   {Median: 200, Min: 150, Max: 250, Rates: []float64{150, 250}, Failed: 1},
			},
			Ratios: map[string]float64{"etcd": 1},
			Target: target{Against: "etcd", Min: 1, Ratio: 1, Met: &yes}},
		{Shape: "C", What: "16 writers × 100 events",
			Results: map[string]summary{"greffe": {Median: 1000, Min: 1000, Max: 1000, Rates: []float64{1000}}},
			Ratios:  map[string]float64{},
			Target:  target{Against: "etcd", Min: 1.5}},
		{Shape: "E", What: "3 greffe nodes, C at the leader",
			Results: map[string]summary{"greffe-3": {Median: 700, Min: 700, Max: 700, Rates: []float64{700}}},
			Ratios:  map[string]float64{againstOneNode: 0.7},
			Target:  target{Against: againstOneNode, Min: 0.6, Ratio: 0.7, Met: &yes}},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999.4: "999", 1000: "1,000", 1234567.8: "1,234,568"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}
