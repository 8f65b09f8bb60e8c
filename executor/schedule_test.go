package executor_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// TestExecutor_ProbeSchedule: an operator approves a schedule for a
// provider on the executor's host; the executor asks for each due probe
// and runs it, so the provider's probes are recorded one interval apart,
// each the schedule's own; when the runtime stops answering, the next
// scheduled probe records it unreachable. A schedule of another host is
// never asked for by this executor.
func TestExecutor_ProbeSchedule(t *testing.T) {
	pol := aggregates.DefaultPolicy()
	pol.ProbeSchedule.MinInterval = aggregates.D(100 * time.Millisecond)
	h := newHarness(t, &pol, "absent")
	runtime := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `{"object":"list","data":[{"id":"qwen3:8b","object":"model","owned_by":"library"}]}`)
	}))
	defer runtime.Close()
	for _, name := range []string{"sched", "elsewhere"} {
		h.must("DeclareProvider", aggregates.DeclareProvider{Name: aggregates.ID(name), Kind: aggregates.KindLocal, Profile: "local_ollama",
			Endpoint: aggregates.OptionalLongText(runtime.URL + "/v1"), ModelTag: "qwen3:8b", Capabilities: []string{"chat"}, TaskClasses: []string{"code"}})
	}
	key := h.register("gpu1")
	h.start(h.config("gpu1", key))
	const interval = 300 * time.Millisecond
	h.must("ApproveProbeSchedule", aggregates.ApproveProbeSchedule{Provider: "elsewhere", Host: "spark-9", Kind: aggregates.ProbeModels,
		Interval: aggregates.PositiveDuration(aggregates.D(interval)), Timeout: aggregates.PositiveDuration(aggregates.D(200 * time.Millisecond)), Approver: "owner"})
	h.must("ApproveProbeSchedule", aggregates.ApproveProbeSchedule{Provider: "sched", Host: host, Kind: aggregates.ProbeModels,
		Interval: aggregates.PositiveDuration(aggregates.D(interval)), Timeout: aggregates.PositiveDuration(aggregates.D(200 * time.Millisecond)), Approver: "owner"})

	probe := func(e events.Event) aggregates.ProbeRecorded {
		var d aggregates.ProbeRecorded
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	var seen []aggregates.ProbeRecorded
	h.waitEvent(aggregates.ProviderStream("sched"), aggregates.TypeProbeRecorded, func(e events.Event) bool {
		seen = append(seen, probe(e))
		return len(seen) == 2
	})
	for _, p := range seen {
		if p.Outcome != aggregates.ProbeOK || !p.ExactTagListed || p.ObservedBy != "gpu1" || p.MeasurementID == "" {
			t.Errorf("a scheduled probe: %+v", p)
		}
	}
	if gap := seen[1].At.Sub(seen[0].At); gap < interval {
		t.Errorf("two scheduled probes %s apart; the interval is %s", gap, interval)
	}
	runtime.Close()
	h.waitEvent(aggregates.ProviderStream("sched"), aggregates.TypeProbeRecorded, func(e events.Event) bool {
		return probe(e).Outcome == aggregates.ProbeUnreachable
	})
	// The other host's schedule was never asked for by this executor.
	evs, err := h.c.ReadStream(t.Context(), aggregates.ProviderStream("elsewhere"), events.ReadOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Events {
		if e.Type == aggregates.TypeScheduledProbeRequested || e.Type == aggregates.TypeProbeRecorded {
			t.Errorf("another host's schedule ran here: %s %s", e.Type, e.Data)
		}
	}
}
