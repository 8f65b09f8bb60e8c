package aggregates

import (
	"fmt"
	"slices"
	"time"
)

// Routing: which provider a mission runs on, and why.
//
// The rules (DOMAIN.md "Routing", seeds "Sélection d'un moteur"):
//   - The mission's declared provider is tried first; when it passes the
//     gate it is selected (fallback false).
//   - Otherwise the candidates named by the command are tried in order,
//     local ones first, then connected ones; the first that passes is
//     selected and the route records fallback true when a declared provider
//     was refused.
//   - The gate: declared, not dormant, activation_ready (eligible_for_attempt
//     for a direct reply), serving the mission's task class; a connected
//     provider only when the mission allows connected providers, and never
//     for a confidential mission unless it is the provider the mission
//     itself declared (no implicit fallback exports a confidential mission).
//   - No candidate: confidential_export when a connected provider was
//     refused only for confidentiality, else the declared provider's code,
//     else the only candidate's code, else no_eligible_provider. An empty
//     inventory is never "all ready".
//
// RouteDecided records every candidate's readiness (state, reason, proof)
// and the log position the streams were read at.

// Routing refusal codes.
const (
	// CodeTaskClassNotServed: the provider does not declare the mission's
	// task class.
	CodeTaskClassNotServed = "task_class_not_served"
	// CodeConnectedNotAllowed: the provider is connected and the mission's
	// route does not allow connected providers.
	CodeConnectedNotAllowed = "connected_not_allowed"
	// CodeConfidentialExport: a confidential mission would be sent to a
	// connected provider by an implicit fallback.
	CodeConfidentialExport = "confidential_export"
	// CodeNoEligibleProvider: no candidate passes the gate (or none was
	// named).
	CodeNoEligibleProvider = "no_eligible_provider"
)

// RouteDecided is the data of TypeRouteDecided.
type RouteDecided struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// DeclaredProvider is the provider the mission asks for; empty lets
	// routing choose.
	DeclaredProvider string `json:"declared_provider,omitempty"`
	// Selected is the provider selected.
	Selected string `json:"selected"`
	// SelectedKind is the selected provider's scope: local or connected.
	SelectedKind string `json:"selected_kind"`
	// ModelTag is the selected provider's model tag.
	ModelTag string `json:"model_tag"`
	// BindingID is the selected provider's verified binding; empty when it
	// needs none.
	BindingID string `json:"binding_id,omitempty"`
	// BindingIdentity is the verified binding's identity ("sha256:" and 64
	// hex); empty when the provider needs no binding.
	BindingIdentity string `json:"binding_identity,omitempty"`
	// Fallback is true when the declared provider was refused and another
	// was selected.
	Fallback bool `json:"fallback"`
	// Reasons explain the choice, one sentence each, in order.
	Reasons []string `json:"reasons"`
	// Candidates are every provider considered, with the readiness used.
	Candidates []RouteCandidate `json:"candidates"`
	// ReadPosition is the log size the readiness was read at.
	ReadPosition uint64 `json:"read_position"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// RouteCandidate is one provider considered by a route.
type RouteCandidate struct {
	// Provider is the provider considered.
	Provider string `json:"provider"`
	// Readiness is the provider's readiness as read for the route.
	Readiness Readiness `json:"readiness"`
	// Refusal is the gate's code when the provider was refused.
	Refusal string `json:"refusal,omitempty"`
	// Reason says why it was refused or selected.
	Reason string `json:"reason,omitempty"`
	// Selected says whether it was the one selected.
	Selected bool `json:"selected"`
}

// DecideRoute routes a mission. Candidates name the providers to consider
// besides the mission's declared provider, in order of preference.
type DecideRoute struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// Candidates are the providers routing may choose from, in order of
	// preference; empty considers every provider.
	Candidates IDs `json:"candidates"`
}

// CommandName implements Command.
func (*DecideRoute) CommandName() string { return "DecideRoute" }

// names returns the declared provider then the candidates, without
// repeats.
func (c *DecideRoute) names(m Mission) []string {
	var out []string
	if m.DeclaredProvider != "" {
		out = append(out, m.DeclaredProvider)
	}
	for _, n := range c.Candidates {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Streams implements Command: the streams this command reads.
func (c *DecideRoute) Streams(loaded States) []string {
	s := []string{MissionStream(c.MissionID)}
	m, _ := loaded[MissionStream(c.MissionID)].(Mission)
	for _, n := range c.names(m) {
		s = append(s, providerStreams(loaded, n)...)
	}
	return s
}

// providerStreams returns provider-<name> and, once it is loaded and names
// a binding, that binding's stream.
func providerStreams(loaded States, name string) []string {
	s := []string{ProviderStream(name)}
	if p, ok := loaded[ProviderStream(name)].(Provider); ok && p.BindingID != "" {
		s = append(s, BindingStream(p.BindingID))
	}
	return s
}

// Decide implements Command: the gates.
func (c *DecideRoute) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if err := m.open(false); err != nil {
		return nil, err
	}
	if a := m.activeAttempt(); a != nil {
		return nil, refuse(CodeAttemptInProgress, map[string]any{"mission_id": m.ID, "attempt": a.N},
			"attempt %d of mission %s is running; the route cannot change under it", a.N, m.ID)
	}
	names := c.names(m)
	if len(names) == 0 {
		return nil, refuse(CodeNoEligibleProvider, map[string]any{"mission_id": m.ID, "candidates": []string{}},
			"mission %s declares no provider and the route names no candidate: an empty inventory is not ready", m.ID)
	}
	cands := make([]RouteCandidate, len(names))
	refusals := make([]*Refusal, len(names))
	for i, n := range names {
		p := in.States.Provider(n)
		r := ProviderReadiness(p, in.States.Binding(p.BindingID), in.At, in.Policy)
		r.Provider = n
		cands[i] = RouteCandidate{Provider: n, Readiness: r}
		if ref := gateProvider(m, p, r, n == m.DeclaredProvider); ref != nil {
			refusals[i] = ref
			cands[i].Refusal, cands[i].Reason = ref.Code, ref.Message
		}
	}
	sel := -1
	var reasons []string
	if m.DeclaredProvider != "" {
		if refusals[0] == nil {
			sel = 0
			reasons = append(reasons, fmt.Sprintf("declared provider %s passes the %s gate", names[0], factName(m)))
		} else {
			reasons = append(reasons, fmt.Sprintf("declared provider %s refused: %s", names[0], refusals[0].Message))
		}
	}
	for _, kind := range []string{KindLocal, KindConnected} {
		for i := range names {
			if sel >= 0 {
				break
			}
			if refusals[i] == nil && cands[i].Readiness.Kind == kind {
				sel = i
				reasons = append(reasons, fmt.Sprintf("selected %s provider %s: the first candidate that passes the %s gate, local first", kind, names[i], factName(m)))
			}
		}
	}
	if sel < 0 {
		return nil, routeRefusal(m, cands, refusals)
	}
	cands[sel].Selected = true
	p := in.States.Provider(names[sel])
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeRouteDecided, Data: RouteDecided{
		MissionID: m.ID, DeclaredProvider: m.DeclaredProvider, Selected: p.Name, SelectedKind: p.Kind,
		ModelTag: p.ModelTag, BindingID: p.BindingID, BindingIdentity: p.BindingIdentity,
		Fallback: m.DeclaredProvider != "" && sel != 0, Reasons: reasons, Candidates: cands,
		ReadPosition: in.Position, At: in.At,
	}}}, nil
}

func routeRefusal(m Mission, cands []RouteCandidate, refusals []*Refusal) *Refusal {
	// Each candidate keeps its refusal's column and precise state
	// (not_probed, stale, tag_not_listed, …) as docs/GATES.md promises;
	// a refusal that carries one candidate's code (the declared provider,
	// or the only one) also carries its provider, column and state at the
	// top, as StartAttempt's refusal does.
	det := make([]map[string]any, len(cands))
	for i, c := range cands {
		det[i] = map[string]any{"provider": c.Provider, "refusal": c.Refusal}
		for _, k := range []string{"column", "state"} {
			if v, ok := refusals[i].Details[k]; ok {
				det[i][k] = v
			}
		}
	}
	details := map[string]any{"mission_id": m.ID, "candidates": det}
	for i, r := range refusals {
		if r.Code == CodeConfidentialExport {
			return refuse(CodeConfidentialExport, details,
				"mission %s is confidential and the only provider that passes the gate, %s, is connected; it is not exported by fallback", m.ID, cands[i].Provider)
		}
	}
	first := refusals[0]
	if m.DeclaredProvider != "" || len(refusals) == 1 {
		for _, k := range []string{"provider", "column", "state"} {
			if v, ok := first.Details[k]; ok {
				details[k] = v
			}
		}
		return refuse(first.Code, details, "%s", first.Message)
	}
	return refuse(CodeNoEligibleProvider, details, "no candidate provider passes the %s gate for mission %s", factName(m), m.ID)
}

// factName names the readiness column a mission's gate needs.
func factName(m Mission) string {
	if m.Mode == ModeDirectReply {
		return "eligible_for_attempt"
	}
	return "activation_ready"
}

// missionFact returns the readiness column a mission's gate needs.
func missionFact(m Mission, r Readiness) Fact {
	if m.Mode == ModeDirectReply {
		return r.EligibleForAttempt
	}
	return r.ActivationReady
}

// gateProvider is the mission's gate on one provider. explicit is true for
// the provider the mission itself declared.
func gateProvider(m Mission, p Provider, r Readiness, explicit bool) *Refusal {
	switch {
	case !p.Declared:
		return providerUnknown(r.Provider)
	case p.Dormant:
		return factRefusal(p.Name, "activation_ready", r.ActivationReady)
	}
	if f := missionFact(m, r); !f.Ready {
		return factRefusal(p.Name, factName(m), f)
	}
	if !slices.Contains(p.TaskClasses, m.TaskClass) {
		return refuse(CodeTaskClassNotServed, map[string]any{"provider": p.Name, "task_class": m.TaskClass, "task_classes": p.TaskClasses},
			"provider %s does not serve task class %s", p.Name, m.TaskClass)
	}
	if p.Kind != KindLocal {
		if m.Confidential && !explicit {
			return refuse(CodeConfidentialExport, map[string]any{"provider": p.Name, "kind": p.Kind},
				"mission %s is confidential and provider %s is connected: no implicit fallback exports it", m.ID, p.Name)
		}
		if !m.AllowConnected {
			return refuse(CodeConnectedNotAllowed, map[string]any{"provider": p.Name, "kind": p.Kind},
				"provider %s is connected and mission %s does not allow connected providers", p.Name, m.ID)
		}
	}
	return nil
}
