package aggregates

// Mission inference: each inference request of an attempt is reserved
// against the mission's budgets, settled with its receipt, and, when its
// outcome is uncertain, reconciled with evidence before anything else
// runs.

// ReserveInference reserves one inference request of the running attempt.
type ReserveInference struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// ReservationID is the inference reservation's id, unique within the
	// mission.
	ReservationID ID `json:"reservation_id"`
}

// CommandName implements Command.
func (*ReserveInference) CommandName() string { return "ReserveInference" }

// Streams implements Command: the streams this command reads.
func (c *ReserveInference) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *ReserveInference) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if err := m.open(false); err != nil {
		return nil, err
	}
	a, err := m.needAttempt()
	if err != nil {
		return nil, err
	}
	if err := m.noUncertainty(); err != nil {
		return nil, err
	}
	if _, ok := m.Reservations[string(c.ReservationID)]; ok {
		return nil, refuse(CodeReservationExists, map[string]any{"mission_id": m.ID, "reservation_id": c.ReservationID},
			"reservation %s already exists", c.ReservationID)
	}
	if open := m.openReservation(); open != "" {
		return nil, refuse(CodeReservationOpen, map[string]any{"mission_id": m.ID, "reservation_id": open},
			"inference %s is reserved and not settled", open)
	}
	switch {
	case m.Reserved >= m.Budgets.InferenceRequests:
		return nil, budgetExhausted(m, "inference_requests", m.Reserved, m.Budgets.InferenceRequests)
	case m.Errors > m.Budgets.ErrorRecoveryCycles:
		return nil, budgetExhausted(m, "error_recovery_cycles", m.Errors-1, m.Budgets.ErrorRecoveryCycles)
	case in.At.Sub(a.StartedAt) > m.Budgets.AttemptTimeout.Duration:
		return nil, budgetExhausted(m, "attempt_timeout", in.At.Sub(a.StartedAt).String(), m.Budgets.AttemptTimeout.String())
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeInferenceReserved, Data: InferenceReserved{
		MissionID: m.ID, ReservationID: string(c.ReservationID), Attempt: a.N, Ordinal: m.Reserved + 1,
		Provider: a.Provider, ModelTag: a.ModelTag, BindingIdentity: a.BindingIdentity, At: in.At,
	}}}, nil
}

// SettleInference settles a reservation with the call's receipt. It is
// accepted even on a stopped mission: what happened is always recorded.
type SettleInference struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// ReservationID is the inference reservation's id, unique within the
	// mission.
	ReservationID ID `json:"reservation_id"`
	// Outcome is how the inference ended: completed,
	// rejected_before_generation or uncertain.
	Outcome InferenceOutcome `json:"outcome"`
	// Receipt is the inference call's receipt.
	Receipt Receipt `json:"receipt"`
}

// CommandName implements Command.
func (*SettleInference) CommandName() string { return "SettleInference" }

// Validate implements crossFieldRules: what a receipt carries depends on the outcome.
func (c *SettleInference) Validate() error {
	r := c.Receipt
	if c.Outcome == OutcomeCompleted {
		if err := Hex64(r.ResponseSHA256).check("receipt.response_sha256"); err != nil {
			return err
		}
	}
	switch c.Outcome {
	case OutcomeCompleted:
		if r.FinishReason == "" {
			return checkRequiredEnum("receipt.finish_reason", r.FinishReason)
		}
		return nil
	case OutcomeRejectedBeforeGeneration:
		if r.TokensOut != 0 {
			return invalid("receipt.tokens_out", "is %d; a request rejected before generation produced no tokens", r.TokensOut)
		}
	}
	if r.FinishReason != "" {
		return invalid("receipt.finish_reason", "must be empty unless the outcome is completed: no finish was observed")
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *SettleInference) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *SettleInference) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if !m.Submitted {
		return nil, missionUnknown(string(c.MissionID))
	}
	r, ok := m.Reservations[string(c.ReservationID)]
	if !ok {
		return nil, refuse(CodeReservationUnknown, map[string]any{"mission_id": m.ID, "reservation_id": c.ReservationID}, "no reservation %s", c.ReservationID)
	}
	if r.Outcome != "" {
		return nil, refuse(CodeReservationSettled, map[string]any{"mission_id": m.ID, "reservation_id": r.ID, "outcome": r.Outcome},
			"reservation %s was already settled (%s)", r.ID, r.Outcome)
	}
	rc := c.Receipt
	if string(rc.Provider) != r.Provider || string(rc.ModelTag) != r.ModelTag || (r.BindingIdentity != "" && string(rc.BindingIdentity) != r.BindingIdentity) {
		return nil, refuse(CodeReceiptIdentityMismatch, map[string]any{"mission_id": m.ID, "reservation_id": r.ID,
			"reserved": map[string]any{"provider": r.Provider, "model_tag": r.ModelTag, "binding_identity": r.BindingIdentity},
			"receipt":  map[string]any{"provider": rc.Provider, "model_tag": rc.ModelTag, "binding_identity": rc.BindingIdentity}},
			"the receipt names %s %s, the reservation %s %s: exact identity, no substitution", rc.Provider, rc.ModelTag, r.Provider, r.ModelTag)
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeInferenceSettled, Data: InferenceSettled{
		MissionID: m.ID, ReservationID: r.ID, Attempt: r.Attempt, Outcome: string(c.Outcome), Receipt: rc, At: in.At,
	}}}, nil
}

// ReconcileReservation releases an uncertain reservation with evidence of
// what happened. The reservation still counts against the budget.
type ReconcileReservation struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// ReservationID is the inference reservation's id, unique within the
	// mission.
	ReservationID ID `json:"reservation_id"`
	// Resolution is how the reservation was resolved: completed or
	// not_generated.
	Resolution Resolution `json:"resolution"`
	// Evidence are what grounds the resolution (provider logs, receipts), in
	// words an auditor can follow; may be empty.
	Evidence ShortTexts `json:"evidence"`
}

// CommandName implements Command.
func (*ReconcileReservation) CommandName() string { return "ReconcileReservation" }

// Streams implements Command: the streams this command reads.
func (c *ReconcileReservation) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *ReconcileReservation) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if !m.Submitted {
		return nil, missionUnknown(string(c.MissionID))
	}
	r, ok := m.Reservations[string(c.ReservationID)]
	if !ok {
		return nil, refuse(CodeReservationUnknown, map[string]any{"mission_id": m.ID, "reservation_id": c.ReservationID}, "no reservation %s", c.ReservationID)
	}
	if r.Outcome != OutcomeUncertain || r.Reconciled {
		return nil, refuse(CodeReservationNotUncertain, map[string]any{"mission_id": m.ID, "reservation_id": r.ID, "outcome": r.Outcome, "reconciled": r.Reconciled},
			"reservation %s is not an unreconciled uncertain one", r.ID)
	}
	if len(c.Evidence) == 0 {
		return nil, refuse(CodeEvidenceMissing, map[string]any{"mission_id": m.ID, "reservation_id": r.ID},
			"an uncertain inference is released only with evidence of what happened")
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeReservationReconciled, Data: ReservationReconciled{
		MissionID: m.ID, ReservationID: r.ID, Resolution: string(c.Resolution), Evidence: c.Evidence, At: in.At,
	}}}, nil
}
