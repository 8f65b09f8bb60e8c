package aggregates

import (
	"fmt"
	"slices"
	"time"
)

// Readiness is a provider's readiness as of a time: the four columns of the
// readiness matrix, each with its state, a reason and the event that proves
// it. It is computed, never stored, so it can be computed as of any past
// position (fold the streams up to it) and any time.
//
// Fail closed: unknown, missing, empty or stale is never ready. A provider
// with no probe is "not_probed", distinct from one whose probe "failed".
type Readiness struct {
	// Provider is the provider's name.
	Provider string `json:"provider"`
	// Kind is the provider's scope: local or connected.
	Kind string `json:"kind"`
	// Dormant says whether the provider is dormant.
	Dormant bool `json:"dormant"`
	// At is the time the readiness was judged at.
	At time.Time `json:"at"`
	// ConfigurationReady: declared, endpoint and exact model tag set,
	// limits declared.
	ConfigurationReady Fact `json:"configuration_ready"`
	// EligibleForAttempt: activation-ready, or a configured endpoint whose
	// scope is direct_reply_only. Never a shortcut around a mission's gate.
	EligibleForAttempt Fact `json:"eligible_for_attempt"`
	// LiveProven: the newest signed models or smoke probe (an executor's)
	// is ok, lists the configured tag exactly and is younger than the
	// freshness window; a probe a writer stated never counts.
	LiveProven Fact `json:"live_proven"`
	// ActivationReady: configured, activated, live-proven and, when the
	// profile requires one, bound to a verified binding of this provider's
	// exact model.
	ActivationReady Fact `json:"activation_ready"`
}

// Fact is one readiness column. State is a snake_case word: one of the
// Ready… constants when Ready, otherwise the reason it is not (most are
// also refusal codes: "provider_dormant", "limits_unknown",
// "alias_not_exact", "binding_not_verified", …). Proof names the event that
// establishes the state (for a ready composite, the newest of the events
// that together make it ready); nil when it rests on an absence.
type Fact struct {
	// Ready says whether the fact holds.
	Ready bool `json:"ready"`
	// State is the fact's state (e.g. live_proven, stale, unknown).
	State string `json:"state"`
	// Reason says why, in words.
	Reason string `json:"reason"`
	// Proof is the event that proves it; absent when nothing does.
	Proof *EventRef `json:"proof,omitempty"`
}

// States of the readiness columns that are not refusal codes.
const (
	ReadyConfigured      = "configured"
	ReadyLiveProven      = "live_proven"
	ReadyActivation      = "activation_ready"
	ReadyDirectReplyOnly = "direct_reply_only"
	ReadyBound           = "bound"
	ReadyNoBindingNeeded = "no_binding_required"

	StateNotProbed = "not_probed"
	// StateProbeUnsigned: no signed probe, only probes a writer stated
	// (issue #20): a stated probe proves nothing.
	StateProbeUnsigned = "probe_unsigned"
	StateProbeFailed   = "failed"
	// StateProbeRefused: the newest signed probe was refused by its
	// executor's host policy (issue #20): nothing was dialled, so the
	// runtime's state is unknown; not a failure of the runtime.
	StateProbeRefused    = "probe_refused"
	StateProbeUnreach    = "unreachable"
	StateProbeTimeout    = "timeout"
	StateTagNotListed    = "tag_not_listed"
	StateStale           = "stale"
	StateEndpointMissing = "endpoint_missing"
	StateModelTagMissing = "model_tag_missing"
	StateNotActivated    = "not_activated"
)

// Readiness refusal codes: a mission's gate refuses a provider with the
// code of the first column state that fails.
const (
	// CodeProviderDormant: the provider is dormant; it is never selected.
	CodeProviderDormant = "provider_dormant"
	// CodeNotConfigured: endpoint or exact model tag missing.
	CodeNotConfigured = "not_configured"
	// CodeLimitsUnknown: limits are not declared; proposal-mode missions
	// (and every other mode: configuration needs limits) are refused.
	CodeLimitsUnknown = "limits_unknown"
	// CodeNotActivated: the provider was never activated (or its
	// activation ended with a redeclaration).
	CodeNotActivated = "not_activated"
	// CodeNotLiveProven: no fresh ok signed models/smoke probe listing the
	// exact tag (details.state says not_probed, probe_unsigned, failed,
	// probe_refused, unreachable, timeout, tag_not_listed or stale).
	CodeNotLiveProven = "not_live_proven"
	// CodeAliasNotExact: the newest probe lists an alias of the tag but not
	// the tag itself; an alias proves nothing about what is loaded.
	CodeAliasNotExact = "alias_not_exact"
)

// ProviderReadiness computes p's readiness at time at under pol. b is the
// state of the binding p was activated with (States.Binding(p.BindingID));
// pass Binding{} when p names none.
func ProviderReadiness(p Provider, b Binding, at time.Time, pol Policy) Readiness {
	r := Readiness{Provider: p.Name, Kind: p.Kind, Dormant: p.Dormant, At: at}
	r.ConfigurationReady = configurationFact(p)
	r.LiveProven = scheduleFact(p, at, liveFact(p, at, pol.ProbeFreshness.Duration))
	r.ActivationReady = activationFact(p, b, r.ConfigurationReady, r.LiveProven, pol)
	r.EligibleForAttempt = eligibleFact(p, r.ConfigurationReady, r.ActivationReady)
	return r
}

func notDeclared() Fact {
	return Fact{State: CodeProviderUnknown, Reason: "no provider is declared under this name"}
}

func configurationFact(p Provider) Fact {
	switch {
	case !p.Declared:
		return notDeclared()
	case p.Endpoint == "":
		return Fact{State: StateEndpointMissing, Reason: "the declaration sets no endpoint", Proof: refPtr(p.Declaration)}
	case p.ModelTag == "":
		return Fact{State: StateModelTagMissing, Reason: "the declaration sets no exact model tag", Proof: refPtr(p.Declaration)}
	case p.Limits == nil:
		return Fact{State: CodeLimitsUnknown, Reason: "context and output limits are not declared", Proof: refPtr(p.Declaration)}
	}
	return Fact{Ready: true, State: ReadyConfigured,
		Reason: fmt.Sprintf("endpoint %s, model %s, limits %d/%d tokens declared", p.Endpoint, p.ModelTag, p.Limits.ContextTokens, p.Limits.OutputTokens),
		Proof:  refPtr(newest(p.Declaration, p.LimitsDeclared))}
}

func liveFact(p Provider, at time.Time, window time.Duration) Fact {
	if !p.Declared {
		return notDeclared()
	}
	if p.ModelTag == "" {
		return Fact{State: StateModelTagMissing, Reason: "no exact model tag is configured, so no probe can prove it", Proof: refPtr(p.Declaration)}
	}
	pr := p.LastProbe
	if pr == nil {
		if st := p.LastStatedProbe; st != nil {
			return Fact{State: StateProbeUnsigned, Proof: refPtr(st.Ref),
				Reason: fmt.Sprintf("no executor signed a models or smoke probe; the newest, stated by %s (%s), proves nothing", st.ObservedBy, st.Outcome)}
		}
		return Fact{State: StateNotProbed, Reason: "no models or smoke probe has been recorded"}
	}
	proof := refPtr(pr.Ref)
	switch pr.Outcome {
	case ProbeFailed:
		return Fact{State: StateProbeFailed, Reason: fmt.Sprintf("the newest %s probe failed", pr.Kind), Proof: proof}
	case ProbeUnreachable:
		return Fact{State: StateProbeUnreach, Reason: fmt.Sprintf("the newest %s probe could not reach the endpoint", pr.Kind), Proof: proof}
	case ProbeTimeout:
		return Fact{State: StateProbeTimeout, Reason: fmt.Sprintf("the newest %s probe timed out", pr.Kind), Proof: proof}
	case ProbeRefused:
		return Fact{State: StateProbeRefused, Proof: proof,
			Reason: fmt.Sprintf("the newest %s probe was refused by the host policy of executor %s: nothing was dialled, so the runtime's state is unknown", pr.Kind, pr.ObservedBy)}
	case ProbeOK:
	default:
		return Fact{State: StateProbeFailed, Reason: fmt.Sprintf("the newest probe has outcome %q", pr.Outcome), Proof: proof}
	}
	if !slices.Contains(pr.Models, p.ModelTag) {
		if i := slices.IndexFunc(pr.Models, func(m string) bool { return isAlias(m, p.ModelTag) }); i >= 0 {
			return Fact{State: CodeAliasNotExact,
				Reason: fmt.Sprintf("the newest %s probe lists %q, an alias of %q, but not the exact tag", pr.Kind, pr.Models[i], p.ModelTag), Proof: proof}
		}
		return Fact{State: StateTagNotListed, Reason: fmt.Sprintf("the newest %s probe does not list %q", pr.Kind, p.ModelTag), Proof: proof}
	}
	age := at.Sub(pr.ObservedAt)
	if age >= window || age < 0 {
		return Fact{State: StateStale,
			Reason: fmt.Sprintf("the newest ok %s probe was observed at %s, %s before %s; the freshness window is %s",
				pr.Kind, pr.ObservedAt.UTC().Format(time.RFC3339), roundAge(age), at.UTC().Format(time.RFC3339), window), Proof: proof}
	}
	return Fact{Ready: true, State: ReadyLiveProven,
		Reason: fmt.Sprintf("%s probe by %s listed %q exactly, %s ago", pr.Kind, pr.ObservedBy, p.ModelTag, roundAge(age)), Proof: proof}
}

// roundAge rounds an age for a reason a person reads: to the second from
// one second up ("6609h25m3s", not "6609h25m3.208488117s"), to the
// millisecond below.
func roundAge(d time.Duration) time.Duration {
	if d >= time.Second || d <= -time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// bindingFact checks that b is a usable binding of p's exact model.
func bindingFact(p Provider, b Binding) Fact {
	switch {
	case !b.Proposed:
		return Fact{State: CodeBindingUnknown, Reason: "no binding was proposed under the id named"}
	case b.Rejected:
		return Fact{State: CodeBindingRejected, Reason: fmt.Sprintf("binding %s was rejected", b.ID), Proof: refPtr(b.Rejection)}
	case b.Invalidated:
		return Fact{State: CodeBindingInvalidated, Reason: fmt.Sprintf("binding %s was invalidated (%s)", b.ID, b.InvalidReason), Proof: refPtr(b.Invalidation)}
	case !b.Verified:
		return Fact{State: CodeBindingNotVerified, Reason: fmt.Sprintf("binding %s is not verified", b.ID), Proof: refPtr(b.Proposal)}
	case b.Provider != p.Name:
		return Fact{State: CodeBindingProviderMismatch, Reason: fmt.Sprintf("binding %s was proposed for provider %s", b.ID, b.Provider), Proof: refPtr(b.Proposal)}
	case b.ModelTag != p.ModelTag:
		return Fact{State: CodeBindingModelMismatch,
			Reason: fmt.Sprintf("binding %s identifies model %q, not %q; an override never inherits another model's identity", b.ID, b.ModelTag, p.ModelTag),
			Proof:  refPtr(b.Proposal)}
	}
	return Fact{Ready: true, State: ReadyBound, Reason: fmt.Sprintf("binding %s verified with identity %s", b.ID, b.Identity), Proof: refPtr(b.Verification)}
}

func activationFact(p Provider, b Binding, config, live Fact, pol Policy) Fact {
	switch {
	case !p.Declared:
		return notDeclared()
	case p.Dormant:
		return Fact{State: CodeProviderDormant, Reason: fmt.Sprintf("the provider is dormant (%s)", p.DormantReason), Proof: refPtr(p.Dormancy)}
	case !config.Ready:
		return config
	case !p.Activated:
		return Fact{State: StateNotActivated, Reason: "the provider has not been activated"}
	case !live.Ready:
		return live
	}
	proofs := []EventRef{p.Activation, derefOr(config.Proof), derefOr(live.Proof)}
	bindingNote := "no binding required"
	if p.BindingID != "" || p.BindingRequired || pol.BindingRequired(p.Profile) {
		if p.BindingID == "" {
			return Fact{State: CodeBindingRequired, Reason: fmt.Sprintf("profile %s requires a verified binding and the activation names none", p.Profile), Proof: refPtr(p.Activation)}
		}
		bf := bindingFact(p, b)
		if !bf.Ready {
			return bf
		}
		if b.Identity != p.BindingIdentity {
			return Fact{State: CodeIdentityMismatch, Reason: fmt.Sprintf("binding %s has identity %s, the activation recorded %s", b.ID, b.Identity, p.BindingIdentity), Proof: refPtr(b.Verification)}
		}
		proofs = append(proofs, b.Verification)
		bindingNote = "binding " + b.ID + " verified"
	}
	return Fact{Ready: true, State: ReadyActivation, Reason: "configured, activated, live-proven; " + bindingNote, Proof: refPtr(newest(proofs...))}
}

func eligibleFact(p Provider, config, activation Fact) Fact {
	switch {
	case activation.Ready:
		return activation
	case p.Declared && !p.Dormant && config.Ready && p.Scope == ScopeDirectReplyOnly:
		return Fact{Ready: true, State: ReadyDirectReplyOnly,
			Reason: "a configured endpoint scoped to direct replies only; eligible for a direct reply, not for a mission's exact gate", Proof: config.Proof}
	}
	return activation
}

// newest returns the reference with the highest position.
func newest(refs ...EventRef) EventRef {
	var out EventRef
	for _, r := range refs {
		if r != (EventRef{}) && (out == (EventRef{}) || r.Position > out.Position) {
			out = r
		}
	}
	return out
}

func derefOr(r *EventRef) EventRef {
	if r == nil {
		return EventRef{}
	}
	return *r
}

// factCode maps a failed column state to the refusal code of the gate.
func factCode(state string) string {
	switch state {
	case StateEndpointMissing, StateModelTagMissing:
		return CodeNotConfigured
	case StateNotProbed, StateProbeUnsigned, StateProbeFailed, StateProbeRefused, StateProbeUnreach, StateProbeTimeout, StateTagNotListed, StateStale:
		return CodeNotLiveProven
	case StateNotActivated:
		return CodeNotActivated
	}
	return state // the state is itself a code
}

// factRefusal turns a failed column into a Refusal.
func factRefusal(provider, column string, f Fact) *Refusal {
	det := map[string]any{"provider": provider, "column": column, "state": f.State}
	if f.Proof != nil {
		det["proof"] = *f.Proof
	}
	return refuse(factCode(f.State), det, "provider %s: %s", provider, f.Reason)
}
