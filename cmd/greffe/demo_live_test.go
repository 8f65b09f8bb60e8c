package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/projections"
)

// demoRun is one greffe demo running in the test.
type demoRun struct {
	t      *testing.T
	out    *syncBuffer
	url    string
	cancel context.CancelFunc
	done   chan error
}

func startDemo(t *testing.T, data string, interval time.Duration) *demoRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	d := &demoRun{t: t, out: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	urlc := make(chan string, 1)
	go func() {
		d.done <- runDemo(ctx, demoConfig{Data: data, Addr: "127.0.0.1:0", ProbeInterval: interval}, d.out, func(u string) { urlc <- u })
	}()
	select {
	case d.url = <-urlc:
	case err := <-d.done:
		t.Fatalf("demo ended before serving: %v\n%s", err, d.out.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("demo not serving within 2 minutes:\n%s", d.out.String())
	}
	return d
}

func (d *demoRun) stop() {
	d.t.Helper()
	d.cancel()
	select {
	case err := <-d.done:
		if err != nil {
			d.t.Fatalf("demo: %v", err)
		}
	case <-time.After(30 * time.Second):
		d.t.Fatal("the demo did not stop within 30s")
	}
}

// waitRows polls the matrix (the demo is an external process to the
// test: polling, bounded) until ok accepts its rows.
func waitRows(t *testing.T, c *client.Client, what string, ok func(map[string]projections.ReadinessRow) bool) map[string]projections.ReadinessRow {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var rows map[string]projections.ReadinessRow
	for time.Now().Before(deadline) {
		var err error
		if rows, err = readinessRows(t.Context(), c, ""); err == nil && ok(rows) {
			return rows
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := json.MarshalIndent(rows, "", " ")
	t.Fatalf("%s: not within 20s; rows:\n%s", what, b)
	return nil
}

// TestDemo_Lives runs greffe demo with short probe intervals: the Ollama
// stand-in's providers turn activation-ready from their scheduled probes,
// the llama.cpp stand-in's stays not live (it lists an alias only), the
// seeds' providers stay without a schedule (history); stopping the Ollama
// stand-in turns its rows red at the next probe. A second demo on the same
// folder starts its clock at the ledger's last recorded time, never
// before: nothing it appends is stamped earlier than what is stored.
func TestDemo_Lives(t *testing.T) {
	data := filepath.Join(t.TempDir(), "demo")
	d := startDemo(t, data, 300*time.Millisecond)
	out := d.out.String()
	for _, want := range []string{"stand-in runtime ollama", "stand-in runtime llama.cpp", "executor demo-gpu on host demo-host",
		"probe schedules: live-qwen3, live-llama3, live-llamacpp", "its host policy ", "history (the seeds' providers", "greffe matrix --server " + d.url} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	c := client.New(d.url, "")
	rows := waitRows(t, c, "live rows green, the alias row not live", func(r map[string]projections.ReadinessRow) bool {
		return r["live-qwen3"].ActivationReady.Ready && r["live-llama3"].ActivationReady.Ready &&
			r["live-llamacpp"].LiveProven.State == aggregates.CodeAliasNotExact
	})
	if s := rows["live-qwen3"].Schedule; s == nil || !s.Active || s.Host != demoHost || s.LastRanAt == nil {
		t.Errorf("live-qwen3's schedule: %+v", s)
	}
	if r, ok := rows["glm-local"]; !ok || r.Schedule != nil || r.LiveProven.Ready {
		t.Errorf("the seeds' glm-local should stay, without a schedule, not live now: %+v", r)
	}
	// The demo's executor probes its stand-ins and runs nothing (issue
	// #20): a writer's run on its host is answered refused_by_host.
	executorCommand(t, c, "RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: "demo-shell", Host: demoHost, Kind: aggregates.MeasurementRun,
		Argv: []string{"/bin/sh", "-c", "id"}, Timeout: aggregates.PositiveDuration(aggregates.D(10 * time.Second)), OutputCapBytes: 1024})
	executorWaitFor(t, c, "measurement-demo-shell", aggregates.TypeMeasurementRecorded)
	page, err := c.ReadStream(t.Context(), "measurement-demo-shell", events.ReadOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var res aggregates.MeasurementResult
	if err := json.Unmarshal(page.Events[len(page.Events)-1].Data, &res); err != nil || res.Outcome != "refused_by_host" || res.StdoutExcerpt != "" {
		t.Errorf("a run on the demo's host: %+v %v", res, err)
	}
	stop := regexp.MustCompile(`curl -X POST (http://127\.0\.0\.1:\d+/demo/stop)`).FindStringSubmatch(out)
	if stop == nil {
		t.Fatalf("no stop command in the output:\n%s", out)
	}
	resp, err := http.Post(stop[1], "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitRows(t, c, "the stopped stand-in's rows red", func(r map[string]projections.ReadinessRow) bool {
		return r["live-qwen3"].LiveProven.State == aggregates.StateProbeUnreach && !r["live-qwen3"].ActivationReady.Ready &&
			r["live-llama3"].LiveProven.State == aggregates.StateProbeUnreach
	})
	// The newest event the first run stored, and when.
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	d.stop()

	lastRecorded := info.Head.RecordedAt.UTC()
	firstHead := info.Head.Size
	d2 := startDemo(t, data, 300*time.Millisecond)
	defer d2.stop()
	if !strings.Contains(d2.out.String(), "the histories are not applied again") {
		t.Errorf("the second run applied the histories again:\n%s", d2.out.String())
	}
	c2 := client.New(d2.url, "")
	// The second run probes again: wait for its first new scheduled probe.
	waitRows(t, c2, "a scheduled probe of the second run", func(r map[string]projections.ReadinessRow) bool {
		return r["live-llama3"].ActivationReady.Ready
	})
	page, err = c2.ReadAll(t.Context(), events.ReadOptions{From: firstHead, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) == 0 {
		t.Fatal("the second run appended nothing")
	}
	for _, e := range page.Events {
		var at struct {
			At time.Time `json:"at"`
		}
		_ = json.Unmarshal(e.Data, &at)
		if e.RecordedAt.Before(lastRecorded) || !at.At.IsZero() && at.At.Before(lastRecorded) {
			t.Errorf("%s at position %d: recorded %s, at %s; the first run's last event was recorded at %s",
				e.Type, e.Position, e.RecordedAt, at.At, lastRecorded)
		}
	}
}
