package aggregates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// glmHistory plays the corrected GLM mission into l.
func glmHistory(l *ledger) {
	l.given(started(m1, 10)...)
	l.given(reserve(m1, "r1"), settle(m1, "r1", OutcomeCompleted, FinishStop), candidate(m1, "v1"))
	l.given(checks(m1, "v1", 10, 9)...)
	l.given(&RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "c10"},
		reserve(m1, "r2"), settle(m1, "r2", OutcomeCompleted, FinishStop), candidate(m1, "v2"))
	l.given(checks(m1, "v2", 10, 10)...)
	l.given(accept(m1, "v2", 10), &DeliverResult{MissionID: m1, CandidateHash: Hex64(hexOf("v2")), To: "s"})
}

// everyAggregate plays a history that writes every event type of every
// aggregate (provider, binding, approval, mission, executor keys,
// measurement, claim) into l.
func everyAggregate(l *ledger) {
	const q, qTag = "qwen", "qwen3.8:27b"
	glmHistory(l)
	changed := hashArtifact("b1", artifacts()[0], VerifierSupervisor)
	changed.SHA256, changed.MtimeNS = Hex64(hexOf("re-downloaded weights")), changed.MtimeNS+1
	l.given(readyBound(q, qTag, "b1")...)
	l.given(changed, &MakeProviderDormant{Name: q, Reason: "maintenance"})
	l.given(propose("b2", q, qTag, artifacts()[:4]), &RejectBinding{BindingID: "b2", Reason: "no template"})
	l.given(grant("g-revoked", ActionActivation, ProviderStream(q), 1), &RevokeApproval{ApprovalID: "g-revoked", Reason: "mistake"})
	l.given(registered(gpu1, 1)...)
	l.given(registered(gpu1, 2)...)
	l.given(&RevokeExecutorKey{ExecutorID: gpu1, KeyID: ShortText(keyIDOf(2)), Reason: "rotated"})
	l.given(requestProbe("x"), claim("x", gpu1),
		&RenewMeasurementLease{MeasurementID: "x", ExecutorID: gpu1, LeaseUntil: at(70 * time.Second)},
		signed(resources("x"), 1))
	measurement := l.last(TypeMeasurementRecorded).ID
	l.given(requestProbe("y"), claim("y", gpu1), advance(2*time.Minute), &MarkMeasurementUncertain{MeasurementID: "y"})
	l.given(&ProposeClaim{ClaimID: "k1", Statement: "spark-1 had room for the admission", Scope: ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectHost, ID: host}}}, Evidence: []uuid.UUID{measurement}},
		&AcceptClaim{ClaimID: "k1", Reviewer: "auditor"})
	l.given(&ProposeClaim{ClaimID: "k2", Statement: "s", Scope: ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectHost, ID: host}}}, Evidence: []uuid.UUID{measurement}},
		&RefuseClaim{ClaimID: "k2", Reason: "r"})
}

// TestEvolve_DoesNotMutate pins the contract commands/cache.go relies on
// (issue #14): Evolve never modifies the state it is given, nor anything
// that state shares with the states folded before it. The handler's state
// cache hands one cached state to concurrent commands, each of which folds
// the events appended since from it, and projections keep states and
// compare them. For every stream of a history that writes every event
// type, a state folded up to each cut is kept aside, folded further, and
// compared with a fresh fold of the same events.
//
// Each stream is also played with every event followed by a variant of
// it (see variant): the contract holds for any event, a repeated one
// reaches the branches that replace what a state already holds, and only
// different values make a write into shared memory visible.
func TestEvolve_DoesNotMutate(t *testing.T) {
	l := newLedger(t)
	everyAggregate(l)
	var streams []string
	byStream := map[string][]events.Event{}
	for _, e := range l.log {
		if _, ok := byStream[e.Stream]; !ok {
			streams = append(streams, e.Stream)
		}
		byStream[e.Stream] = append(byStream[e.Stream], e)
	}
	prefixes := map[string]bool{}
	for _, s := range streams {
		st, err := Initial(s)
		if err != nil {
			t.Fatal(err)
		}
		prefixes[fmt.Sprintf("%T", st)] = true
	}
	if len(prefixes) != 7 {
		t.Fatalf("the history folds %d aggregates (%v), want all 7", len(prefixes), prefixes)
	}
	for _, stream := range streams {
		evs := byStream[stream]
		twice := make([]events.Event, 0, 2*len(evs))
		for _, e := range evs {
			twice = append(twice, e, variant(t, e))
		}
		for name, evs := range map[string][]events.Event{"once": evs, "twice": twice} {
			t.Run(stream+"/"+name, func(t *testing.T) {
				for cut := 1; cut < len(evs); cut++ {
					kept, err := Fold(stream, evs[:cut])
					if err != nil {
						t.Fatal(err)
					}
					again, _ := Fold(stream, evs[:cut])
					s := kept
					for i := cut; i < len(evs); i++ {
						if s, err = Evolve(s, &evs[i]); err != nil {
							t.Fatalf("event %d (%s): %v", i, evs[i].Type, err)
						}
					}
					if diff := cmp.Diff(again, kept, cmpopts.EquateEmpty()); diff != "" {
						t.Fatalf("folding %s (event %d) and after changed the state kept after %d events (-want +got):\n%s", evs[cut].Type, cut, cut, diff)
					}
				}
			})
		}
	}
}

// variant returns e with data that decodes into the same types but other
// values: every array reversed, and every object given one more key (a
// copy of one of its values under a new name), which a struct ignores and
// a map keeps.
func variant(t *testing.T, e events.Event) events.Event {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(e.Data))
	dec.UseNumber() // int64 nanoseconds do not survive a float64
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var vary func(any) any
	vary = func(v any) any {
		switch x := v.(type) {
		case []any:
			out := make([]any, len(x))
			for i := range x {
				out[len(x)-1-i] = vary(x[i])
			}
			return out
		case map[string]any:
			out := make(map[string]any, len(x)+1)
			for k, val := range x {
				out[k] = vary(val)
			}
			if keys := slices.Sorted(maps.Keys(x)); len(keys) > 0 {
				out[keys[0]+"~variant"] = out[keys[0]]
			}
			return out
		}
		return v
	}
	data, err := json.Marshal(vary(v))
	if err != nil {
		t.Fatal(err)
	}
	e.Data = data
	return e
}

// TestFold_OnlyOwnStream: Fold refuses an event of another stream.
func TestFold_OnlyOwnStream(t *testing.T) {
	l := newLedger(t)
	l.given(readyLocal(glm, glmTag)...)
	if _, err := Fold(ProviderStream(glm), l.log); err == nil {
		t.Fatal("folded the approval's events into the provider")
	}
}

func BenchmarkFold_Mission(b *testing.B) {
	l := newLedger(b)
	glmHistory(l)
	evs := must(l.read(MissionStream(m1)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fold(MissionStream(m1), evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(evs)), "events/op")
}
