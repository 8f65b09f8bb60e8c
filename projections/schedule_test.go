package projections_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/projections"
)

// TestReadiness_Schedule: a provider probed by its standing schedule, then
// left by it. At every time the matrix equals ProviderReadiness of the
// aggregates' own fold (schedule included), the row's schedule summary
// says when the schedule was missed, and the live projection equals the
// one rebuilt from position 0.
func TestReadiness_Schedule(t *testing.T) {
	log := openStore(t)
	t0 := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	clock := commands.NewManualClock(t0)
	pol := policy()
	h, err := commands.New(commands.Config{Log: log, Clock: clock.Now, SetClock: clock.Set, Policy: &pol})
	if err != nil {
		t.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	const endpoint, tag = "http://127.0.0.1:11434/v1", "qwen3:8b"
	do := func(name string, data any) {
		t.Helper()
		b, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Handle(context.Background(), commands.Request{Command: name, ID: uuid.NewString(), Principal: aggregates.Anonymous, Data: b}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	do("DeclareProvider", map[string]any{"name": "ollama", "kind": "local", "profile": "local_ollama", "endpoint": endpoint, "model_tag": tag,
		"capabilities": []string{"chat"}, "task_classes": []string{"code"}})
	do("DeclareProviderLimits", map[string]any{"name": "ollama", "context_tokens": 8192, "output_tokens": 1024})
	do("GrantApproval", map[string]any{"approval_id": "act", "approver": "owner", "action": "activation", "subject": "provider-ollama", "uses": 1, "expires_at": t0.Add(time.Hour)})
	do("ActivateProvider", map[string]any{"name": "ollama", "approval_id": "act"})
	do("GrantApproval", map[string]any{"approval_id": "reg", "approver": "owner", "action": "activation", "subject": "executor-x1", "uses": 1, "expires_at": t0.Add(time.Hour)})
	do("RegisterExecutorKey", map[string]any{"executor_id": "x1", "host": "h1", "public_key": []byte(key.Public().(ed25519.PublicKey)), "approval_id": "reg"})
	do("ApproveProbeSchedule", map[string]any{"provider": "ollama", "host": "h1", "kind": "models", "interval": "1m", "timeout": "5s", "approver": "owner"})
	slot := func(id string) {
		t.Helper()
		do("RequestScheduledProbe", map[string]any{"provider": "ollama", "executor_id": "x1", "measurement_id": id})
		do("ClaimMeasurement", map[string]any{"measurement_id": id, "executor_id": "x1", "lease_until": clock.Now().Add(10 * time.Second)})
		now := clock.Now()
		r := aggregates.MeasurementResult{MeasurementID: id, ExecutorID: "x1", Host: "h1", Argv: []string{"models", endpoint},
			StartedAt: now, EndedAt: now, Outcome: aggregates.ResultCompleted, // not before its request
			Probe: &aggregates.ProbeReading{Kind: "models", Endpoint: endpoint, Outcome: "ok", Models: []string{tag}, Latency: aggregates.NonNegativeDuration(aggregates.D(time.Millisecond))}}
		payload, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		env, err := events.SignData(context.Background(), aggregates.MeasurementPayloadType, payload, key)
		if err != nil {
			t.Fatal(err)
		}
		do("RecordMeasurement", map[string]any{"measurement_id": id, "executor_id": "x1", "payload": payload, "envelope": env})
	}
	slot("s1")
	clock.Advance(time.Minute)
	slot("s2")
	ranAt := clock.Now()

	s := openSet(t, t.TempDir(), log, nil)
	waitAll(t, s, log.Head().Size)
	states := foldAll(t, log)
	p := states.Provider("ollama")
	if p.Schedule == nil || p.Schedule.Seq != 2 || !p.Schedule.LastRanAt.Equal(ranAt) {
		t.Fatalf("the aggregate's schedule: %+v", p.Schedule)
	}
	for _, tc := range []struct {
		at     time.Time
		state  string
		missed bool
	}{
		{ranAt, aggregates.ReadyLiveProven, false},
		{ranAt.Add(2*time.Minute + 4*time.Second), aggregates.ReadyLiveProven, false},
		{ranAt.Add(2*time.Minute + 5*time.Second), aggregates.StateStale, true},
		{ranAt.Add(time.Hour), aggregates.StateStale, true},
	} {
		want := aggregates.ProviderReadiness(p, aggregates.Binding{}, tc.at, policy())
		got := rows[projections.ReadinessRow](t, s, "readiness", tc.at)
		if len(got) != 1 {
			t.Fatalf("%d rows", len(got))
		}
		if diff := cmp.Diff(want, got[0].Readiness); diff != "" {
			t.Errorf("readiness at %s (-gates +projection):\n%s", tc.at, diff)
		}
		if got[0].LiveProven.State != tc.state {
			t.Errorf("at %s: live %s (%s), want %s", tc.at, got[0].LiveProven.State, got[0].LiveProven.Reason, tc.state)
		}
		sc := got[0].Schedule
		if sc == nil || !sc.Active || sc.Host != "h1" || (sc.MissedSince != nil) != tc.missed {
			t.Errorf("at %s: schedule %+v, want missed %v", tc.at, sc, tc.missed)
		}
		if tc.missed && (!sc.MissedSince.Equal(ranAt.Add(time.Minute)) || !strings.Contains(got[0].LiveProven.Reason, "probe schedule missed since "+ranAt.Add(time.Minute).Format(time.RFC3339))) {
			t.Errorf("at %s: missed since %v, reason %q", tc.at, sc.MissedSince, got[0].LiveProven.Reason)
		}
	}
	liveEqualsRebuilt(t, s, log, ranAt.Add(time.Hour))
}
