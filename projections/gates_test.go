package projections_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/projections"
)

// foldAll folds every domain stream of the log with the aggregates' own
// Evolve: the slow, obviously correct reference the read models' light
// folds are checked against.
func foldAll(t *testing.T, log interface {
	ReadAll(context.Context, events.ReadOptions) ([]events.Event, error)
}) aggregates.States {
	t.Helper()
	states := aggregates.States{}
	for from := uint64(0); ; {
		page, err := log.ReadAll(context.Background(), events.ReadOptions{From: from, Limit: events.MaxReadLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return states
		}
		for i := range page {
			e := &page[i]
			st, ok := states[e.Stream]
			if !ok {
				if st, err = aggregates.Initial(e.Stream); err != nil {
					continue // not a domain stream
				}
			}
			if states[e.Stream], err = aggregates.Evolve(st, e); err != nil {
				t.Fatal(err)
			}
		}
		from += uint64(len(page))
	}
}

func rows[T any](t *testing.T, s *projections.Set, name string, at time.Time) []T {
	t.Helper()
	b, _, err := s.Render(name, projections.Query{Time: at})
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Rows []T }
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out.Rows
}

// TestReadModels_MatchTheGates: over every fixture history, the readiness
// matrix equals aggregates.ProviderReadiness of the aggregates' own fold
// (at several times, across the freshness window), approvals their
// Status/Remaining, and the missions board the gates' verification of
// every candidate.
func TestReadModels_MatchTheGates(t *testing.T) {
	log := openStore(t)
	last := fill(t, log)
	s := openSet(t, t.TempDir(), log, nil)
	waitAll(t, s, log.Head().Size)
	states := foldAll(t, log)
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{t0, t0.Add(90 * time.Second), t0.Add(11 * time.Minute), last, t0.Add(40 * 24 * time.Hour)} {
		var want []aggregates.Readiness
		for name, st := range states {
			if p, ok := st.(aggregates.Provider); ok && strings.HasPrefix(name, aggregates.ProviderPrefix) {
				r := aggregates.ProviderReadiness(p, states.Binding(p.BindingID), at, policy())
				want = append(want, r)
			}
		}
		sortBy(want, func(r aggregates.Readiness) string { return r.Provider })
		if len(want) < 10 {
			t.Fatalf("only %d providers in the fixtures", len(want))
		}
		var got []aggregates.Readiness
		for _, r := range rows[projections.ReadinessRow](t, s, "readiness", at) {
			got = append(got, r.Readiness)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("readiness at %s (-gates +projection):\n%s", at, diff)
		}

		type status struct {
			ID        string
			Status    string
			Remaining int
		}
		var wantA, gotA []status
		for name, st := range states {
			if a, ok := st.(aggregates.Approval); ok && strings.HasPrefix(name, aggregates.ApprovalPrefix) {
				wantA = append(wantA, status{strings.TrimPrefix(name, aggregates.ApprovalPrefix), a.Status(at), a.Remaining()})
			}
		}
		sortBy(wantA, func(s status) string { return s.ID })
		for _, r := range rows[projections.ApprovalRow](t, s, "approvals", at) {
			gotA = append(gotA, status{r.ApprovalID, r.Status, r.Remaining})
		}
		if diff := cmp.Diff(wantA, gotA); diff != "" {
			t.Errorf("approvals at %s (-gates +projection):\n%s", at, diff)
		}
	}

	type verified struct {
		Mission, Hash string
		Passing       int
		Passed        bool
	}
	var want, got []verified
	for name, st := range states {
		if m, ok := st.(aggregates.Mission); ok && strings.HasPrefix(name, aggregates.MissionPrefix) {
			for _, c := range m.Candidates {
				v := m.Verification(c.CandidateHash)
				want = append(want, verified{m.ID, c.CandidateHash, v.Passing, v.Passed})
			}
		}
	}
	sortBy(want, func(v verified) string { return v.Mission + "/" + v.Hash })
	for _, r := range rows[projections.MissionRow](t, s, "missions", last) {
		for _, c := range r.Candidates {
			got = append(got, verified{r.MissionID, c.Hash, c.Checks[aggregates.CheckPass], c.Verified})
		}
	}
	sortBy(got, func(v verified) string { return v.Mission + "/" + v.Hash })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verification (-gates +board):\n%s", diff)
	}
}

func sortBy[T any](s []T, key func(T) string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && key(s[j]) < key(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
