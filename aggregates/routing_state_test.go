package aggregates

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMission_RouteRefusalState: a DecideRoute refusal keeps the precise
// column state docs/GATES.md promises (details.state), at the top when the
// refusal carries one candidate's code and for every candidate in
// details.candidates, as StartAttempt's refusal does. Before issue #15 the
// route's refusal said not_live_proven without saying not_probed or stale.
func TestMission_RouteRefusalState(t *testing.T) {
	cases := []struct {
		name  string
		given []step
		want  map[string]any // the top-level details compared
		cands []map[string]any
	}{
		{
			name:  "declared provider not probed",
			given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), submit(m1, 2, glm)},
			want:  map[string]any{"provider": glm, "column": "activation_ready", "state": StateNotProbed},
			cands: []map[string]any{{"provider": glm, "refusal": CodeNotLiveProven, "column": "activation_ready", "state": StateNotProbed}},
		},
		{
			name: "declared provider whose probe went stale",
			given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""),
				signedProbe(glm, ProbeModels, ProbeOK, glmTag), advance(time.Hour), submit(m1, 2, glm)},
			want:  map[string]any{"provider": glm, "column": "activation_ready", "state": StateStale},
			cands: []map[string]any{{"provider": glm, "refusal": CodeNotLiveProven, "column": "activation_ready", "state": StateStale}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.given(tc.given...)
			_, err := l.decide(&DecideRoute{MissionID: m1})
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("want a refusal, got %v", err)
			}
			got := map[string]any{}
			for k := range tc.want {
				got[k] = r.Details[k]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.cands, r.Details["candidates"]); diff != "" {
				t.Errorf("details.candidates (-want +got):\n%s", diff)
			}
		})
	}
}
