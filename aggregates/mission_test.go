package aggregates

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/greffe/greffe/events"
)

const m1 = "m1"

func TestMission_Submit(t *testing.T) {
	corr := func(n int) *int { return &n }
	widen := submit(m1, 2, glm)
	widen.Budgets = BudgetRequest{Corrections: (*Count)(corr(3)), CommandTimeout: &PositiveDuration{time.Minute}}
	narrow := submit(m1, 2, glm)
	narrow.Budgets = BudgetRequest{Corrections: (*Count)(corr(0)), Attempts: (*Count)(corr(1))}
	wantBudgets := DefaultPolicy().Budgets
	narrowed := wantBudgets
	narrowed.Corrections, narrowed.Attempts = 0, 1
	submitted := func(b Budgets) []NewEvent {
		return []NewEvent{{Stream: "mission-m1", Type: TypeMissionSubmitted, Data: MissionSubmitted{
			MissionID: m1, TaskClass: "code", Mode: ModeProposal, DeclaredProvider: glm, AllowedFiles: []string{"bin/*.sh"},
			AcceptanceChecks: []AcceptanceCheck{
				{ID: "c01", Argv: []string{"bash", "tests/run_case.sh", "c01"}, ArgvHash: events.ArgvHash([]string{"bash", "tests/run_case.sh", "c01"})},
				{ID: "c02", Argv: []string{"bash", "tests/run_case.sh", "c02"}, ArgvHash: events.ArgvHash([]string{"bash", "tests/run_case.sh", "c02"})},
			},
			Budgets: b, At: t0}}}
	}
	runGWT(t, []gwt{
		{name: "submit under the default policy", when: submit(m1, 2, glm), want: submitted(wantBudgets)},
		{name: "a submission may narrow", when: narrow, want: submitted(narrowed)},
		{name: "a submission may not widen", when: widen, code: CodeBudgetWidened},
		{name: "submit twice", given: []step{submit(m1, 2, glm)}, when: submit(m1, 2, glm), code: CodeMissionExists},
	})
}

func TestMission_Route(t *testing.T) {
	confidential := func(declared string) *SubmitMission {
		s := submit(m1, 2, declared)
		s.Confidential, s.AllowConnected = true, true
		return s
	}
	open := func() *SubmitMission {
		s := submit(m1, 2, "")
		s.AllowConnected = true
		return s
	}
	otherClass := declare(glm, KindLocal, "local_ollama", glmTag)
	otherClass.TaskClasses = []string{"forecast"}
	directReply := func() []step {
		d := declare("chat", KindLocal, "local_ollama", "llama3.2:3b")
		d.Scope = ScopeDirectReplyOnly
		s := submit(m1, 0, "chat")
		s.Mode = ModeDirectReply
		return []step{d, limits("chat"), s}
	}
	runGWT(t, []gwt{
		{name: "unknown mission", when: &DecideRoute{MissionID: m1}, code: CodeMissionUnknown},
		{
			name:  "declared provider ready",
			given: []step{readyLocal(glm, glmTag), submit(m1, 2, glm)},
			when:  &DecideRoute{MissionID: m1},
			wantFn: func(l *ledger) []NewEvent {
				p := l.state(ProviderStream(glm)).(Provider)
				return []NewEvent{{Stream: "mission-m1", Type: TypeRouteDecided, Data: RouteDecided{
					MissionID: m1, DeclaredProvider: glm, Selected: glm, SelectedKind: KindLocal, ModelTag: glmTag,
					Reasons:      []string{"declared provider glm-local passes the activation_ready gate"},
					Candidates:   []RouteCandidate{{Provider: glm, Readiness: ProviderReadiness(p, Binding{}, t0, l.policy), Selected: true}},
					ReadPosition: uint64(len(l.log)), At: t0,
				}}}
			},
		},
		{name: "declared provider dormant", given: []step{readyLocal(glm, glmTag), &MakeProviderDormant{Name: glm, Reason: "r"}, submit(m1, 2, glm)},
			when: &DecideRoute{MissionID: m1}, code: CodeProviderDormant},
		{name: "declared provider not probed", given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), submit(m1, 2, glm)},
			when: &DecideRoute{MissionID: m1}, code: CodeNotLiveProven},
		{name: "declared provider lists an alias only", given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), signedProbe(glm, ProbeModels, ProbeOK, "glm-4.7-flash"), submit(m1, 2, glm)},
			when: &DecideRoute{MissionID: m1}, code: CodeAliasNotExact},
		{name: "limits unknown refuse a proposal", given: []step{declare(glm, KindLocal, "local_ollama", glmTag), signedProbe(glm, ProbeModels, ProbeOK, glmTag), submit(m1, 2, glm)},
			when: &DecideRoute{MissionID: m1}, code: CodeLimitsUnknown},
		{name: "configured but never activated", given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), signedProbe(glm, ProbeModels, ProbeOK, glmTag), submit(m1, 2, glm)},
			when: &DecideRoute{MissionID: m1}, code: CodeNotActivated},
		{name: "task class not served", given: []step{otherClass, limits(glm), activate(glm, ""), signedProbe(glm, ProbeModels, ProbeOK, glmTag), submit(m1, 2, glm)},
			when: &DecideRoute{MissionID: m1}, code: CodeTaskClassNotServed},
		{name: "connected provider on a route that does not allow it", given: []step{readyConnected("grok", "grok-4"), submit(m1, 2, "")},
			when: &DecideRoute{MissionID: m1, Candidates: []string{"grok"}}, code: CodeConnectedNotAllowed},
		{name: "confidential mission whose only ready provider is connected", given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), readyConnected("grok", "grok-4"), confidential(glm)},
			when: &DecideRoute{MissionID: m1, Candidates: []string{"grok"}}, code: CodeConfidentialExport},
		{name: "no provider at all", given: []step{submit(m1, 2, "")},
			when: &DecideRoute{MissionID: m1}, code: CodeNoEligibleProvider},
		{name: "no candidate passes", given: []step{declare("a", KindLocal, "local_ollama", "x"), declare("b", KindLocal, "local_ollama", "y"), submit(m1, 2, "")},
			when: &DecideRoute{MissionID: m1, Candidates: []string{"a", "b"}}, code: CodeNoEligibleProvider},
		{name: "a route cannot change under a running attempt", given: started(m1, 2),
			when: &DecideRoute{MissionID: m1}, code: CodeAttemptInProgress},
		{name: "a configured direct-reply endpoint serves a proposal never", given: []step{directReply()[0], directReply()[1], submit(m1, 2, "chat")},
			when: &DecideRoute{MissionID: m1}, code: CodeNotActivated},
	})

	t.Run("fallback to another local provider records the declared refusal", func(t *testing.T) {
		l := newLedger(t)
		l.given(readyLocal("backup", "qwen3.8:27b"), declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), submit(m1, 2, glm))
		out, err := l.decide(&DecideRoute{MissionID: m1, Candidates: []string{"backup"}})
		if err != nil {
			t.Fatal(err)
		}
		r := out[0].Data.(RouteDecided)
		if r.Selected != "backup" || !r.Fallback || r.Candidates[0].Refusal != CodeNotActivated || r.Candidates[0].Selected || !r.Candidates[1].Selected {
			t.Fatalf("route = %+v", r)
		}
	})
	t.Run("local first", func(t *testing.T) {
		l := newLedger(t)
		l.given(readyConnected("grok", "grok-4"), readyLocal(glm, glmTag), open())
		out, err := l.decide(&DecideRoute{MissionID: m1, Candidates: []string{"grok", glm}})
		if err != nil {
			t.Fatal(err)
		}
		if r := out[0].Data.(RouteDecided); r.Selected != glm || r.Fallback {
			t.Fatalf("route = %+v", r)
		}
	})
	t.Run("a connected provider when the route allows it and no local one passes", func(t *testing.T) {
		l := newLedger(t)
		l.given(readyConnected("grok", "grok-4"), declare(glm, KindLocal, "local_ollama", glmTag), open())
		out, err := l.decide(&DecideRoute{MissionID: m1, Candidates: []string{glm, "grok"}})
		if err != nil {
			t.Fatal(err)
		}
		if r := out[0].Data.(RouteDecided); r.Selected != "grok" || r.SelectedKind != KindConnected {
			t.Fatalf("route = %+v", r)
		}
	})
	t.Run("a confidential mission may use the connected provider it declared itself", func(t *testing.T) {
		l := newLedger(t)
		l.given(readyConnected("grok", "grok-4"), confidential("grok"))
		if _, err := l.decide(&DecideRoute{MissionID: m1}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a direct reply may use a configured direct-reply endpoint", func(t *testing.T) {
		l := newLedger(t)
		l.given(directReply()...)
		out, err := l.decide(&DecideRoute{MissionID: m1})
		if err != nil {
			t.Fatal(err)
		}
		if r := out[0].Data.(RouteDecided); r.Selected != "chat" || r.Candidates[0].Readiness.EligibleForAttempt.State != ReadyDirectReplyOnly {
			t.Fatalf("route = %+v", r)
		}
	})
}

// runtimeMission is a mission that starts a runtime, routed to glm, with
// the startup approval "start" granted for 1 use.
func runtimeMission() []step {
	s := submit(m1, 2, glm)
	s.StartsRuntime = true
	return []step{
		readyLocal(glm, glmTag), registered(gpu1, 1), s, &DecideRoute{MissionID: m1},
		grant("start", ActionStartup, ProviderStream(glm), 1),
	}
}

func TestMission_Admission(t *testing.T) {
	lowRAM := resources("low")
	lowRAM.RAMAvailableBytes = u64(5 << 30)
	runGWT(t, []gwt{
		{name: "no route", given: []step{submit(m1, 2, glm)}, when: &DecideAdmission{MissionID: m1, MeasurementID: "x"}, code: CodeRouteMissing},
		{name: "measurement never requested", given: runtimeMission(), when: &DecideAdmission{MissionID: m1, MeasurementID: "x"}, code: CodeMeasurementMissing},
		{name: "measurement claimed, not recorded", given: []step{runtimeMission(), requestProbe("x"), claim("x", gpu1)},
			when: &DecideAdmission{MissionID: m1, MeasurementID: "x"}, code: CodeMeasurementMissing},
		{name: "measurement uncertain", given: []step{runtimeMission(), requestProbe("x"), claim("x", gpu1), advance(2 * time.Minute), &MarkMeasurementUncertain{MeasurementID: "x"}},
			when: &DecideAdmission{MissionID: m1, MeasurementID: "x"}, code: CodeMeasurementMissing},
		// Issue #20: a signed refusal of the host's policy measured
		// nothing: refused by name, not only through the readings it lacks.
		{name: "measurement refused by its host", given: []step{runtimeMission(), measured(func() MeasurementResult {
			r := resources("r1") // readings that would pass every screen: the outcome alone refuses
			r.Outcome, r.ExitCode, r.Error = ResultRefusedByHost, -1, "run_not_allowed: … (host policy: runs)"
			return r
		}())}, when: &DecideAdmission{MissionID: m1, MeasurementID: "r1"}, code: CodeMeasurementRefusedByHost},
		{name: "measurement stale", given: []step{runtimeMission(), measured(resources("r1")), advance(DefaultMeasurementFreshness + time.Second)},
			when: &DecideAdmission{MissionID: m1, MeasurementID: "r1"}, code: CodeMeasurementStale},
		{
			name: "admitted", given: []step{runtimeMission(), measured(resources("r1"))},
			when: &DecideAdmission{MissionID: m1, MeasurementID: "r1"},
			wantFn: func(l *ledger) []NewEvent {
				return []NewEvent{{Stream: "mission-m1", Type: TypeAdmissionDecided, Data: AdmissionDecided{
					MissionID: m1, Attempt: 1, Provider: glm, ModelTag: glmTag, Decision: AdmissionAdmitted,
					Screens: []Screen{
						{Name: ScreenRAM, Passed: true, ObservedBytes: u64(8 << 30), LimitBytes: DefaultMinAvailableRAM},
						{Name: ScreenGPU, Passed: true, ObservedBytes: u64(4 << 30), LimitBytes: DefaultMaxGPUAllocation},
						{Name: ScreenResidentModels, Passed: true},
					},
					MeasurementID: "r1", Measurement: l.last(TypeMeasurementRecorded), Host: host, MeasuredAt: t0,
					ReadPosition: uint64(len(l.log)), At: t0,
				}}}
			},
		},
		{
			name: "refused below the RAM floor is a recorded decision", given: []step{runtimeMission(), measured(lowRAM)},
			when: &DecideAdmission{MissionID: m1, MeasurementID: "low"},
			wantFn: func(l *ledger) []NewEvent {
				return []NewEvent{{Stream: "mission-m1", Type: TypeAdmissionDecided, Data: AdmissionDecided{
					MissionID: m1, Attempt: 1, Provider: glm, ModelTag: glmTag, Decision: AdmissionRefused,
					Screens: []Screen{
						{Name: ScreenRAM, Code: CodeRAMBelowFloor, ObservedBytes: u64(5 << 30), LimitBytes: DefaultMinAvailableRAM},
						{Name: ScreenGPU, Passed: true, ObservedBytes: u64(4 << 30), LimitBytes: DefaultMaxGPUAllocation},
						{Name: ScreenResidentModels, Passed: true},
					},
					MeasurementID: "low", Measurement: l.last(TypeMeasurementRecorded), Host: host, MeasuredAt: t0,
					ReadPosition: uint64(len(l.log)), At: t0,
				}}}
			},
		},
	})
}

// TestAdmissionScreens shows each screen's failure code; unknown is never
// a pass.
func TestAdmissionScreens(t *testing.T) {
	pol := DefaultPolicy().Admission
	cases := []struct {
		name  string
		edit  func(*MeasurementResult)
		codes [3]string
	}{
		{name: "all pass", edit: func(*MeasurementResult) {}},
		{name: "RAM below 6 GiB", edit: func(r *MeasurementResult) { r.RAMAvailableBytes = u64(6<<30 - 1) }, codes: [3]string{CodeRAMBelowFloor, "", ""}},
		{name: "RAM exactly 6 GiB passes", edit: func(r *MeasurementResult) { r.RAMAvailableBytes = u64(6 << 30) }},
		{name: "RAM not reported", edit: func(r *MeasurementResult) { r.RAMAvailableBytes = nil }, codes: [3]string{CodeRAMUnknown, "", ""}},
		{name: "GPU above 11,776 MiB", edit: func(r *MeasurementResult) { r.GPU.MemoryUsedBytes = 11776<<20 + 1 }, codes: [3]string{"", CodeGPUAllocationAboveCeiling, ""}},
		{name: "GPU exactly at the ceiling passes", edit: func(r *MeasurementResult) { r.GPU.MemoryUsedBytes = 11776 << 20 }},
		{name: "GPU diagnostics missing", edit: func(r *MeasurementResult) { r.GPU = nil }, codes: [3]string{"", CodeGPUDiagnosticsMissing, ""}},
		{name: "another resident model", edit: func(r *MeasurementResult) { r.ResidentModels = []string{"qwen3.6:35b"} }, codes: [3]string{"", "", CodeResidentModelPresent}},
		{name: "the model itself resident", edit: func(r *MeasurementResult) { r.ResidentModels = []string{glmTag} }},
		{name: "resident models not observed", edit: func(r *MeasurementResult) { r.ResidentModelsObserved = false }, codes: [3]string{"", "", CodeResidentModelsUnknown}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := resources("x")
			tc.edit(&r)
			s := admissionScreens(r, glmTag, pol)
			got := [3]string{s[0].Code, s[1].Code, s[2].Code}
			if got != tc.codes {
				t.Fatalf("codes %v, want %v", got, tc.codes)
			}
			for i, sc := range s {
				if sc.Passed != (sc.Code == "") {
					t.Errorf("screen %d passed=%v code=%q", i, sc.Passed, sc.Code)
				}
			}
		})
	}
}

func TestMission_StartAttempt(t *testing.T) {
	redeclared := declare(glm, KindLocal, "local_ollama", "glm-5.3-flash")
	lowRAM := resources("low")
	lowRAM.RAMAvailableBytes = u64(1 << 30)
	stopAttempt := &StopAttempt{MissionID: m1, Reason: AttemptResourceGuard, Detail: "RAM below 2 GiB"}
	twoDone := []step{started(m1, 2), stopAttempt, &StartAttempt{MissionID: m1}, stopAttempt}
	runGWT(t, []gwt{
		{name: "unknown mission", when: &StartAttempt{MissionID: m1}, code: CodeMissionUnknown},
		{name: "no route", given: []step{readyLocal(glm, glmTag), submit(m1, 2, glm)}, when: &StartAttempt{MissionID: m1}, code: CodeRouteMissing},
		{
			name:  "start",
			given: []step{readyLocal(glm, glmTag), submit(m1, 2, glm), &DecideRoute{MissionID: m1}},
			when:  &StartAttempt{MissionID: m1},
			wantFn: func(l *ledger) []NewEvent {
				p := l.state(ProviderStream(glm)).(Provider)
				return []NewEvent{{Stream: "mission-m1", Type: TypeAttemptStarted, Data: AttemptStarted{
					MissionID: m1, Attempt: 1, Provider: glm, ModelTag: glmTag,
					Readiness: ProviderReadiness(p, Binding{}, t0, l.policy).ActivationReady, At: t0}}}
			},
		},
		{name: "attempt in progress", given: started(m1, 2), when: &StartAttempt{MissionID: m1}, code: CodeAttemptInProgress},
		{name: "attempts budget spent", given: twoDone, when: &StartAttempt{MissionID: m1}, code: CodeBudgetExhausted},
		{name: "an uncertain inference blocks a new attempt", given: []step{started(m1, 2), reserve(m1, "r1"), settle(m1, "r1", OutcomeUncertain, ""), stopAttempt},
			when: &StartAttempt{MissionID: m1}, code: CodeInferenceUncertain},
		{name: "the provider's proof went stale since the route", given: []step{readyLocal(glm, glmTag), submit(m1, 2, glm), &DecideRoute{MissionID: m1}, advance(DefaultProbeFreshness)},
			when: &StartAttempt{MissionID: m1}, code: CodeNotLiveProven},
		{name: "the provider went dormant since the route", given: []step{readyLocal(glm, glmTag), submit(m1, 2, glm), &DecideRoute{MissionID: m1}, &MakeProviderDormant{Name: glm, Reason: "r"}},
			when: &StartAttempt{MissionID: m1}, code: CodeProviderDormant},
		{name: "the provider serves another model since the route", given: []step{readyLocal(glm, glmTag), submit(m1, 2, glm), &DecideRoute{MissionID: m1},
			redeclared, grant("act2", ActionActivation, ProviderStream(glm), 1), &ActivateProvider{Name: glm, ApprovalID: "act2"}, signedProbe(glm, ProbeModels, ProbeOK, "glm-5.3-flash")},
			when: &StartAttempt{MissionID: m1}, code: CodeRouteStale},
		{name: "a runtime start without approval", given: []step{runtimeMission(), measured(resources("r1")), &DecideAdmission{MissionID: m1, MeasurementID: "r1"}},
			when: &StartAttempt{MissionID: m1}, code: CodeApprovalMissing},
		{name: "a runtime start under an approval for another action", given: []step{runtimeMission(), grant("apply", ActionPatchApply, ProviderStream(glm), 1), measured(resources("r1")), &DecideAdmission{MissionID: m1, MeasurementID: "r1"}},
			when: &StartAttempt{MissionID: m1, ApprovalID: "apply"}, code: CodeApprovalActionMismatch},
		{name: "a runtime start without admission", given: runtimeMission(),
			when: &StartAttempt{MissionID: m1, ApprovalID: "start"}, code: CodeAdmissionMissing},
		{name: "a runtime start after a refused admission", given: []step{runtimeMission(), measured(lowRAM), &DecideAdmission{MissionID: m1, MeasurementID: "low"}},
			when: &StartAttempt{MissionID: m1, ApprovalID: "start"}, code: CodeAdmissionRefused},
		{name: "a runtime start on a stale admission", given: []step{runtimeMission(), measured(resources("r1")), &DecideAdmission{MissionID: m1, MeasurementID: "r1"}, advance(DefaultMeasurementFreshness + time.Second),
			signedProbe(glm, ProbeModels, ProbeOK, glmTag)},
			when: &StartAttempt{MissionID: m1, ApprovalID: "start"}, code: CodeAdmissionStale},
		{
			name:  "a runtime start spends its approval",
			given: []step{runtimeMission(), measured(resources("r1")), &DecideAdmission{MissionID: m1, MeasurementID: "r1"}},
			when:  &StartAttempt{MissionID: m1, ApprovalID: "start"},
			wantFn: func(l *ledger) []NewEvent {
				p := l.state(ProviderStream(glm)).(Provider)
				return []NewEvent{
					{Stream: "mission-m1", Type: TypeAttemptStarted, Data: AttemptStarted{
						MissionID: m1, Attempt: 1, Provider: glm, ModelTag: glmTag,
						Readiness:  ProviderReadiness(p, Binding{}, t0, l.policy).ActivationReady,
						ApprovalID: "start", Admission: new(l.last(TypeAdmissionDecided)), At: t0}},
					{Stream: "approval-start", Type: TypeApprovalConsumed, Data: ApprovalConsumed{
						ApprovalID: "start", By: "StartAttempt", Subject: "provider-glm-local", Use: 1, At: t0}},
				}
			},
		},
		{name: "stopped for stagnation is not revised", given: stagnated(), when: &StartAttempt{MissionID: m1}, code: CodeStopNotRevisable},
		{name: "stopped on a truncated generation", given: truncated(), when: &StartAttempt{MissionID: m1}, code: CodeTruncatedGeneration},
		{name: "cancelled", given: []step{started(m1, 2), &StopMission{MissionID: m1, Reason: StopCancelled}}, when: &StartAttempt{MissionID: m1}, code: CodeMissionStopped},
		{name: "delivered", given: delivered(m1, 2), when: &StartAttempt{MissionID: m1}, code: CodeMissionDelivered},
	})
}

// stagnated is the stagnation history under a policy of two corrections:
// 4/10, 9/10, 9/10.
func stagnated() []step {
	return []step{
		setPolicy(func(p *Policy) { p.Budgets.Corrections = 2 }),
		started(m1, 10),
		candidate(m1, "v1"), checks(m1, "v1", 10, 4),
		&RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "6 cases fail"},
		candidate(m1, "v2"), checks(m1, "v2", 10, 9),
		&RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v2")), Diagnosis: "--help with an extra argument"},
		candidate(m1, "v3"), checks(m1, "v3", 10, 9),
	}
}

// truncated is a mission whose generation ended on its output limit with
// no file changed.
func truncated() []step {
	return []step{
		started(m1, 2), reserve(m1, "r1"), settle(m1, "r1", OutcomeCompleted, FinishLength),
		&RecordCandidate{MissionID: m1},
	}
}

// accepted is a mission of n checks whose first candidate passed them all
// and was accepted.
func accepted(id string, n int) []step {
	return []step{started(id, n), candidate(id, "v1"), checks(id, "v1", n, n), accept(id, "v1", n)}
}

func delivered(id string, n int) []step {
	return []step{accepted(id, n), &DeliverResult{MissionID: ID(id), CandidateHash: Hex64(hexOf("v1")), To: "session-1"}}
}

func TestMission_Inference(t *testing.T) {
	one := func(n int) *int { return &n }
	tight := submit(m1, 2, glm)
	tight.Budgets = BudgetRequest{InferenceRequests: (*Count)(one(1))}
	otherModel := settle(m1, "r1", OutcomeCompleted, FinishStop)
	otherModel.Receipt.ModelTag = "glm-4.7-flash"
	errored := func(n int) []step {
		var s []step
		for i := range n {
			id := string(rune('a' + i))
			s = append(s, reserve(m1, id), settle(m1, id, OutcomeRejectedBeforeGeneration, ""))
		}
		return s
	}
	runGWT(t, []gwt{
		{name: "reserve without an attempt", given: []step{readyLocal(glm, glmTag), submit(m1, 2, glm), &DecideRoute{MissionID: m1}}, when: reserve(m1, "r1"), code: CodeAttemptNotStarted},
		{
			name: "reserve", given: started(m1, 2), when: reserve(m1, "r1"),
			want: []NewEvent{{Stream: "mission-m1", Type: TypeInferenceReserved, Data: InferenceReserved{
				MissionID: m1, ReservationID: "r1", Attempt: 1, Ordinal: 1, Provider: glm, ModelTag: glmTag, At: t0}}},
		},
		{name: "reserve while one is open", given: []step{started(m1, 2), reserve(m1, "r1")}, when: reserve(m1, "r2"), code: CodeReservationOpen},
		{name: "reserve a taken id", given: []step{started(m1, 2), reserve(m1, "r1"), settle(m1, "r1", OutcomeCompleted, FinishStop)}, when: reserve(m1, "r1"), code: CodeReservationExists},
		{name: "no new inference while one is uncertain", given: []step{started(m1, 2), reserve(m1, "r1"), settle(m1, "r1", OutcomeUncertain, "")}, when: reserve(m1, "r2"), code: CodeInferenceUncertain},
		{name: "inference budget spent", given: []step{readyLocal(glm, glmTag), tight, &DecideRoute{MissionID: m1}, &StartAttempt{MissionID: m1}, reserve(m1, "r1"), settle(m1, "r1", OutcomeCompleted, FinishStop)},
			when: reserve(m1, "r2"), code: CodeBudgetExhausted},
		{name: "two error recoveries are allowed", given: []step{started(m1, 2), errored(2)}, when: reserve(m1, "r3"),
			want: []NewEvent{{Stream: "mission-m1", Type: TypeInferenceReserved, Data: InferenceReserved{
				MissionID: m1, ReservationID: "r3", Attempt: 1, Ordinal: 3, Provider: glm, ModelTag: glmTag, At: t0}}}},
		{name: "a third error recovery is not", given: []step{started(m1, 2), errored(3)}, when: reserve(m1, "r4"), code: CodeBudgetExhausted},
		{name: "past the attempt's 30 minutes", given: []step{started(m1, 2), advance(DefaultAttemptTimeout + time.Second)}, when: reserve(m1, "r1"), code: CodeBudgetExhausted},
		{
			name: "settle with a receipt", given: []step{started(m1, 2), reserve(m1, "r1")}, when: settle(m1, "r1", OutcomeCompleted, FinishStop),
			want: []NewEvent{{Stream: "mission-m1", Type: TypeInferenceSettled, Data: InferenceSettled{
				MissionID: m1, ReservationID: "r1", Attempt: 1, Outcome: OutcomeCompleted, Receipt: receipt(FinishStop), At: t0}}},
		},
		{name: "settle an unknown reservation", given: started(m1, 2), when: settle(m1, "r9", OutcomeCompleted, FinishStop), code: CodeReservationUnknown},
		{name: "settle twice", given: []step{started(m1, 2), reserve(m1, "r1"), settle(m1, "r1", OutcomeCompleted, FinishStop)}, when: settle(m1, "r1", OutcomeCompleted, FinishStop), code: CodeReservationSettled},
		{name: "a receipt for another model tag", given: []step{started(m1, 2), reserve(m1, "r1")}, when: otherModel, code: CodeReceiptIdentityMismatch},
		{name: "settle on an unknown mission", when: settle(m1, "r1", OutcomeCompleted, FinishStop), code: CodeMissionUnknown},
		{
			name:  "reconcile with evidence",
			given: []step{started(m1, 2), reserve(m1, "r1"), settle(m1, "r1", OutcomeUncertain, "")},
			when:  &ReconcileReservation{MissionID: m1, ReservationID: "r1", Resolution: ResolutionNotGenerated, Evidence: []string{"ollama log: request cancelled before prefill"}},
			want: []NewEvent{{Stream: "mission-m1", Type: TypeReservationReconciled, Data: ReservationReconciled{
				MissionID: m1, ReservationID: "r1", Resolution: ResolutionNotGenerated, Evidence: []string{"ollama log: request cancelled before prefill"}, At: t0}}},
		},
		{name: "reconcile without evidence", given: []step{started(m1, 2), reserve(m1, "r1"), settle(m1, "r1", OutcomeUncertain, "")},
			when: &ReconcileReservation{MissionID: m1, ReservationID: "r1", Resolution: ResolutionNotGenerated}, code: CodeEvidenceMissing},
		{name: "reconcile what is not uncertain", given: []step{started(m1, 2), reserve(m1, "r1"), settle(m1, "r1", OutcomeCompleted, FinishStop)},
			when: &ReconcileReservation{MissionID: m1, ReservationID: "r1", Resolution: ResolutionCompleted, Evidence: []string{"e"}}, code: CodeReservationNotUncertain},
		{name: "reconcile an unknown reservation", given: started(m1, 2),
			when: &ReconcileReservation{MissionID: m1, ReservationID: "r1", Resolution: ResolutionCompleted, Evidence: []string{"e"}}, code: CodeReservationUnknown},
		{name: "stop the attempt", given: started(m1, 2), when: &StopAttempt{MissionID: m1, Reason: AttemptResourceGuard, Detail: "RAM below 2 GiB"},
			want: []NewEvent{{Stream: "mission-m1", Type: TypeAttemptStopped, Data: AttemptStopped{MissionID: m1, Attempt: 1, Reason: AttemptResourceGuard, Detail: "RAM below 2 GiB", At: t0}}}},
		{name: "stop an attempt that is not running", given: []step{readyLocal(glm, glmTag), submit(m1, 2, glm), &DecideRoute{MissionID: m1}},
			when: &StopAttempt{MissionID: m1, Reason: AttemptCancelled}, code: CodeAttemptNotStarted},
	})
}

func TestMission_Candidates(t *testing.T) {
	outside := candidate(m1, "v1")
	outside.FilesChanged = []string{"bin/tool.sh", "tests/run_case.sh"}
	wrongArgv := check(m1, "v1", "c01", CheckPass)
	wrongArgv.ArgvHash = Digest(events.ArgvHash([]string{"bash", "tests/run_case.sh", "c01", "--skip-slow"}))
	slowPass := check(m1, "v1", "c01", CheckPass)
	slowPass.Duration = NonNegativeDuration(D(16 * time.Second))
	bigPass := check(m1, "v1", "c01", CheckPass)
	bigPass.OutputBytes = 16<<10 + 1
	exitOne := statedCheck(m1, "v1", "c01", CheckPass)
	exitOne.ExitCode = 1
	signedExitOne := check(m1, "v1", "c01", CheckPass)
	signedExitOne.ExitCode = 1

	runGWT(t, []gwt{
		{
			name: "candidate", given: started(m1, 2), when: candidate(m1, "v1"),
			want: []NewEvent{{Stream: "mission-m1", Type: TypeCandidateProduced, Data: CandidateProduced{
				MissionID: m1, Attempt: 1, CandidateHash: hexOf("v1"), PatchHash: hexOf("patch-v1"), FilesChanged: []string{"bin/tool.sh"}, At: t0}}},
		},
		{name: "candidate without an attempt", given: []step{readyLocal(glm, glmTag), submit(m1, 2, glm), &DecideRoute{MissionID: m1}}, when: candidate(m1, "v1"), code: CodeAttemptNotStarted},
		{name: "a second candidate without a correction", given: []step{started(m1, 2), candidate(m1, "v1")}, when: candidate(m1, "v2"), code: CodeCandidateNotExpected},
		{name: "a correction that repeats the candidate", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 1), &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "d"}},
			when: candidate(m1, "v1"), code: CodeCandidateDuplicate},
		{name: "a file outside the allowed files", given: started(m1, 2), when: outside, code: CodeFileNotAllowed},
		{
			name: "no file changed stops for no modification", given: started(m1, 2), when: &RecordCandidate{MissionID: m1},
			want: []NewEvent{{Stream: "mission-m1", Type: TypeMissionStopped, Data: MissionStopped{
				MissionID: m1, Reason: StopNoModification, Detail: "the worker returned without changing any file", At: t0}}},
		},
		{
			name: "no file changed after an output limit stops for truncated generation", given: []step{started(m1, 2), reserve(m1, "r1"), settle(m1, "r1", OutcomeCompleted, FinishLength)},
			when: &RecordCandidate{MissionID: m1},
			want: []NewEvent{{Stream: "mission-m1", Type: TypeMissionStopped, Data: MissionStopped{
				MissionID: m1, Reason: StopTruncatedGeneration, Detail: "the generation ended on its output limit without changing any file", ReservationID: "r1", At: t0}}},
		},
		{
			// The runner's signed bytes verbatim, then the CheckRecorded
			// derived from them: the one an independent pass is.
			name: "check", given: []step{started(m1, 2), candidate(m1, "v1")}, when: check(m1, "v1", "c01", CheckPass),
			wantFn: func(*ledger) []NewEvent {
				sc := check(m1, "v1", "c01", CheckPass).signed()
				return []NewEvent{
					{Stream: "mission-m1", Type: TypeCheckRunSigned, Data: json.RawMessage(sc.Payload), Envelope: &sc.Envelope},
					{Stream: "mission-m1", Type: TypeCheckRecorded, Data: CheckRecorded{
						MissionID: m1, CandidateHash: hexOf("v1"), CheckID: "c01", ArgvHash: events.ArgvHash([]string{"bash", "tests/run_case.sh", "c01"}),
						Outcome: CheckPass, Runner: runner, RunnerKind: RunnerIndependent, Duration: D(2 * time.Second), OutputBytes: 512,
						SignedBy: runner, KeyIDs: []string{keyIDOf(runnerSeed)}, Principal: AnonymousName, At: t0}},
				}
			},
		},
		{
			name: "a check a writer states", given: []step{started(m1, 2), candidate(m1, "v1")}, when: statedCheck(m1, "v1", "c01", CheckPass),
			want: []NewEvent{{Stream: "mission-m1", Type: TypeCheckRecorded, Data: CheckRecorded{
				MissionID: m1, CandidateHash: hexOf("v1"), CheckID: "c01", ArgvHash: events.ArgvHash([]string{"bash", "tests/run_case.sh", "c01"}),
				Outcome: CheckPass, Runner: "elora-supervisor", RunnerKind: RunnerIndependent, Duration: D(2 * time.Second), OutputBytes: 512, Principal: AnonymousName, Stated: true, At: t0}}},
		},
		{name: "a pass with exit code 1", given: []step{started(m1, 2), candidate(m1, "v1")}, when: exitOne, code: CodeCheckOutcomeIncoherent},
		{name: "a signed pass with exit code 1", given: []step{started(m1, 2), candidate(m1, "v1")}, when: signedExitOne, code: CodeCheckOutcomeIncoherent},

		{name: "check of an unknown candidate", given: []step{started(m1, 2), candidate(m1, "v1")}, when: check(m1, "v9", "c01", CheckPass), code: CodeCandidateUnknown},
		{name: "check that is not an acceptance check", given: []step{started(m1, 2), candidate(m1, "v1")}, when: check(m1, "v1", "c99", CheckPass), code: CodeCheckUnknown},
		{name: "check run with another argv", given: []step{started(m1, 2), candidate(m1, "v1")}, when: wrongArgv, code: CodeArgvMismatch},
		{name: "a pass beyond 15 s", given: []step{started(m1, 2), candidate(m1, "v1")}, when: slowPass, code: CodeCheckOutOfBounds},
		{name: "a pass beyond 16 KiB of output", given: []step{started(m1, 2), candidate(m1, "v1")}, when: bigPass, code: CodeCheckOutOfBounds},
		{name: "no check can run after a truncated generation", given: truncated(), when: check(m1, "v1", "c01", CheckPass), code: CodeTruncatedGeneration},
	})
}

func TestMission_Review(t *testing.T) {
	partial := accept(m1, "v1", 2)
	delete(partial.Coverage, "c02")
	extra := accept(m1, "v1", 2)
	extra.Coverage["c09"] = "x"
	workerPass := func(c string) *RecordCheck {
		k := statedCheck(m1, "v1", c, CheckPass)
		k.Runner, k.RunnerKind = "opencode", RunnerWorker
		return k
	}
	defect := &RecordReview{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Verdict: VerdictRefused, Reviewer: "reviewer", RefusalKind: RefusalDefect, Reason: "--help mishandled"}
	authority := &RecordReview{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Verdict: VerdictRefused, Reviewer: "reviewer", RefusalKind: RefusalAuthority, Reason: "tried forbidden tools"}
	runGWT(t, []gwt{
		{
			name: "accepted", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 2)}, when: accept(m1, "v1", 2),
			want: []NewEvent{{Stream: "mission-m1", Type: TypeReviewRecorded, Data: ReviewRecorded{
				MissionID: m1, CandidateHash: hexOf("v1"), Verdict: VerdictAccepted, Reviewer: "reviewer", Principal: AnonymousName, Coverage: fullCoverage(2), At: t0}}},
		},
		{name: "accepted with a check missing", given: []step{started(m1, 2), candidate(m1, "v1"), check(m1, "v1", "c01", CheckPass)}, when: accept(m1, "v1", 2), code: CodeChecksIncomplete},
		{name: "the worker's own passes do not count", given: []step{started(m1, 2), candidate(m1, "v1"), workerPass("c01"), workerPass("c02")}, when: accept(m1, "v1", 2), code: CodeChecksIncomplete},
		{name: "accepted with a failing check", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 1)}, when: accept(m1, "v1", 2), code: CodeChecksNotPassed},
		{name: "a skipped check blocks", given: []step{started(m1, 2), candidate(m1, "v1"), check(m1, "v1", "c01", CheckPass), check(m1, "v1", "c02", CheckSkipped)}, when: accept(m1, "v1", 2), code: CodeChecksNotPassed},
		{name: "a later pass does not erase a fail", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 1), check(m1, "v1", "c02", CheckPass)}, when: accept(m1, "v1", 2), code: CodeChecksNotPassed},
		{name: "accepted without full coverage", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 2)}, when: partial, code: CodeCoverageIncomplete},
		{name: "coverage of a check that does not exist", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 2)}, when: extra, code: CodeCoverageUnknownCheck},
		{name: "review of an unknown candidate", given: []step{started(m1, 2), candidate(m1, "v1")}, when: accept(m1, "v9", 2), code: CodeCandidateUnknown},
		{name: "review of a superseded candidate", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 1), &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "d"}, candidate(m1, "v2")},
			when: accept(m1, "v1", 2), code: CodeCandidateSuperseded},
		{name: "refused for a defect leaves the mission open", given: []step{started(m1, 2), candidate(m1, "v1")}, when: defect,
			want: []NewEvent{{Stream: "mission-m1", Type: TypeReviewRecorded, Data: ReviewRecorded{
				MissionID: m1, CandidateHash: hexOf("v1"), Verdict: VerdictRefused, Reviewer: "reviewer", Principal: AnonymousName, RefusalKind: RefusalDefect, Reason: "--help mishandled", At: t0}}}},
		{name: "refused for authority stops the mission", given: []step{started(m1, 2), candidate(m1, "v1")}, when: authority,
			want: []NewEvent{
				{Stream: "mission-m1", Type: TypeReviewRecorded, Data: ReviewRecorded{
					MissionID: m1, CandidateHash: hexOf("v1"), Verdict: VerdictRefused, Reviewer: "reviewer", Principal: AnonymousName, RefusalKind: RefusalAuthority, Reason: "tried forbidden tools", At: t0}},
				{Stream: "mission-m1", Type: TypeMissionStopped, Data: MissionStopped{MissionID: m1, Reason: StopAuthorityRefused, Detail: "tried forbidden tools", CandidateHash: hexOf("v1"), At: t0}},
			}},
		{name: "nothing is accepted after a truncated generation", given: truncated(), when: accept(m1, "v1", 2), code: CodeTruncatedGeneration},
	})
}

func TestMission_Correction(t *testing.T) {
	runGWT(t, []gwt{
		{
			name: "correction", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 1)},
			when: &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "c02 fails"},
			want: []NewEvent{{Stream: "mission-m1", Type: TypeCorrectionRequested, Data: CorrectionRequested{
				MissionID: m1, CandidateHash: hexOf("v1"), Correction: 1, Diagnosis: "c02 fails", At: t0}}},
		},
		{name: "a second correction under the default policy", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 0),
			&RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "d"}, candidate(m1, "v2"), checks(m1, "v2", 2, 1)},
			when: &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v2")), Diagnosis: "d"}, code: CodeCorrectionLimit},
		{name: "a correction already pending", given: []step{setPolicy(func(p *Policy) { p.Budgets.Corrections = 2 }), started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 1),
			&RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "d"}},
			when: &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "d"}, code: CodeCorrectionPending},
		{name: "correction of an unknown candidate", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 1)},
			when: &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v9")), Diagnosis: "d"}, code: CodeCandidateUnknown},
		{name: "correction before the checks are complete", given: []step{started(m1, 2), candidate(m1, "v1"), check(m1, "v1", "c01", CheckFail)},
			when: &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "d"}, code: CodeChecksIncomplete},
		{name: "correction of an accepted candidate", given: accepted(m1, 2),
			when: &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "d"}, code: CodeCandidateAccepted},
		{name: "an authority refusal is not revised", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 1),
			&RecordReview{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Verdict: VerdictRefused, Reviewer: "r", RefusalKind: RefusalAuthority, Reason: "forbidden tools"}},
			when: &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "d"}, code: CodeStopNotRevisable},
		{name: "correction without a running attempt", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 1), &StopAttempt{MissionID: m1, Reason: AttemptWorkerExited}},
			when: &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), Diagnosis: "d"}, code: CodeAttemptNotStarted},
	})
}

func TestMission_DeliveryAndIntegration(t *testing.T) {
	deliver := &DeliverResult{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), To: "session-1"}
	integrate := func(approval string) *IntegratePatch {
		return &IntegratePatch{MissionID: m1, CandidateHash: Hex64(hexOf("v1")), PatchHash: Hex64(hexOf("patch-v1")), ApprovalID: OptionalID(approval)}
	}
	wrongPatch := integrate("apply")
	wrongPatch.PatchHash = Hex64(hexOf("another patch"))
	apply := grant("apply", ActionPatchApply, MissionStream(m1), 1)
	runGWT(t, []gwt{
		{
			name: "deliver", given: accepted(m1, 2), when: deliver,
			wantFn: func(l *ledger) []NewEvent {
				m := l.state(MissionStream(m1)).(Mission)
				c := m.Candidates[0]
				return []NewEvent{{Stream: "mission-m1", Type: TypeResultDelivered, Data: ResultDelivered{
					MissionID: m1, CandidateHash: hexOf("v1"), PatchHash: hexOf("patch-v1"), To: "session-1", Files: []string{"bin/tool.sh"},
					Validation: []Validation{
						{CheckID: "c01", Argv: []string{"bash", "tests/run_case.sh", "c01"}, Pass: c.Checks["c01"].PassRef},
						{CheckID: "c02", Argv: []string{"bash", "tests/run_case.sh", "c02"}, Pass: c.Checks["c02"].PassRef},
					},
					Review: l.last(TypeReviewRecorded), At: t0}}}
			},
		},
		{name: "a second delivery appends nothing", given: delivered(m1, 2), when: deliver, want: nil},
		{name: "delivering another candidate after delivery", given: delivered(m1, 2), when: &DeliverResult{MissionID: m1, CandidateHash: Hex64(hexOf("v2")), To: "s"}, code: CodeDeliveryConflict},
		{name: "deliver without an accepted review", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 2)}, when: deliver, code: CodeReviewNotAccepted},
		{name: "deliver another candidate than the accepted one", given: accepted(m1, 2), when: &DeliverResult{MissionID: m1, CandidateHash: Hex64(hexOf("v2")), To: "s"}, code: CodeCandidateHashMismatch},
		{name: "a failing re-run after acceptance blocks delivery", given: []step{accepted(m1, 2), check(m1, "v1", "c02", CheckFail)}, when: deliver, code: CodeChecksNotPassed},
		{name: "deliver a stopped mission", given: []step{accepted(m1, 2), &StopMission{MissionID: m1, Reason: StopCancelled}}, when: deliver, code: CodeMissionStopped},
		{
			name: "integrate", given: []step{accepted(m1, 2), apply}, when: integrate("apply"),
			wantFn: func(l *ledger) []NewEvent {
				return []NewEvent{
					{Stream: "mission-m1", Type: TypePatchIntegrated, Data: PatchIntegrated{MissionID: m1, CandidateHash: hexOf("v1"), PatchHash: hexOf("patch-v1"),
						ApprovalID: "apply", Review: l.last(TypeReviewRecorded), At: t0}},
					{Stream: "approval-apply", Type: TypeApprovalConsumed, Data: ApprovalConsumed{ApprovalID: "apply", By: "IntegratePatch", Subject: "mission-m1", Use: 1, At: t0}},
				}
			},
		},
		{name: "integrate again appends nothing", given: []step{accepted(m1, 2), apply, integrate("apply")}, when: integrate("apply"), want: nil},
		{name: "integrate without approval", given: accepted(m1, 2), when: integrate(""), code: CodeApprovalMissing},
		{name: "integrate under a spent approval", given: []step{accepted(m1, 2), apply,
			NewEvent{Stream: "approval-apply", Type: TypeApprovalConsumed, Data: ApprovalConsumed{ApprovalID: "apply", By: "IntegratePatch", Subject: "mission-m1", Use: 1, At: t0}}},
			when: integrate("apply"), code: CodeApprovalConsumed},
		{name: "integrate under a startup approval", given: []step{accepted(m1, 2), grant("start", ActionStartup, MissionStream(m1), 1)}, when: integrate("start"), code: CodeApprovalActionMismatch},
		{name: "integrate without an accepted review", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 2), apply}, when: integrate("apply"), code: CodeReviewNotAccepted},
		{name: "integrate another candidate", given: []step{accepted(m1, 2), apply}, when: &IntegratePatch{MissionID: m1, CandidateHash: Hex64(hexOf("v2")), PatchHash: Hex64(hexOf("patch-v1")), ApprovalID: "apply"}, code: CodeCandidateHashMismatch},
		{name: "integrate another patch", given: []step{accepted(m1, 2), apply}, when: wrongPatch, code: CodePatchHashMismatch},
		{name: "integrate a stagnated mission", given: []step{stagnated(), grant("apply", ActionPatchApply, MissionStream(m1), 1)}, when: integrate("apply"), code: CodeMissionStopped},
		{name: "stop", given: started(m1, 2), when: &StopMission{MissionID: m1, Reason: StopCancelled, Detail: "owner"},
			want: []NewEvent{{Stream: "mission-m1", Type: TypeMissionStopped, Data: MissionStopped{MissionID: m1, Reason: StopCancelled, Detail: "owner", At: t0}}}},
		{name: "stop twice for the same reason appends nothing", given: []step{started(m1, 2), &StopMission{MissionID: m1, Reason: StopCancelled}}, when: &StopMission{MissionID: m1, Reason: StopCancelled}, want: nil},
		{name: "stop a stopped mission for another reason", given: []step{started(m1, 2), &StopMission{MissionID: m1, Reason: StopCancelled}}, when: &StopMission{MissionID: m1, Reason: StopChecksFailed}, code: CodeMissionStopped},
		{name: "stop an unknown mission", when: &StopMission{MissionID: m1, Reason: StopCancelled}, code: CodeMissionUnknown},
	})
}

func TestMission_Verification(t *testing.T) {
	l := newLedger(t)
	l.given(started(m1, 3)...)
	l.given(candidate(m1, "v1"), check(m1, "v1", "c01", CheckPass), check(m1, "v1", "c02", CheckTruncated))
	got := l.state(MissionStream(m1)).(Mission).Verification(hexOf("v1"))
	want := Verification{Complete: false, Passed: false, Passing: 1, Missing: []string{"c03"}, Blocked: map[string]string{"c02": CheckTruncated}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verification (-want +got):\n%s", diff)
	}
}

// TestMission_Stagnation: only a correction is judged against the
// candidate it corrects; improving is not stagnation, and a new attempt's
// first candidate is not a correction.
func TestMission_Stagnation(t *testing.T) {
	two := setPolicy(func(p *Policy) { p.Budgets.Corrections = 2 })
	corr := func(c string) *RequestCorrection {
		return &RequestCorrection{MissionID: m1, CandidateHash: Hex64(hexOf(c)), Diagnosis: "d"}
	}
	cases := []struct {
		name    string
		given   []step
		last    *runnerCheck
		stopped bool
	}{
		{name: "a correction that passes more", given: []step{started(m1, 3), candidate(m1, "v1"), checks(m1, "v1", 3, 1), corr("v1"), candidate(m1, "v2"), checks(m1, "v2", 2, 2)},
			last: check(m1, "v2", "c03", CheckFail)},
		{name: "a correction that passes as many", given: []step{started(m1, 3), candidate(m1, "v1"), checks(m1, "v1", 3, 2), corr("v1"), candidate(m1, "v2"), checks(m1, "v2", 2, 2)},
			last: check(m1, "v2", "c03", CheckFail), stopped: true},
		{name: "a correction that passes fewer", given: []step{started(m1, 3), candidate(m1, "v1"), checks(m1, "v1", 3, 2), corr("v1"), candidate(m1, "v2"), checks(m1, "v2", 2, 1)},
			last: check(m1, "v2", "c03", CheckFail), stopped: true},
		{name: "a new attempt's candidate is not a correction", given: []step{two, started(m1, 4), candidate(m1, "v1"), checks(m1, "v1", 4, 2), corr("v1"), candidate(m1, "v2"), checks(m1, "v2", 4, 3),
			&StopAttempt{MissionID: m1, Reason: AttemptWorkerExited}, &StartAttempt{MissionID: m1}, candidate(m1, "v3"), checks(m1, "v3", 3, 2)},
			last: check(m1, "v3", "c04", CheckFail)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.given(tc.given...)
			out, err := l.exec(tc.last)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{TypeCheckRunSigned, TypeCheckRecorded}
			if tc.stopped {
				want = append(want, TypeMissionStopped)
			}
			if diff := cmp.Diff(want, typesOf(out)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}
