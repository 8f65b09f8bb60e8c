package aggregates

// Mission attempts: starting an attempt on the routed provider (with the
// startup approval and admission a runtime start needs), and ending it
// before the mission ends.

// StartAttempt starts the next attempt on the routed provider. The provider
// must still pass the mission's gate at the command's time. A mission that
// starts a runtime also needs a "startup" approval for "provider-<name>"
// (spent by this start) and an admitted, fresh admission for this attempt.
type StartAttempt struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// ApprovalID is the startup approval to spend when the mission starts a
	// runtime; empty otherwise.
	ApprovalID OptionalID `json:"approval_id"`
}

// CommandName implements Command.
func (*StartAttempt) CommandName() string { return "StartAttempt" }

// Streams implements Command: the streams this command reads.
func (c *StartAttempt) Streams(loaded States) []string {
	s := []string{MissionStream(c.MissionID)}
	if c.ApprovalID != "" {
		s = append(s, ApprovalStream(c.ApprovalID))
	}
	if m, ok := loaded[MissionStream(c.MissionID)].(Mission); ok && m.Route != nil {
		s = append(s, providerStreams(loaded, m.Route.Selected)...)
	}
	return s
}

// Decide implements Command: the gates.
func (c *StartAttempt) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if err := m.open(true); err != nil {
		return nil, err
	}
	if m.Route == nil {
		return nil, refuse(CodeRouteMissing, map[string]any{"mission_id": m.ID}, "mission %s has no route; decide one first", m.ID)
	}
	if a := m.activeAttempt(); a != nil {
		return nil, refuse(CodeAttemptInProgress, map[string]any{"mission_id": m.ID, "attempt": a.N}, "attempt %d of mission %s is running", a.N, m.ID)
	}
	if err := m.noUncertainty(); err != nil {
		return nil, err
	}
	if m.Attempts >= m.Budgets.Attempts {
		return nil, budgetExhausted(m, "attempts", m.Attempts, m.Budgets.Attempts)
	}
	p := in.States.Provider(m.Route.Selected)
	r := ProviderReadiness(p, in.States.Binding(p.BindingID), in.At, in.Policy)
	if err := gateProvider(m, p, r, m.Route.Selected == m.DeclaredProvider); err != nil {
		return nil, err
	}
	if p.ModelTag != m.Route.ModelTag || p.BindingIdentity != m.Route.BindingIdentity {
		return nil, refuse(CodeRouteStale, map[string]any{"mission_id": m.ID, "provider": p.Name,
			"routed": map[string]any{"model_tag": m.Route.ModelTag, "binding_identity": m.Route.BindingIdentity},
			"now":    map[string]any{"model_tag": p.ModelTag, "binding_identity": p.BindingIdentity}},
			"provider %s serves another model or binding than when mission %s was routed; decide the route again", p.Name, m.ID)
	}
	n := m.Attempts + 1
	started := AttemptStarted{MissionID: m.ID, Attempt: n, Provider: p.Name, ModelTag: p.ModelTag,
		BindingIdentity: p.BindingIdentity, Readiness: missionFact(m, r), At: in.At}
	out := []NewEvent{{Stream: MissionStream(m.ID), Type: TypeAttemptStarted}}
	if m.StartsRuntime {
		consume, err := in.States.Approval(string(c.ApprovalID)).Authorize(ActionStartup, ProviderStream(p.Name), c.CommandName(), in.At)
		if err != nil {
			return nil, err
		}
		if err := m.admitted(n, in); err != nil {
			return nil, err
		}
		started.ApprovalID = string(c.ApprovalID)
		started.Admission = refPtr(m.Admission.Ref)
		out = append(out, consume)
	}
	out[0].Data = started
	return out, nil
}

// StopAttempt ends the running attempt (a resource guard, a timeout, the
// worker exiting, a cancellation). The mission stays open for another
// attempt within its budget.
type StopAttempt struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// Reason is why the attempt stops: one of the values its schema lists.
	Reason AttemptStopReason `json:"reason"`
	// Detail says more, in words; empty when there is nothing to add.
	Detail OptionalLongText `json:"detail"`
	// Evidence are references to what grounds it (event ids or measurement
	// ids), in words an auditor can follow; may be empty.
	Evidence ShortTexts `json:"evidence"`
}

// CommandName implements Command.
func (*StopAttempt) CommandName() string { return "StopAttempt" }

// Streams implements Command: the streams this command reads.
func (c *StopAttempt) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *StopAttempt) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if err := m.open(false); err != nil {
		return nil, err
	}
	a, err := m.needAttempt()
	if err != nil {
		return nil, err
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeAttemptStopped, Data: AttemptStopped{
		MissionID: m.ID, Attempt: a.N, Reason: string(c.Reason), Detail: string(c.Detail), Evidence: c.Evidence, At: in.At,
	}}}, nil
}
