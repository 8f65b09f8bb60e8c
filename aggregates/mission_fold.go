package aggregates

import (
	"errors"
	"maps"
	"slices"

	"github.com/greffe/greffe/events"
)

// Mission fold: how each stored event of a mission stream changes the
// state (Mission.Evolve). Nothing here decides; every gate reads the state
// this builds.

// Evolve folds one event of the mission stream.
func (m Mission) Evolve(e *events.Event) (Mission, error) {
	ref := RefOf(e)
	switch e.Type {
	case TypeMissionSubmitted:
		var d MissionSubmitted
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.ID, m.Submitted, m.TaskClass, m.Mode = d.MissionID, true, d.TaskClass, d.Mode
		m.Confidential, m.AllowConnected, m.DeclaredProvider, m.StartsRuntime = d.Confidential, d.AllowConnected, d.DeclaredProvider, d.StartsRuntime
		m.AllowedFiles, m.Checks, m.Budgets, m.Submission = d.AllowedFiles, d.AcceptanceChecks, d.Budgets, ref
	case TypeRouteDecided:
		var d RouteDecided
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Route = &Route{RouteDecided: d, Ref: ref}
	case TypeAdmissionDecided:
		var d AdmissionDecided
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Admission = &Admission{AdmissionDecided: d, Ref: ref}
	case TypeAttemptStarted:
		var d AttemptStarted
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Attempts++
		m.Attempt = &Attempt{N: d.Attempt, Provider: d.Provider, ModelTag: d.ModelTag, BindingIdentity: d.BindingIdentity, StartedAt: d.At, Ref: ref}
		m.AwaitingCandidate, m.PendingCorrection, m.PendingCorrects = true, 0, ""
	case TypeAttemptStopped:
		var d AttemptStopped
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		if m.Attempt != nil {
			a := *m.Attempt
			a.Ended, a.EndReason = true, d.Reason
			m.Attempt = &a
		}
		m.AwaitingCandidate, m.PendingCorrection, m.PendingCorrects = false, 0, ""
	case TypeInferenceReserved:
		var d InferenceReserved
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		rs := maps.Clone(m.Reservations)
		if rs == nil {
			rs = map[string]Reservation{}
		}
		rs[d.ReservationID] = Reservation{ID: d.ReservationID, Attempt: d.Attempt, Ordinal: d.Ordinal, Provider: d.Provider,
			ModelTag: d.ModelTag, BindingIdentity: d.BindingIdentity, Ref: ref}
		m.Reservations = rs
		m.Reserved++
	case TypeInferenceSettled:
		var d InferenceSettled
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		rs := maps.Clone(m.Reservations)
		r := rs[d.ReservationID]
		r.Outcome, r.FinishReason = d.Outcome, string(d.Receipt.FinishReason)
		rs[d.ReservationID] = r
		m.Reservations = rs
		if d.Outcome == OutcomeRejectedBeforeGeneration || d.Receipt.FinishReason == FinishError {
			m.Errors++
		}
		if d.Outcome == OutcomeCompleted && m.Attempt != nil && m.Attempt.N == r.Attempt {
			a := *m.Attempt
			a.LastFinish, a.LastFinishReservation = string(d.Receipt.FinishReason), d.ReservationID
			m.Attempt = &a
		}
	case TypeReservationReconciled:
		var d ReservationReconciled
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		rs := maps.Clone(m.Reservations)
		r := rs[d.ReservationID]
		r.Reconciled, r.Resolution = true, d.Resolution
		rs[d.ReservationID] = r
		m.Reservations = rs
	case TypeCandidateProduced:
		var d CandidateProduced
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Candidates = append(slices.Clip(m.Candidates), Candidate{CandidateProduced: d, Checks: map[string]CheckTally{}, Ref: ref})
		m.AwaitingCandidate, m.PendingCorrection, m.PendingCorrects = false, 0, ""
	case TypeCheckRecorded:
		var d CheckRecorded
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		i := m.candidateIndex(d.CandidateHash)
		if i < 0 {
			return m, foldError(e, errUnknownCandidate)
		}
		cs := slices.Clone(m.Candidates)
		cs[i] = cs[i].withCheck(d, ref)
		m.Candidates = cs
	case TypeCheckRunSigned:
		// The signed bytes of the CheckRecorded that follows in the same
		// append; that event carries what the mission folds.
		var d CheckRun
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
	case TypeReviewRecorded:
		var d ReviewRecorded
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		r := &Review{ReviewRecorded: d, Ref: ref}
		m.LastReview = r
		if d.Verdict == VerdictAccepted {
			m.Accepted = r
		}
	case TypeCorrectionRequested:
		var d CorrectionRequested
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Corrections++
		m.AwaitingCandidate, m.PendingCorrection, m.PendingCorrects = true, d.Correction, d.CandidateHash
	case TypeMissionStopped:
		var d MissionStopped
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Stop = &Stop{MissionStopped: d, Ref: ref}
		m.AwaitingCandidate = false
	case TypeResultDelivered:
		var d ResultDelivered
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Delivery = &Delivery{ResultDelivered: d, Ref: ref}
	case TypePatchIntegrated:
		var d PatchIntegrated
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Integration = &Integration{PatchIntegrated: d, Ref: ref}
	default:
		return m, foldError(e, ErrUnknownEventType)
	}
	m.Events++
	return m, nil
}

var errUnknownCandidate = errors.New("check recorded for a candidate the mission never produced")

// withCheck returns c with one more check folded; c is not modified.
func (c Candidate) withCheck(d CheckRecorded, ref EventRef) Candidate {
	switch {
	case d.RunnerKind != RunnerIndependent:
		c.WorkerRuns++
		return c
	case !d.Signed():
		c.StatedRuns++
		return c
	}
	checks := maps.Clone(c.Checks)
	if checks == nil {
		checks = map[string]CheckTally{}
	}
	t := checks[d.CheckID]
	t.Runs++
	if d.Outcome == CheckPass {
		if !t.Passed {
			t.Passed, t.PassRef = true, ref
		}
	} else if t.Blocking == "" {
		t.Blocking, t.BlockRef = d.Outcome, ref
	}
	checks[d.CheckID] = t
	c.Checks = checks
	return c
}
