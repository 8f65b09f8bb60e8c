package aggregates

// Mission inference: each inference request of an attempt is reserved
// against the mission's budgets, settled with its receipt, and, when its
// outcome is uncertain, reconciled with evidence before anything else
// runs.

// ReserveInference reserves one inference request of the running attempt.
type ReserveInference struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// ReservationID is the inference reservation's id, unique within the
	// mission.
	ReservationID string `json:"reservation_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
}

// CommandName implements Command.
func (*ReserveInference) CommandName() string { return "ReserveInference" }

// Validate implements Command: the shape checks, field by field.
func (c *ReserveInference) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	return checkID("reservation_id", c.ReservationID)
}

// Streams implements Command: the streams this command reads.
func (c *ReserveInference) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *ReserveInference) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, c.MissionID)
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
	if _, ok := m.Reservations[c.ReservationID]; ok {
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
		MissionID: m.ID, ReservationID: c.ReservationID, Attempt: a.N, Ordinal: m.Reserved + 1,
		Provider: a.Provider, ModelTag: a.ModelTag, BindingIdentity: a.BindingIdentity, At: in.At,
	}}}, nil
}

// SettleInference settles a reservation with the call's receipt. It is
// accepted even on a stopped mission: what happened is always recorded.
type SettleInference struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// ReservationID is the inference reservation's id, unique within the
	// mission.
	ReservationID string `json:"reservation_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// Outcome is how the inference ended: completed,
	// rejected_before_generation or uncertain.
	Outcome string `json:"outcome" jsonschema:"enum=completed,enum=rejected_before_generation,enum=uncertain"`
	// Receipt is the inference call's receipt.
	Receipt Receipt `json:"receipt"`
}

// CommandName implements Command.
func (*SettleInference) CommandName() string { return "SettleInference" }

// Validate implements Command: the shape checks, field by field.
func (c *SettleInference) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkID("reservation_id", c.ReservationID); err != nil {
		return err
	}
	if err := checkOneOf("outcome", c.Outcome, OutcomeCompleted, OutcomeRejectedBeforeGeneration, OutcomeUncertain); err != nil {
		return err
	}
	r := c.Receipt
	if err := checkID("receipt.provider", r.Provider); err != nil {
		return err
	}
	if err := checkText("receipt.model_tag", r.ModelTag, true, maxShortText); err != nil {
		return err
	}
	if err := checkDigest("receipt.binding_identity", r.BindingIdentity, false); err != nil {
		return err
	}
	if err := checkSHA256("receipt.request_sha256", r.RequestSHA256, true); err != nil {
		return err
	}
	if err := checkSHA256("receipt.response_sha256", r.ResponseSHA256, c.Outcome == OutcomeCompleted); err != nil {
		return err
	}
	if r.TokensIn < 0 || r.TokensOut < 0 {
		return invalid("receipt.tokens_out", "token counts must be >= 0")
	}
	if r.Duration.Duration < 0 {
		return invalid("receipt.duration", "is %s; must be >= 0", r.Duration)
	}
	switch c.Outcome {
	case OutcomeCompleted:
		return checkOneOf("receipt.finish_reason", r.FinishReason, FinishStop, FinishLength, FinishError, FinishNoFinalAnswer)
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
	m := missionOf(in, c.MissionID)
	if !m.Submitted {
		return nil, missionUnknown(c.MissionID)
	}
	r, ok := m.Reservations[c.ReservationID]
	if !ok {
		return nil, refuse(CodeReservationUnknown, map[string]any{"mission_id": m.ID, "reservation_id": c.ReservationID}, "no reservation %s", c.ReservationID)
	}
	if r.Outcome != "" {
		return nil, refuse(CodeReservationSettled, map[string]any{"mission_id": m.ID, "reservation_id": r.ID, "outcome": r.Outcome},
			"reservation %s was already settled (%s)", r.ID, r.Outcome)
	}
	rc := c.Receipt
	if rc.Provider != r.Provider || rc.ModelTag != r.ModelTag || (r.BindingIdentity != "" && rc.BindingIdentity != r.BindingIdentity) {
		return nil, refuse(CodeReceiptIdentityMismatch, map[string]any{"mission_id": m.ID, "reservation_id": r.ID,
			"reserved": map[string]any{"provider": r.Provider, "model_tag": r.ModelTag, "binding_identity": r.BindingIdentity},
			"receipt":  map[string]any{"provider": rc.Provider, "model_tag": rc.ModelTag, "binding_identity": rc.BindingIdentity}},
			"the receipt names %s %s, the reservation %s %s: exact identity, no substitution", rc.Provider, rc.ModelTag, r.Provider, r.ModelTag)
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeInferenceSettled, Data: InferenceSettled{
		MissionID: m.ID, ReservationID: r.ID, Attempt: r.Attempt, Outcome: c.Outcome, Receipt: rc, At: in.At,
	}}}, nil
}

// ReconcileReservation releases an uncertain reservation with evidence of
// what happened. The reservation still counts against the budget.
type ReconcileReservation struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// ReservationID is the inference reservation's id, unique within the
	// mission.
	ReservationID string `json:"reservation_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// Resolution is how the reservation was resolved: completed or
	// not_generated.
	Resolution string `json:"resolution" jsonschema:"enum=completed,enum=not_generated"`
	// Evidence are what grounds the resolution (provider logs, receipts), in
	// words an auditor can follow; may be empty.
	Evidence []string `json:"evidence" jsonschema:"maxItems=256,uniqueItems=true,optional,minLength=1,maxLength=256,pattern=\\S"`
}

// CommandName implements Command.
func (*ReconcileReservation) CommandName() string { return "ReconcileReservation" }

// Validate implements Command: the shape checks, field by field.
func (c *ReconcileReservation) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkID("reservation_id", c.ReservationID); err != nil {
		return err
	}
	if err := checkOneOf("resolution", c.Resolution, ResolutionCompleted, ResolutionNotGenerated); err != nil {
		return err
	}
	return checkList("evidence", c.Evidence)
}

// Streams implements Command: the streams this command reads.
func (c *ReconcileReservation) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *ReconcileReservation) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, c.MissionID)
	if !m.Submitted {
		return nil, missionUnknown(c.MissionID)
	}
	r, ok := m.Reservations[c.ReservationID]
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
		MissionID: m.ID, ReservationID: r.ID, Resolution: c.Resolution, Evidence: c.Evidence, At: in.At,
	}}}, nil
}
