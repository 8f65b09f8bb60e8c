package aggregates

// Mission gates: the refusal codes of the Mission commands, and the gates
// several of them share (an open mission, a running attempt, no uncertain
// inference, a budget left).

// Refusal codes of the Mission gates (routing codes are in routing.go,
// admission codes in admission.go).
const (
	// CodeMissionExists: a mission id is submitted once.
	CodeMissionExists = "mission_exists"
	// CodeMissionUnknown: no mission was submitted under this id.
	CodeMissionUnknown = "mission_unknown"
	// CodeMissionStopped: the mission is stopped; nothing more runs on it.
	CodeMissionStopped = "mission_stopped"
	// CodeMissionDelivered: the mission delivered its result; no new work
	// runs on it.
	CodeMissionDelivered = "mission_delivered"
	// CodeTruncatedGeneration: the generation ended on its output limit
	// without a candidate, so no check can run and nothing can be accepted.
	CodeTruncatedGeneration = "truncated_generation"
	// CodeStopNotRevisable: a stagnation or authority_refused stop is never
	// revised by a correction or a new attempt.
	CodeStopNotRevisable = "stop_not_revisable"
	// CodeRouteMissing: no route was decided.
	CodeRouteMissing = "route_missing"
	// CodeRouteStale: the routed provider's model or binding changed since
	// the route; decide it again.
	CodeRouteStale = "route_stale"
	// CodeAttemptInProgress: an attempt is running.
	CodeAttemptInProgress = "attempt_in_progress"
	// CodeAttemptNotStarted: no attempt is running.
	CodeAttemptNotStarted = "attempt_not_started"
	// CodeBudgetExhausted: a budget of the mission is spent (details.budget
	// names it: attempts, inference_requests, error_recovery_cycles,
	// attempt_timeout).
	CodeBudgetExhausted = "budget_exhausted"
	// CodeInferenceUncertain: an inference is uncertain and unreconciled; no
	// new inference or attempt until ReservationReconciled.
	CodeInferenceUncertain = "inference_uncertain"
	// CodeReservationOpen: an inference is reserved and not settled.
	CodeReservationOpen = "reservation_open"
	// CodeReservationExists: the reservation id is taken.
	CodeReservationExists = "reservation_exists"
	// CodeReservationUnknown: no reservation under this id.
	CodeReservationUnknown = "reservation_unknown"
	// CodeReservationSettled: the reservation is already settled.
	CodeReservationSettled = "reservation_settled"
	// CodeReservationNotUncertain: only an uncertain, unreconciled
	// reservation can be reconciled.
	CodeReservationNotUncertain = "reservation_not_uncertain"
	// CodeEvidenceMissing: a reconciliation without evidence.
	CodeEvidenceMissing = "evidence_missing"
	// CodeReceiptIdentityMismatch: the receipt names another provider,
	// model tag or binding identity than the reservation.
	CodeReceiptIdentityMismatch = "receipt_identity_mismatch"
	// CodeCandidateNotExpected: no attempt start or correction is waiting
	// for a candidate.
	CodeCandidateNotExpected = "candidate_not_expected"
	// CodeCandidateDuplicate: this candidate hash was already produced; a
	// correction that changes nothing is not a new candidate.
	CodeCandidateDuplicate = "candidate_duplicate"
	// CodeFileNotAllowed: the candidate changes a file outside the allowed
	// files.
	CodeFileNotAllowed = "file_not_allowed"
	// CodeCandidateUnknown: no candidate with this hash.
	CodeCandidateUnknown = "candidate_unknown"
	// CodeCandidateSuperseded: a newer candidate exists.
	CodeCandidateSuperseded = "candidate_superseded"
	// CodeCandidateAccepted: the candidate was accepted; no correction.
	CodeCandidateAccepted = "candidate_accepted"
	// CodeCheckUnknown: the check id is not an acceptance check.
	CodeCheckUnknown = "check_unknown"
	// CodeArgvMismatch: the check ran another argv than the approved one.
	CodeArgvMismatch = "argv_mismatch"
	// CodeCheckOutOfBounds: a pass reported beyond the per-command time or
	// output budget cannot count.
	CodeCheckOutOfBounds = "check_out_of_bounds"
	// CodeCheckOutcomeIncoherent: a pass with a nonzero exit code says two
	// things at once; it is refused (and the attempt recorded), stated or
	// signed.
	CodeCheckOutcomeIncoherent = "check_outcome_incoherent"
	// CodeChecksIncomplete: an acceptance check has no independent result
	// for this candidate.
	CodeChecksIncomplete = "checks_incomplete"
	// CodeChecksNotPassed: an acceptance check failed, was skipped,
	// truncated or errored for this candidate.
	CodeChecksNotPassed = "checks_not_passed"
	// CodeCoverageIncomplete: an accepted review lacks coverage for an
	// acceptance id.
	CodeCoverageIncomplete = "coverage_incomplete"
	// CodeCoverageUnknownCheck: coverage names an id that is not an
	// acceptance check.
	CodeCoverageUnknownCheck = "coverage_unknown_check"
	// CodeCorrectionLimit: the corrections budget is spent.
	CodeCorrectionLimit = "correction_limit"
	// CodeCorrectionPending: a correction is already waiting for its
	// candidate.
	CodeCorrectionPending = "correction_pending"
	// CodeReviewNotAccepted: delivery or integration without an accepted
	// review.
	CodeReviewNotAccepted = "review_not_accepted"
	// CodeCandidateHashMismatch: the accepted review (or earlier delivery,
	// integration) names another candidate hash.
	CodeCandidateHashMismatch = "candidate_hash_mismatch"
	// CodePatchHashMismatch: the patch hash is not the accepted candidate's.
	CodePatchHashMismatch = "patch_hash_mismatch"
	// CodeDeliveryConflict: the mission already delivered another
	// candidate. (A second delivery of the same one appends nothing.)
	CodeDeliveryConflict = "delivery_conflict"
)

func missionUnknown(id string) *Refusal {
	return refuse(CodeMissionUnknown, map[string]any{"mission_id": id}, "no mission was submitted under the id %q", id)
}

// stopped refuses a stopped mission: truncated_generation for a
// truncation, stop_not_revisable for a stagnation or authority refusal when
// revise is set (a correction or a new attempt), mission_stopped otherwise.
func (m Mission) stopped(revise bool) *Refusal {
	if m.Stop == nil {
		return nil
	}
	det := map[string]any{"mission_id": m.ID, "reason": m.Stop.Reason, "stop": m.Stop.Ref}
	switch {
	case m.Stop.Reason == StopTruncatedGeneration:
		return refuse(CodeTruncatedGeneration, det, "mission %s stopped on a truncated generation: no candidate, so no check can run and nothing can be accepted", m.ID)
	case revise && (m.Stop.Reason == StopStagnation || m.Stop.Reason == StopAuthorityRefused):
		return refuse(CodeStopNotRevisable, det, "mission %s stopped for %s, which is not revised", m.ID, m.Stop.Reason)
	}
	return refuse(CodeMissionStopped, det, "mission %s is stopped (%s)", m.ID, m.Stop.Reason)
}

// open refuses commands that start new work on a mission that is unknown,
// stopped or delivered.
func (m Mission) open(revise bool) error {
	if !m.Submitted {
		return missionUnknown(m.ID)
	}
	if r := m.stopped(revise); r != nil {
		return r
	}
	if m.Delivery != nil {
		return refuse(CodeMissionDelivered, map[string]any{"mission_id": m.ID, "delivery": m.Delivery.Ref},
			"mission %s delivered its result; no new work runs on it", m.ID)
	}
	return nil
}

func (m Mission) needAttempt() (*Attempt, error) {
	a := m.activeAttempt()
	if a == nil {
		return nil, refuse(CodeAttemptNotStarted, map[string]any{"mission_id": m.ID}, "mission %s has no running attempt", m.ID)
	}
	return a, nil
}

func (m Mission) noUncertainty() error {
	if u := m.Uncertain(); len(u) > 0 {
		return refuse(CodeInferenceUncertain, map[string]any{"mission_id": m.ID, "reservations": u},
			"inference %v is uncertain; no new inference or attempt until it is reconciled with evidence", u)
	}
	return nil
}

func budgetExhausted(m Mission, budget string, used, limit any) *Refusal {
	return refuse(CodeBudgetExhausted, map[string]any{"mission_id": m.ID, "budget": budget, "used": used, "limit": limit},
		"mission %s spent its %s budget (%v of %v)", m.ID, budget, used, limit)
}

// missionOf returns the state of mission-<id>, with its id set even when
// the mission does not exist, so refusals can name it.
func missionOf(in Inputs, id string) Mission {
	m := in.States.Mission(id)
	if m.ID == "" {
		m.ID = id
	}
	return m
}
