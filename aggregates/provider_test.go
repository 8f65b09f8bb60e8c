package aggregates

import (
	"testing"
	"time"
)

func TestProvider_Decide(t *testing.T) {
	vllm := func() *DeclareProvider { return declare("qwen", KindLocal, "local_llama_cpp", "qwen3.8:27b") }
	runGWT(t, []gwt{
		{
			name: "declare",
			when: declare(glm, KindLocal, "local_ollama", glmTag),
			want: []NewEvent{{Stream: "provider-glm-local", Type: TypeProviderDeclared, Data: ProviderDeclared{
				Name: glm, Kind: KindLocal, Profile: "local_ollama", Endpoint: "http://127.0.0.1:11434/v1", ModelTag: glmTag,
				Capabilities: []string{"chat", "code"}, TaskClasses: []string{"code"}, At: t0}}},
		},
		{
			name:  "redeclaring the same configuration appends nothing",
			given: []step{declare(glm, KindLocal, "local_ollama", glmTag)},
			when:  declare(glm, KindLocal, "local_ollama", glmTag),
			want:  nil,
		},
		{
			name: "limits of an unknown provider",
			when: limits("ghost"),
			code: CodeProviderUnknown,
		},
		{
			name:  "limits",
			given: []step{declare(glm, KindLocal, "local_ollama", glmTag)},
			when:  limits(glm),
			want: []NewEvent{{Stream: "provider-glm-local", Type: TypeProviderLimitsDeclared, Data: ProviderLimitsDeclared{
				Name: glm, ContextTokens: 32768, OutputTokens: 8192, At: t0}}},
		},
		{
			name: "activate unknown provider",
			when: &ActivateProvider{Name: "ghost", ApprovalID: "a"},
			code: CodeProviderUnknown,
		},
		{
			name: "activate without endpoint",
			given: []step{func() *DeclareProvider {
				d := declare(glm, KindLocal, "local_ollama", glmTag)
				d.Endpoint = ""
				return d
			}(), limits(glm), grant("act", ActionActivation, "provider-glm-local", 1)},
			when: &ActivateProvider{Name: glm, ApprovalID: "act"},
			code: CodeNotConfigured,
		},
		{
			name:  "activate with limits unknown",
			given: []step{declare(glm, KindLocal, "local_ollama", glmTag), grant("act", ActionActivation, "provider-glm-local", 1)},
			when:  &ActivateProvider{Name: glm, ApprovalID: "act"},
			code:  CodeLimitsUnknown,
		},
		{
			name:  "activate without approval",
			given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm)},
			when:  &ActivateProvider{Name: glm},
			code:  CodeApprovalMissing,
		},
		{
			name:  "activate under an approval for another provider",
			given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), grant("act", ActionActivation, "provider-other", 1)},
			when:  &ActivateProvider{Name: glm, ApprovalID: "act"},
			code:  CodeApprovalSubjectMismatch,
		},
		{
			name:  "activate",
			given: []step{declare(glm, KindLocal, "local_ollama", glmTag), limits(glm), grant("act", ActionActivation, "provider-glm-local", 1)},
			when:  &ActivateProvider{Name: glm, ApprovalID: "act"},
			want: []NewEvent{
				{Stream: "provider-glm-local", Type: TypeProviderActivated, Data: ProviderActivated{Name: glm, ApprovalID: "act", At: t0}},
				{Stream: "approval-act", Type: TypeApprovalConsumed, Data: ApprovalConsumed{ApprovalID: "act", By: "ActivateProvider", Subject: "provider-glm-local", Use: 1, At: t0}},
			},
		},
		{
			name:  "activating an active provider appends nothing and spends nothing",
			given: readyLocal(glm, glmTag),
			when:  &ActivateProvider{Name: glm, ApprovalID: "act-glm-local"},
			want:  nil,
		},
		{
			name:  "a llama.cpp profile needs a binding",
			given: []step{vllm(), limits("qwen"), grant("act", ActionActivation, "provider-qwen", 1)},
			when:  &ActivateProvider{Name: "qwen", ApprovalID: "act"},
			code:  CodeBindingRequired,
		},
		{
			name:  "activate with an unverified binding",
			given: []step{vllm(), limits("qwen"), grant("act", ActionActivation, "provider-qwen", 1), propose("b1", "qwen", "qwen3.8:27b", artifacts())},
			when:  &ActivateProvider{Name: "qwen", ApprovalID: "act", BindingID: "b1"},
			code:  CodeBindingNotVerified,
		},
		{
			name:  "activate with a binding of another provider",
			given: []step{vllm(), limits("qwen"), grant("act", ActionActivation, "provider-qwen", 1), verifiedBinding("b1", "other", "qwen3.8:27b", artifacts())},
			when:  &ActivateProvider{Name: "qwen", ApprovalID: "act", BindingID: "b1"},
			code:  CodeBindingProviderMismatch,
		},
		{
			name:  "an override never inherits another model's identity",
			given: []step{vllm(), limits("qwen"), grant("act", ActionActivation, "provider-qwen", 1), verifiedBinding("b1", "qwen", "qwen3.6:35b", artifacts())},
			when:  &ActivateProvider{Name: "qwen", ApprovalID: "act", BindingID: "b1"},
			code:  CodeBindingModelMismatch,
		},
		{
			name:  "activate with a verified binding",
			given: []step{vllm(), limits("qwen"), grant("act", ActionActivation, "provider-qwen", 1), verifiedBinding("b1", "qwen", "qwen3.8:27b", artifacts())},
			when:  &ActivateProvider{Name: "qwen", ApprovalID: "act", BindingID: "b1"},
			wantFn: func(l *ledger) []NewEvent {
				id := l.state("binding-b1").(Binding).Identity
				return []NewEvent{
					{Stream: "provider-qwen", Type: TypeProviderActivated, Data: ProviderActivated{Name: "qwen", ApprovalID: "act", BindingID: "b1", BindingIdentity: id, At: t0}},
					{Stream: "approval-act", Type: TypeApprovalConsumed, Data: ApprovalConsumed{ApprovalID: "act", By: "ActivateProvider", Subject: "provider-qwen", Use: 1, At: t0}},
				}
			},
		},
		{
			name:  "make dormant",
			given: readyLocal(glm, glmTag),
			when:  &MakeProviderDormant{Name: glm, Reason: "replaced by GLM-5.3"},
			want: []NewEvent{{Stream: "provider-glm-local", Type: TypeProviderMadeDormant, Data: ProviderMadeDormant{
				Name: glm, Reason: "replaced by GLM-5.3", At: t0}}},
		},
		{
			name:  "make dormant twice appends nothing",
			given: []step{readyLocal(glm, glmTag), &MakeProviderDormant{Name: glm, Reason: "r"}},
			when:  &MakeProviderDormant{Name: glm, Reason: "r"},
			want:  nil,
		},
		{
			name: "make an unknown provider dormant",
			when: &MakeProviderDormant{Name: "ghost", Reason: "r"},
			code: CodeProviderUnknown,
		},
		{
			name:  "probe observed in the future",
			given: []step{declare(glm, KindLocal, "local_ollama", glmTag)},
			when:  &RecordProbe{Name: glm, Kind: ProbeModels, Outcome: ProbeOK, Models: []string{glmTag}, ObservedBy: "s", ObservedAt: t0.Add(time.Second)},
			code:  CodeProbeTimeInvalid,
		},
		{
			name: "probe of an unknown provider",
			when: probe("ghost", ProbeModels, ProbeOK, glmTag),
			code: CodeProviderUnknown,
		},
		{
			name:  "a writer's probe is recorded as stated, with the expected tag and whether it is listed exactly",
			given: []step{declare(glm, KindLocal, "local_ollama", glmTag)},
			when:  probe(glm, ProbeModels, ProbeOK, "glm-4.7-flash", glmTag),
			want: []NewEvent{{Stream: "provider-glm-local", Type: TypeProbeRecorded, Data: ProbeRecorded{
				Provider: glm, Kind: ProbeModels, Outcome: ProbeOK, Models: []string{"glm-4.7-flash", glmTag},
				Latency: D(40 * time.Millisecond), ObservedBy: "supervisor", Principal: AnonymousName, ObservedAt: t0,
				ExpectedTag: glmTag, ExactTagListed: true, Stated: true, At: t0}}},
		},
	})
}

// TestProvider_RedeclarationEndsActivation: changing the model served
// invalidates the owner's activation.
func TestProvider_RedeclarationEndsActivation(t *testing.T) {
	l := newLedger(t)
	l.given(readyLocal(glm, glmTag)...)
	if !l.state(ProviderStream(glm)).(Provider).Activated {
		t.Fatal("not activated")
	}
	l.given(declare(glm, KindLocal, "local_ollama", "glm-5.3-flash"))
	p := l.state(ProviderStream(glm)).(Provider)
	if p.Activated {
		t.Fatal("activation survived a change of model tag")
	}
	r := ProviderReadiness(p, Binding{}, l.at, l.policy)
	if r.ActivationReady.Ready || r.ActivationReady.State != StateNotActivated {
		t.Fatalf("activation after redeclaration: %+v", r.ActivationReady)
	}
}
