package aggregates

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// glmHistory plays the corrected GLM mission into l.
func glmHistory(l *ledger) {
	l.given(started(m1, 10)...)
	l.given(reserve(m1, "r1"), settle(m1, "r1", OutcomeCompleted, FinishStop), candidate(m1, "v1"))
	l.given(checks(m1, "v1", 10, 9)...)
	l.given(&RequestCorrection{MissionID: m1, CandidateHash: hexOf("v1"), Diagnosis: "c10"},
		reserve(m1, "r2"), settle(m1, "r2", OutcomeCompleted, FinishStop), candidate(m1, "v2"))
	l.given(checks(m1, "v2", 10, 10)...)
	l.given(accept(m1, "v2", 10), &DeliverResult{MissionID: m1, CandidateHash: hexOf("v2"), To: "s"})
}

// TestEvolve_DoesNotMutate: a state kept aside is not changed by evolving
// it further, so projections may keep states and compare them.
func TestEvolve_DoesNotMutate(t *testing.T) {
	l := newLedger(t)
	glmHistory(l)
	evs := must(l.read(MissionStream(m1)))
	for cut := 1; cut < len(evs); cut++ {
		kept, err := Fold(MissionStream(m1), evs[:cut])
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Fold(MissionStream(m1), evs[:cut])
		s := kept
		for i := cut; i < len(evs); i++ {
			if s, err = Evolve(s, &evs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(again, kept, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("evolving past %d changed the kept state (-want +got):\n%s", cut, diff)
		}
	}
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
