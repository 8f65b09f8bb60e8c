package projections_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/projections/pebblestore"
)

func openSet(t testing.TB, dir string, src projections.Source, mod func(*projections.Config)) *projections.Set {
	t.Helper()
	rows, err := pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := projections.Config{Store: rows, Source: src, LedgerID: "ledger-a", Env: projections.Env{Policy: policy()}}
	if mod != nil {
		mod(&cfg)
	}
	s, err := projections.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func waitAll(t testing.TB, s *projections.Set, pos uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range projections.Names() {
		if err := s.WaitFor(ctx, n, pos); err != nil {
			t.Fatal(err)
		}
	}
}

// liveEqualsRebuilt compares every live projection with the one replayed
// from position 0, byte for byte.
func liveEqualsRebuilt(t *testing.T, s *projections.Set, log projections.Reader, at time.Time) {
	t.Helper()
	q := projections.Query{Time: at}
	var targets []projections.Target
	live := map[string][]byte{}
	for _, n := range projections.Names() {
		b, pos, err := s.Render(n, q)
		if err != nil {
			t.Fatal(err)
		}
		live[n] = b
		targets = append(targets, projections.Target{Name: n, Upto: pos})
	}
	snaps, err := projections.Rebuild(context.Background(), log, s.Env(), targets)
	if err != nil {
		t.Fatal(err)
	}
	for _, snap := range snaps {
		b, err := snap.Render(q)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(live[snap.Spec.Name], b) {
			t.Errorf("%s: live and rebuilt differ:\nlive    %s\nrebuilt %s", snap.Spec.Name, live[snap.Spec.Name], b)
		}
	}
}

// TestSet_ExactlyOnceAcrossRestarts stops the runners at several points of
// their catch-up (with small and large commit batches), restarts them on
// the same rows, and requires the result to equal a rebuild from position
// 0 byte for byte: no event folded twice, none skipped.
func TestSet_ExactlyOnceAcrossRestarts(t *testing.T) {
	log := openStore(t)
	at := fill(t, log)
	head := log.Head().Size
	for _, tc := range []struct {
		commitEvery int
		stops       []uint64
	}{
		{1, []uint64{1, 2}},
		{7, []uint64{33, 34, head / 2}},
		{4096, []uint64{head - 1}},
	} {
		t.Run(fmt.Sprintf("commit_every=%d", tc.commitEvery), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "projections")
			for _, stop := range tc.stops {
				s := openSet(t, dir, stutter{log, stop}, func(c *projections.Config) { c.CommitEvery = tc.commitEvery })
				waitAll(t, s, stop)
				for _, st := range s.Status() {
					if st.Position != stop || st.Lag != head-stop {
						t.Errorf("%s stopped at %d (lag %d), want %d (lag %d)", st.Name, st.Position, st.Lag, stop, head-stop)
					}
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			s := openSet(t, dir, log, func(c *projections.Config) { c.CommitEvery = tc.commitEvery })
			waitAll(t, s, head)
			liveEqualsRebuilt(t, s, log, at)
		})
	}
}

// TestSet_ResumesFromItsCheckpoint: a reopened (passive) set holds the rows
// and position it stored; rows of another ledger or model version are
// dropped and folded again from 0.
func TestSet_ResumesFromItsCheckpoint(t *testing.T) {
	log := openStore(t)
	fill(t, log)
	head := log.Head().Size
	dir := filepath.Join(t.TempDir(), "projections")
	s := openSet(t, dir, log, nil)
	waitAll(t, s, head)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	positions := func(s *projections.Set) []uint64 {
		var out []uint64
		for _, st := range s.Status() {
			out = append(out, st.Committed)
		}
		return out
	}
	same := openSet(t, dir, log, func(c *projections.Config) { c.Passive = true })
	want := make([]uint64, len(projections.Names()))
	for i := range want {
		want[i] = head
	}
	if diff := cmp.Diff(want, positions(same)); diff != "" {
		t.Errorf("reopened positions (-want +got):\n%s", diff)
	}
	_ = same.Close()
	other := openSet(t, dir, log, func(c *projections.Config) { c.Passive, c.LedgerID = true, "ledger-b" })
	if diff := cmp.Diff(make([]uint64, len(want)), positions(other)); diff != "" {
		t.Errorf("rows of another ledger kept (-want +got):\n%s", diff)
	}
}

// TestSet_RenderAt: a projection as of a past position is the replay of
// that prefix; the readiness of the alias history moves from a stated
// probe (which proves nothing) to alias to live to stale with positions
// and times.
func TestSet_RenderAt(t *testing.T) {
	log := openStore(t)
	fill(t, log)
	head := log.Head().Size
	s := openSet(t, t.TempDir(), log, nil)
	waitAll(t, s, head)
	ctx := context.Background()
	// The alias history is the fifth: it starts at 09:00 + 4·2h.
	t0 := time.Date(2026, 3, 1, 17, 0, 0, 0, time.UTC)
	// Its probes: one a writer stated, then the executor's signed alias
	// probe, then its signed probe of the exact tag.
	var probes []uint64
	all, err := log.ReadAll(ctx, events.ReadOptions{Limit: events.MaxReadLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if e.Stream == "provider-alias-local" && e.Type == aggregates.TypeProbeRecorded {
			probes = append(probes, e.Position+1)
		}
	}
	if len(probes) != 3 {
		t.Fatalf("the alias history has %d probes, want 3", len(probes))
	}
	statedPos, aliasPos, exactPos := probes[0], probes[1], probes[2]
	state := func(upto uint64, at time.Time) string {
		b, err := s.RenderAt(ctx, "readiness", upto, projections.Query{Time: at, Key: "alias-local"})
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Position uint64
			Rows     []projections.ReadinessRow
		}
		if err := json.Unmarshal(b, &out); err != nil || out.Position != upto || len(out.Rows) != 1 {
			t.Fatalf("as of %d: %s (%v)", upto, b, err)
		}
		return out.Rows[0].LiveProven.State
	}
	got := []string{state(statedPos-1, t0.Add(time.Hour)), state(statedPos, t0.Add(time.Minute)), state(aliasPos, t0.Add(time.Minute)),
		state(exactPos, t0.Add(3*time.Minute)), state(exactPos, t0.Add(time.Hour))}
	want := []string{aggregates.StateNotProbed, aggregates.StateProbeUnsigned, aggregates.CodeAliasNotExact, aggregates.ReadyLiveProven, aggregates.StateStale}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("live_proven as of positions (-want +got):\n%s", diff)
	}
	if _, err := s.RenderAt(ctx, "readiness", head+1, projections.Query{}); events.CodeOf(err) != projections.CodePositionBeyondHead {
		t.Errorf("beyond the head: %v", err)
	}
	if _, err := s.RenderAt(ctx, "nope", 1, projections.Query{}); events.CodeOf(err) != projections.CodeUnknownProjection {
		t.Errorf("unknown projection: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := s.WaitFor(wctx, "missions", head+1); events.CodeOf(err) != projections.CodeProjectionLagging {
		t.Errorf("waiting past the head: %v", err)
	}
}

// TestSet_FoldFailure: a domain event a model cannot fold (a check of a
// candidate its mission never produced, forged by a raw append) stops that
// projection with projection_failed; the others carry on.
func TestSet_FoldFailure(t *testing.T) {
	log := openStore(t)
	data := `{"mission_id":"m","candidate_hash":"` + strings.Repeat("a", 64) + `","check_id":"c01","outcome":"pass","runner_kind":"independent"}`
	if _, err := log.Append(context.Background(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: "mission-m", Events: []events.Proposed{{
		ID: uuid.New(), Type: aggregates.TypeCheckRecorded, Data: json.RawMessage(data), Metadata: json.RawMessage(`{}`), CorrelationID: "x"}}}}}); err != nil {
		t.Fatal(err)
	}
	s := openSet(t, t.TempDir(), log, nil)
	waitAll(t, s, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, "missions", 1); events.CodeOf(err) != projections.CodeProjectionFailed {
		t.Fatalf("missions: %v", err)
	}
	if err := s.WaitFor(ctx, "audit", 1); err != nil {
		t.Fatalf("audit: %v", err)
	}
	_, _, err := s.Render("missions", projections.Query{})
	var fe *projections.FailedError
	if !errors.As(err, &fe) {
		t.Fatalf("render of a failed projection: %v", err)
	}
	for _, st := range s.Status() {
		if (st.Error != "") != (st.Name == "missions") {
			t.Errorf("%s: error %q", st.Name, st.Error)
		}
	}
}

var _ projections.Source = (*pebblelog.Store)(nil)

// TestSet_RenderAtRoute: asked at the position a RouteDecided read its
// grounds at, with no time, the readiness matrix is judged at the time of
// the event at that position (the route's own): every candidate's four
// columns are what the route recorded, so an auditor sees what was known
// when it was decided (issue #15; before, the node's clock judged it, and a
// route's live_proven showed stale). time=T still overrides.
func TestSet_RenderAtRoute(t *testing.T) {
	log := openStore(t)
	fill(t, log)
	head := log.Head().Size
	later := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) // long after every probe
	s := openSet(t, t.TempDir(), log, func(c *projections.Config) { c.Clock = func() time.Time { return later } })
	waitAll(t, s, head)
	ctx := context.Background()
	all, err := log.ReadAll(ctx, events.ReadOptions{Limit: events.MaxReadLimit})
	if err != nil {
		t.Fatal(err)
	}
	type cols struct{ Config, Eligible, Live, Activation string }
	colsOf := func(r aggregates.Readiness) cols {
		return cols{r.ConfigurationReady.State, r.EligibleForAttempt.State, r.LiveProven.State, r.ActivationReady.State}
	}
	render := func(upto uint64, q projections.Query) map[string]cols {
		b, err := s.RenderAt(ctx, "readiness", upto, q)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Rows []projections.ReadinessRow }
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		m := map[string]cols{}
		for _, r := range out.Rows {
			m[r.Key] = colsOf(r.Readiness)
		}
		return m
	}
	routes, live := 0, 0
	for _, e := range all {
		if e.Type != aggregates.TypeRouteDecided {
			continue
		}
		var d aggregates.RouteDecided
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		routes++
		got := render(d.ReadPosition, projections.Query{})
		for _, c := range d.Candidates {
			if diff := cmp.Diff(colsOf(c.Readiness), got[c.Provider]); diff != "" {
				t.Errorf("route of %s at position %d, candidate %s (-route +as of):\n%s", d.MissionID, e.Position, c.Provider, diff)
			}
			if c.Readiness.LiveProven.State == aggregates.ReadyLiveProven {
				live++
				// time=T overrides: judged long after, the probe is stale.
				if st := render(d.ReadPosition, projections.Query{Time: later})[c.Provider].Live; st != aggregates.StateStale {
					t.Errorf("route of %s, %s judged at %s: live_proven is %s, want stale", d.MissionID, c.Provider, later, st)
				}
			}
		}
	}
	if routes < 3 || live == 0 {
		t.Fatalf("the fixtures hold %d routes, %d live candidates: the test compared too little", routes, live)
	}
	if got, err := s.TimeAt(ctx, head); err != nil || !got.Equal(later) {
		t.Errorf("TimeAt(head) = %s, %v; want the clock, %s", got, err, later)
	}
}
