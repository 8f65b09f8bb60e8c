package aggregates

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestProviderReadiness shows each column's states: fail closed, and
// distinct states kept distinct (not_probed is not failed, configured is
// not eligible, eligible is not activation-ready).
func TestProviderReadiness(t *testing.T) {
	type states struct{ Config, Eligible, Live, Activation string }
	direct := func() *DeclareProvider {
		d := declare("chat", KindLocal, "local_ollama", "llama3.2:3b")
		d.Scope = ScopeDirectReplyOnly
		return d
	}
	cases := []struct {
		name    string
		given   []step
		p, b    string
		after   time.Duration
		want    states
		ready   [4]bool // config, eligible, live, activation
		dormant bool
	}{
		{name: "never declared", p: "ghost",
			want: states{CodeProviderUnknown, CodeProviderUnknown, CodeProviderUnknown, CodeProviderUnknown}},
		{name: "declared without limits", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag)},
			want: states{CodeLimitsUnknown, CodeLimitsUnknown, StateNotProbed, CodeLimitsUnknown}},
		{name: "declared without a tag", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", ""), limits(glm)},
			want: states{StateModelTagMissing, StateModelTagMissing, StateModelTagMissing, StateModelTagMissing}},
		{name: "configured, not activated, not probed", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm)},
			want: states{ReadyConfigured, StateNotActivated, StateNotProbed, StateNotActivated}, ready: [4]bool{true, false, false, false}},
		{name: "activated, not probed", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, "")},
			want: states{ReadyConfigured, StateNotProbed, StateNotProbed, StateNotProbed}, ready: [4]bool{true, false, false, false}},
		{name: "probe failed is not not_probed", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), signedProbe(glm, ProbeModels, ProbeFailed)},
			want: states{ReadyConfigured, StateProbeFailed, StateProbeFailed, StateProbeFailed}, ready: [4]bool{true, false, false, false}},
		// Issue #20: the executor's host policy refused the probe: not a
		// failure of the runtime, which nobody reached; never live.
		{name: "a probe the host refused is not a failure", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), signedProbe(glm, ProbeModels, ProbeRefused)},
			want: states{ReadyConfigured, StateProbeRefused, StateProbeRefused, StateProbeRefused}, ready: [4]bool{true, false, false, false}},
		{name: "a newer refused probe wins over an older ok one", p: glm, given: []step{readyLocal(glm, glmTag), signedProbe(glm, ProbeModels, ProbeRefused)},
			want: states{ReadyConfigured, StateProbeRefused, StateProbeRefused, StateProbeRefused}, ready: [4]bool{true, false, false, false}},
		{name: "unreachable", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), signedProbe(glm, ProbeSmoke, ProbeUnreachable)},
			want: states{ReadyConfigured, StateProbeUnreach, StateProbeUnreach, StateProbeUnreach}, ready: [4]bool{true, false, false, false}},
		{name: "timeout", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), signedProbe(glm, ProbeSmoke, ProbeTimeout)},
			want: states{ReadyConfigured, StateProbeTimeout, StateProbeTimeout, StateProbeTimeout}, ready: [4]bool{true, false, false, false}},
		{name: "alias listed, not the exact tag", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), signedProbe(glm, ProbeModels, ProbeOK, "GLM-4.7-Flash")},
			want: states{ReadyConfigured, CodeAliasNotExact, CodeAliasNotExact, CodeAliasNotExact}, ready: [4]bool{true, false, false, false}},
		{name: "another model listed", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), signedProbe(glm, ProbeModels, ProbeOK, "qwen3.8:27b")},
			want: states{ReadyConfigured, StateTagNotListed, StateTagNotListed, StateTagNotListed}, ready: [4]bool{true, false, false, false}},
		{name: "an empty model list proves nothing", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), signedProbe(glm, ProbeModels, ProbeOK)},
			want: states{ReadyConfigured, StateTagNotListed, StateTagNotListed, StateTagNotListed}, ready: [4]bool{true, false, false, false}},
		{name: "a doctor probe does not prove liveness", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), probe(glm, ProbeDoctor, ProbeOK, glmTag)},
			want: states{ReadyConfigured, StateNotProbed, StateNotProbed, StateNotProbed}, ready: [4]bool{true, false, false, false}},
		{name: "a probe a writer stated proves nothing", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""), probe(glm, ProbeModels, ProbeOK, glmTag)},
			want: states{ReadyConfigured, StateProbeUnsigned, StateProbeUnsigned, StateProbeUnsigned}, ready: [4]bool{true, false, false, false}},
		{name: "a stated ok probe does not cover a signed failed one", p: glm, given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), activate(glm, ""),
			signedProbe(glm, ProbeModels, ProbeFailed), probe(glm, ProbeModels, ProbeOK, glmTag)},
			want: states{ReadyConfigured, StateProbeFailed, StateProbeFailed, StateProbeFailed}, ready: [4]bool{true, false, false, false}},
		{name: "a stated failed probe does not hide a signed ok one", p: glm, given: []step{readyLocal(glm, glmTag), probe(glm, ProbeModels, ProbeFailed)},
			want: states{ReadyConfigured, ReadyActivation, ReadyLiveProven, ReadyActivation}, ready: [4]bool{true, true, true, true}},
		{name: "activation ready", p: glm, given: readyLocal(glm, glmTag),
			want: states{ReadyConfigured, ReadyActivation, ReadyLiveProven, ReadyActivation}, ready: [4]bool{true, true, true, true}},
		{name: "a newer failed probe wins over an older ok one", p: glm, given: []step{readyLocal(glm, glmTag), signedProbe(glm, ProbeSmoke, ProbeFailed)},
			want: states{ReadyConfigured, StateProbeFailed, StateProbeFailed, StateProbeFailed}, ready: [4]bool{true, false, false, false}},
		{name: "stale at the freshness window", p: glm, given: readyLocal(glm, glmTag), after: DefaultProbeFreshness,
			want: states{ReadyConfigured, StateStale, StateStale, StateStale}, ready: [4]bool{true, false, false, false}},
		{name: "dormant", p: glm, given: []step{readyLocal(glm, glmTag), &MakeProviderDormant{Name: glm, Reason: "r"}}, dormant: true,
			want: states{ReadyConfigured, CodeProviderDormant, ReadyLiveProven, CodeProviderDormant}, ready: [4]bool{true, false, true, false}},
		{name: "configured direct-reply endpoint is eligible, not activation-ready", p: "chat", given: []step{direct(), limits("chat")},
			want: states{ReadyConfigured, ReadyDirectReplyOnly, StateNotProbed, StateNotActivated}, ready: [4]bool{true, true, false, false}},
		{name: "bound provider", p: "qwen", given: readyBound("qwen", "qwen3.8:27b", "b1"),
			want: states{ReadyConfigured, ReadyActivation, ReadyLiveProven, ReadyActivation}, ready: [4]bool{true, true, true, true}},
		{name: "binding invalidated by a runtime restart", p: "qwen", b: "b1",
			given: []step{readyBound("qwen", "qwen3.8:27b", "b1"), &InvalidateBinding{BindingID: "b1", Reason: InvalidatedRuntimeRestart}},
			want:  states{ReadyConfigured, CodeBindingInvalidated, ReadyLiveProven, CodeBindingInvalidated}, ready: [4]bool{true, false, true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.given(tc.given...)
			p := l.state(ProviderStream(tc.p)).(Provider)
			b := l.state(BindingStream(p.BindingID + "-none")).(Binding)
			if p.BindingID != "" {
				b = l.state(BindingStream(p.BindingID)).(Binding)
			}
			r := ProviderReadiness(p, b, l.at.Add(tc.after), l.policy)
			got := states{r.ConfigurationReady.State, r.EligibleForAttempt.State, r.LiveProven.State, r.ActivationReady.State}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			gotReady := [4]bool{r.ConfigurationReady.Ready, r.EligibleForAttempt.Ready, r.LiveProven.Ready, r.ActivationReady.Ready}
			if gotReady != tc.ready {
				t.Errorf("ready = %v, want %v", gotReady, tc.ready)
			}
			if r.Dormant != tc.dormant {
				t.Errorf("dormant = %v", r.Dormant)
			}
			for _, f := range []Fact{r.ConfigurationReady, r.EligibleForAttempt, r.LiveProven, r.ActivationReady} {
				if f.Reason == "" {
					t.Errorf("state %s has no reason", f.State)
				}
				if f.Ready && f.Proof == nil {
					t.Errorf("ready state %s has no proof", f.State)
				}
			}
		})
	}
}

// TestProviderReadiness_Proofs: each column names the event that proves it.
func TestProviderReadiness_Proofs(t *testing.T) {
	l := newLedger(t)
	l.given(readyLocal(glm, glmTag)...) // declared 0, limits 1, …, the signed probe's ProbeRecorded last
	probed := len(l.log) - 1
	p := l.state(ProviderStream(glm)).(Provider)
	r := ProviderReadiness(p, Binding{}, l.at.Add(time.Minute), l.policy)
	want := Readiness{
		Provider: glm, Kind: KindLocal, At: l.at.Add(time.Minute),
		ConfigurationReady: Fact{Ready: true, State: ReadyConfigured, Reason: "endpoint http://127.0.0.1:11434/v1, model glm-4.7-flash:q4_K_M, limits 32768/8192 tokens declared", Proof: new(l.ref(1))},
		LiveProven:         Fact{Ready: true, State: ReadyLiveProven, Reason: `models probe by prober listed "glm-4.7-flash:q4_K_M" exactly, 1m0s ago`, Proof: new(l.ref(probed))},
		ActivationReady:    Fact{Ready: true, State: ReadyActivation, Reason: "configured, activated, live-proven; no binding required", Proof: new(l.ref(probed))},
		EligibleForAttempt: Fact{Ready: true, State: ReadyActivation, Reason: "configured, activated, live-proven; no binding required", Proof: new(l.ref(probed))},
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("readiness (-want +got):\n%s", diff)
	}
	if l.log[probed].Type != TypeProbeRecorded || l.log[probed-1].Type != TypeMeasurementRecorded || l.log[1].Type != TypeProviderLimitsDeclared {
		t.Fatalf("positions moved: %s %s", l.log[1].Type, l.log[probed].Type)
	}
}

func TestRoundAge(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{6609*time.Hour + 25*time.Minute + 3208488117*time.Nanosecond, "6609h25m3s"},
		{1500 * time.Millisecond, "2s"},
		{300*time.Millisecond + 4567*time.Nanosecond, "300ms"},
		{-2*time.Second - 400*time.Millisecond, "-2s"},
	} {
		if got := roundAge(tc.in).String(); got != tc.want {
			t.Errorf("roundAge(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestProviderReadiness_RefusedProbe: a gate refuses a provider whose
// newest probe its host refused with not_live_proven, details.state
// probe_refused, and a reason naming the host policy (issue #20).
func TestProviderReadiness_RefusedProbe(t *testing.T) {
	l := newLedger(t)
	l.given(readyLocal(glm, glmTag)...)
	l.given(signedProbe(glm, ProbeModels, ProbeRefused))
	r := ProviderReadiness(l.state(ProviderStream(glm)).(Provider), Binding{}, l.at, l.policy)
	ref := factRefusal(glm, "live_proven", r.LiveProven)
	if ref.Code != CodeNotLiveProven || ref.Details["state"] != StateProbeRefused || !strings.Contains(ref.Message, "refused by the host policy of executor "+prober) {
		t.Errorf("refusal %s %v %q", ref.Code, ref.Details, ref.Message)
	}
	if r.LiveProven.Proof == nil || *r.LiveProven.Proof != l.last(TypeProbeRecorded) {
		t.Errorf("proof %v, want the refused probe", r.LiveProven.Proof)
	}
}
