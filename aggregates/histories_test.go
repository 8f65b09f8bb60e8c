package aggregates

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The worked histories of DOMAIN.md, drawn from the seeds, played command
// by command: each beat names the events it must append (by type, in
// order; none for an idempotent repeat) or the code it must be refused
// with, and may check the state after it.

type beat struct {
	do    step
	types []string
	code  string
	check func(t *testing.T, l *ledger)
}

func play(t *testing.T, l *ledger, beats []beat) {
	t.Helper()
	for i, b := range beats {
		cmd, ok := b.do.(Command)
		if !ok {
			l.given(b.do)
		} else {
			got, err := l.exec(cmd)
			switch {
			case b.code != "":
				if err == nil {
					t.Fatalf("beat %d %s: appended %v, want refusal %s", i, cmd.CommandName(), typesOf(got), b.code)
				}
				assertCode(t, err, b.code)
			case err != nil:
				t.Fatalf("beat %d %s: %v", i, cmd.CommandName(), err)
			default:
				if diff := cmp.Diff(b.types, typesOf(got)); diff != "" {
					t.Fatalf("beat %d %s: types (-want +got):\n%s", i, cmd.CommandName(), diff)
				}
			}
		}
		if b.check != nil {
			b.check(t, l)
		}
	}
}

func typesOf(evs []NewEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// do is a beat that must append exactly types.
func do(s step, types ...string) beat { return beat{do: s, types: types} }

// refused is a beat that must be refused with code.
func refused(s step, code string) beat { return beat{do: s, code: code} }

// prep is a beat of given steps that must succeed, whatever they append.
func prep(ss ...step) beat { return beat{do: ss} }

func checkBeats(id, cand string, n, pass int) []beat {
	var out []beat
	for _, s := range checks(id, cand, n, pass) {
		out = append(out, do(s, TypeCheckRunSigned, TypeCheckRecorded))
	}
	return out
}

func mission(l *ledger) Mission { return l.state(MissionStream(m1)).(Mission) }

// TestHistory_GLMCorrected: GLM-4.7-Flash via an agent client in a
// throwaway repo: 9/10, one correction, 10/10, review with full coverage,
// accepted, delivered once; the next terminal ticks append nothing.
func TestHistory_GLMCorrected(t *testing.T) {
	l := newLedger(t)
	var beats []beat
	beats = append(beats,
		prep(readyLocal(glm, glmTag)...),
		prep(ensureKey(runner, runnerSeed, KeyRoleCheckRunner)),
		do(submit(m1, 10, glm), TypeMissionSubmitted),
		do(&DecideRoute{MissionID: m1}, TypeRouteDecided),
		do(&StartAttempt{MissionID: m1}, TypeAttemptStarted),
		do(reserve(m1, "r1"), TypeInferenceReserved),
		do(settle(m1, "r1", OutcomeCompleted, FinishStop), TypeInferenceSettled),
		do(candidate(m1, "v1"), TypeCandidateProduced),
	)
	beats = append(beats, checkBeats(m1, "v1", 10, 9)...)
	beats = append(beats,
		refused(accept(m1, "v1", 10), CodeChecksNotPassed),
		do(&RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "c10 fails"}, TypeCorrectionRequested),
		do(reserve(m1, "r2"), TypeInferenceReserved),
		do(settle(m1, "r2", OutcomeCompleted, FinishStop), TypeInferenceSettled),
		do(candidate(m1, "v2"), TypeCandidateProduced),
	)
	beats = append(beats, checkBeats(m1, "v2", 10, 10)...)
	beats = append(beats,
		do(accept(m1, "v2", 10), TypeReviewRecorded),
		beat{do: &DeliverResult{MissionID: m1, CandidateHash: Hex64(hexOf("v2")), To: "origin-session"}, types: []string{TypeResultDelivered},
			check: func(t *testing.T, l *ledger) {
				d := mission(l).Delivery
				if d == nil || len(d.Validation) != 10 || !slices.Equal(d.Files, []string{"bin/tool.sh"}) || d.CandidateHash != hexOf("v2") {
					t.Fatalf("delivery receipt %+v", d)
				}
			}},
		do(&DeliverResult{MissionID: m1, CandidateHash: Hex64(hexOf("v2")), To: "origin-session"}),
		do(&DeliverResult{MissionID: m1, CandidateHash: Hex64(hexOf("v2")), To: "origin-session"}),
		beat{do: advance(0), check: func(t *testing.T, l *ledger) {
			m := mission(l)
			if v := m.Verification(hexOf("v1")); v.Passing != 9 || v.Blocked["c10"] != CheckFail {
				t.Errorf("the 9/10 run was rewritten: %+v", v)
			}
			if !m.Verification(hexOf("v2")).Passed || m.Corrections != 1 || m.Integration != nil {
				t.Errorf("final state %+v", m)
			}
			n := 0
			for _, e := range l.log {
				if e.Type == TypeResultDelivered {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d deliveries, want exactly one", n)
			}
		}},
	)
	play(t, l, beats)
}

// TestHistory_Stagnation: the persistent-mission reproduction under a
// policy that allows two corrections: 4/10, then 9/10, then 9/10: stopped
// for stagnation, integration refused, a third correction refused by the
// budget, no patch applied.
func TestHistory_Stagnation(t *testing.T) {
	l := newLedger(t)
	var beats []beat
	beats = append(beats,
		beat{do: setPolicy(func(p *Policy) { p.Budgets.Corrections = 2 })},
		prep(readyLocal(glm, glmTag)...),
		prep(ensureKey(runner, runnerSeed, KeyRoleCheckRunner)),
		do(submit(m1, 10, glm), TypeMissionSubmitted),
		do(&DecideRoute{MissionID: m1}, TypeRouteDecided),
		do(&StartAttempt{MissionID: m1}, TypeAttemptStarted),
		do(candidate(m1, "v1"), TypeCandidateProduced),
	)
	beats = append(beats, checkBeats(m1, "v1", 10, 4)...)
	beats = append(beats,
		do(&RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "6 cases fail"}, TypeCorrectionRequested),
		do(candidate(m1, "v2"), TypeCandidateProduced),
	)
	beats = append(beats, checkBeats(m1, "v2", 10, 9)...) // 9 > 4: no stagnation
	beats = append(beats,
		do(&RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v2")), Diagnosis: "an extra argument to --help is mishandled"}, TypeCorrectionRequested),
		do(candidate(m1, "v3"), TypeCandidateProduced),
	)
	last := checkBeats(m1, "v3", 10, 9)
	last[9].types = []string{TypeCheckRunSigned, TypeCheckRecorded, TypeMissionStopped}
	last[9].check = func(t *testing.T, l *ledger) {
		want := MissionStopped{MissionID: m1, Reason: StopStagnation,
			Detail:        "the correction passes no more acceptance checks than the candidate it corrects",
			CandidateHash: hexOf("v3"), Passed: 9, PreviousCandidateHash: hexOf("v2"), PreviousPassed: 9, At: t0}
		if diff := cmp.Diff(want, mission(l).Stop.MissionStopped); diff != "" {
			t.Errorf("stop (-want +got):\n%s", diff)
		}
	}
	beats = append(beats, last...)
	beats = append(beats,
		refused(&RecordReview{MissionID: m1, CandidateHash: Hex64(hexOf("v3")), Verdict: VerdictRefused, Reviewer: "r", RefusalKind: RefusalDefect, Reason: "9/10"}, CodeMissionStopped),
		prep(grant("apply", ActionPatchApply, MissionStream(m1), 1)),
		refused(&IntegratePatch{MissionID: m1, CandidateHash: Hex64(hexOf("v3")), PatchHash: Hex64(hexOf("patch-v3")), ApprovalID: "apply"}, CodeMissionStopped),
		refused(&RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v3")), Diagnosis: "try again"}, CodeCorrectionLimit),
		refused(&StartAttempt{MissionID: m1}, CodeStopNotRevisable),
		beat{do: advance(0), check: func(t *testing.T, l *ledger) {
			for _, e := range l.log {
				if e.Type == TypePatchIntegrated || e.Type == TypeApprovalConsumed && e.Stream == "approval-apply" {
					t.Fatalf("a patch was applied: %s", e.Type)
				}
			}
		}},
	)
	play(t, l, beats)
}

// TestHistory_TruncatedGeneration: the persistent mission that ends on an
// output limit without touching the stubs: truncated_generation, no check
// can run, acceptance refused.
func TestHistory_TruncatedGeneration(t *testing.T) {
	l := newLedger(t)
	play(t, l, []beat{
		prep(readyLocal(glm, glmTag)...),
		prep(ensureKey(runner, runnerSeed, KeyRoleCheckRunner)),
		do(submit(m1, 86, glm), TypeMissionSubmitted),
		do(&DecideRoute{MissionID: m1}, TypeRouteDecided),
		do(&StartAttempt{MissionID: m1}, TypeAttemptStarted),
		do(reserve(m1, "r1"), TypeInferenceReserved),
		do(advance(66 * time.Minute)), // "after about 66 minutes and a real compaction"
		do(settle(m1, "r1", OutcomeCompleted, FinishLength), TypeInferenceSettled),
		beat{do: &RecordCandidate{MissionID: m1}, types: []string{TypeMissionStopped}, check: func(t *testing.T, l *ledger) {
			if s := mission(l).Stop; s == nil || s.Reason != StopTruncatedGeneration || s.ReservationID != "r1" {
				t.Fatalf("stop %+v", s)
			}
		}},
		refused(check(m1, "v1", "c01", CheckPass), CodeTruncatedGeneration),
		refused(accept(m1, "v1", 86), CodeTruncatedGeneration),
		refused(&DeliverResult{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), To: "s"}, CodeTruncatedGeneration),
		refused(&StartAttempt{MissionID: m1}, CodeTruncatedGeneration),
	})
}

// TestHistory_StrataStartup: a single-use startup approval is consumed by
// one stage-A start; the RAM guard stops the run; a second start without a
// new approval is refused; an offline fit check neither spends nor renews
// the approval.
func TestHistory_StrataStartup(t *testing.T) {
	const strata, tag = "strata", "qwen3.8-flash-next-coder:iq1_m"
	l := newLedger(t)
	d := declare(strata, KindLocal, "local_strata", tag)
	qual := submit(m1, 1, strata)
	qual.Mode, qual.StartsRuntime = ModeQualification, true
	fit := func(id string) []beat {
		argv := []string{"python", "-m", "pytest", "tests/test_strata_serving_patch.py", "-q"}
		r := resources(id)
		r.Argv = argv
		return []beat{
			do(&RequestMeasurement{MeasurementID: ID(id), Host: host, Argv: argv, Kind: MeasurementRun, Timeout: PositiveDuration(D(10 * time.Minute)), OutputCapBytes: 16 << 10, Purpose: "offline fit"}, TypeMeasurementRequested),
			do(claim(id, gpu1), TypeMeasurementClaimed),
			do(signed(r, 1), TypeMeasurementRecorded),
		}
	}
	approval := func(status string, used int) beat {
		return beat{do: advance(0), check: func(t *testing.T, l *ledger) {
			a := l.state(ApprovalStream("stage-a")).(Approval)
			if got := a.Status(l.at); got != status || a.Used != used || a.Uses != 1 {
				t.Fatalf("approval %s used %d of %d, want %s used %d", got, a.Used, a.Uses, status, used)
			}
		}}
	}
	lowRAM := resources("guard")
	lowRAM.RAMAvailableBytes = u64(1536 << 20)
	var beats []beat
	beats = append(beats,
		prep(d, limits(strata), verifiedBinding("b-strata", strata, tag, artifacts()), activate(strata, "b-strata"), signedProbe(strata, ProbeModels, ProbeOK, tag), registered(gpu1, 1)),
		do(qual, TypeMissionSubmitted),
		do(&DecideRoute{MissionID: m1}, TypeRouteDecided),
		do(grant("stage-a", ActionStartup, ProviderStream(strata), 1), TypeApprovalGranted),
		approval(ApprovalStatusActive, 0),
	)
	beats = append(beats, fit("fit-1")...)
	beats = append(beats,
		approval(ApprovalStatusActive, 0), // the offline fit spent nothing
		prep(measured(resources("r1"))...),
		do(&DecideAdmission{MissionID: m1, MeasurementID: "r1"}, TypeAdmissionDecided),
		do(&StartAttempt{MissionID: m1, ApprovalID: "stage-a"}, TypeAttemptStarted, TypeApprovalConsumed),
		approval(ApprovalStatusConsumed, 1),
		prep(measured(lowRAM)...),
		do(&StopAttempt{MissionID: m1, Reason: AttemptResourceGuard, Detail: "available RAM 1.5 GiB, below the 2 GiB hard stop", Evidence: []string{"measurement-guard"}}, TypeAttemptStopped),
	)
	beats = append(beats, fit("fit-2")...)
	beats = append(beats,
		approval(ApprovalStatusConsumed, 1), // nor renewed it
		prep(measured(resources("r3"))...),
		do(&DecideAdmission{MissionID: m1, MeasurementID: "r3"}, TypeAdmissionDecided),
		refused(&StartAttempt{MissionID: m1, ApprovalID: "stage-a"}, CodeApprovalConsumed),
		refused(&StartAttempt{MissionID: m1}, CodeApprovalMissing),
		refused(grant("stage-a", ActionStartup, ProviderStream(strata), 1), CodeApprovalExists),
		do(grant("stage-a2", ActionStartup, ProviderStream(strata), 1), TypeApprovalGranted),
		do(&StartAttempt{MissionID: m1, ApprovalID: "stage-a2"}, TypeAttemptStarted, TypeApprovalConsumed),
	)
	play(t, l, beats)
}

// TestHistory_AliasNotExact: a provider whose /models probe lists an alias
// but not the exact tag is not live-proven; after a probe listing the exact
// tag it is; after the freshness window without a new probe it is not any
// more.
func TestHistory_AliasNotExact(t *testing.T) {
	l := newLedger(t)
	live := func(state string) beat {
		return beat{do: advance(0), check: func(t *testing.T, l *ledger) {
			p := l.state(ProviderStream(glm)).(Provider)
			if got := ProviderReadiness(p, Binding{}, l.at, l.policy).LiveProven.State; got != state {
				t.Fatalf("live_proven = %s, want %s", got, state)
			}
		}}
	}
	play(t, l, []beat{
		prep(declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, "")),
		live(StateNotProbed),
		prep(signedProbe(glm, ProbeModels, ProbeOK, "glm-4.7-flash", "glm-4.7-flash:latest")),
		live(CodeAliasNotExact),
		do(submit(m1, 2, glm), TypeMissionSubmitted),
		refused(&DecideRoute{MissionID: m1}, CodeAliasNotExact),
		do(advance(time.Minute)),
		prep(signedProbe(glm, ProbeModels, ProbeOK, "glm-4.7-flash", glmTag)),
		live(ReadyLiveProven),
		do(&DecideRoute{MissionID: m1}, TypeRouteDecided),
		do(advance(DefaultProbeFreshness)),
		live(StateStale),
		refused(&StartAttempt{MissionID: m1}, CodeNotLiveProven),
		refused(&DecideRoute{MissionID: m1}, CodeNotLiveProven),
	})
}

// TestHistory_ConfidentialExport: a confidential mission whose only ready
// provider is connected is refused rather than exported by fallback.
func TestHistory_ConfidentialExport(t *testing.T) {
	l := newLedger(t)
	s := submit(m1, 2, glm)
	s.Confidential, s.AllowConnected = true, true
	play(t, l, []beat{
		prep(declare(glm, KindLocal, "local_ollama", glmTag), limits(glm)),
		prep(readyConnected("grok", "grok-4")...),
		do(s, TypeMissionSubmitted),
		refused(&DecideRoute{MissionID: m1, Candidates: []string{"grok"}}, CodeConfidentialExport),
		beat{do: advance(0), check: func(t *testing.T, l *ledger) {
			if mission(l).Route != nil {
				t.Fatal("a route was recorded")
			}
		}},
	})
}

// TestHistory_UncertainInference: an inference settled uncertain blocks
// new inferences and attempts until reconciled with evidence; it still
// counts against the budget.
func TestHistory_UncertainInference(t *testing.T) {
	l := newLedger(t)
	play(t, l, []beat{
		prep(started(m1, 2)...),
		do(reserve(m1, "r1"), TypeInferenceReserved),
		do(settle(m1, "r1", OutcomeUncertain, ""), TypeInferenceSettled),
		refused(reserve(m1, "r2"), CodeInferenceUncertain),
		do(&StopAttempt{MissionID: m1, Reason: AttemptCancelled, Detail: "disconnect"}, TypeAttemptStopped),
		refused(&StartAttempt{MissionID: m1}, CodeInferenceUncertain),
		refused(&ReconcileReservation{MissionID: m1, ReservationID: "r1", Resolution: ResolutionNotGenerated}, CodeEvidenceMissing),
		do(&ReconcileReservation{MissionID: m1, ReservationID: "r1", Resolution: ResolutionNotGenerated, Evidence: []string{"runtime log shows the request cancelled before prefill"}}, TypeReservationReconciled),
		do(&StartAttempt{MissionID: m1}, TypeAttemptStarted),
		beat{do: reserve(m1, "r2"), types: []string{TypeInferenceReserved}, check: func(t *testing.T, l *ledger) {
			if r := mission(l).Reservations["r2"]; r.Ordinal != 2 || r.Attempt != 2 {
				t.Fatalf("reservation %+v", r)
			}
		}},
	})
}

// TestHistory_BindingLifecycle: a binding missing the template artifact,
// then complete, then invalidated by a changed weight hash.
func TestHistory_BindingLifecycle(t *testing.T) {
	const q, tag = "qwen", "qwen3.8:27b"
	l := newLedger(t)
	arts := artifacts()
	activation := func(state string) beat {
		return beat{do: advance(0), check: func(t *testing.T, l *ledger) {
			p := l.state(ProviderStream(q)).(Provider)
			b := l.state(BindingStream("b2")).(Binding)
			if got := ProviderReadiness(p, b, l.at, l.policy).ActivationReady.State; got != state {
				t.Fatalf("activation_ready = %s, want %s", got, state)
			}
		}}
	}
	changed := hashArtifact("b2", arts[0], VerifierSupervisor)
	changed.SHA256, changed.MtimeNS = Hex64(hexOf("re-downloaded weights")), changed.MtimeNS+1
	var beats []beat
	beats = append(beats, prep(declare(q, KindLocal, "local_llama_cpp", tag), limits(q), grant("act", ActionActivation, ProviderStream(q), 2)))
	beats = append(beats, do(propose("b1", q, tag, arts[:4]), TypeBindingProposed))
	beats = append(beats, prep(signedHashes("b1", arts[:4])))
	beats = append(beats,
		refused(&VerifyBinding{BindingID: "b1", VerifiedBy: "s"}, CodeBindingRoleMissing),
		refused(&ActivateProvider{Name: q, ApprovalID: "act", BindingID: "b1"}, CodeBindingNotVerified),
		do(propose("b2", q, tag, arts), TypeBindingProposed),
	)
	beats = append(beats,
		prep(signedHashes("b2", arts)),
		do(&VerifyBinding{BindingID: "b2", VerifiedBy: "supervisor-1"}, TypeBindingVerified),
		do(&ActivateProvider{Name: q, ApprovalID: "act", BindingID: "b2"}, TypeProviderActivated, TypeApprovalConsumed),
		prep(signedProbe(q, ProbeModels, ProbeOK, tag)),
		activation(ReadyActivation),
		do(changed, TypeArtifactHashed, TypeBindingInvalidated),
		activation(CodeBindingInvalidated),
		refused(&VerifyBinding{BindingID: "b2", VerifiedBy: "s"}, CodeBindingInvalidated),
	)
	play(t, l, beats)
}
