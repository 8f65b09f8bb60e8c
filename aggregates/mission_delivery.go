package aggregates

import (
	"slices"
)

// Mission delivery: the review of a verified candidate, then the delivery
// of the accepted one (exactly once) and the integration of its patch
// under an approval.

// RecordReview records a review of a candidate. An accepted review needs
// verification passed for this exact candidate hash and coverage for every
// acceptance id. A refusal for authority stops the mission
// (authority_refused); a refusal for a defect leaves it open for a
// correction.
type RecordReview struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash Hex64 `json:"candidate_hash"`
	// Verdict is the review's verdict: accepted or refused.
	Verdict Verdict `json:"verdict"`
	// Reviewer is who reviewed it, as stated: an accountable person or
	// role, not the worker. Recorded beside the authenticated principal,
	// never checked against it.
	Reviewer ShortText `json:"reviewer"`
	// Coverage maps each acceptance check id to the evidence the reviewer
	// relied on for it.
	Coverage ReviewCoverage `json:"coverage"`
	// RefusalKind says what kind of refusal: defect (the candidate is wrong)
	// or authority (it needs a decision no reviewer may take); empty unless
	// the verdict is refused.
	RefusalKind RefusalKind `json:"refusal_kind"`
	// Reason says why, in words; required for a refused verdict.
	Reason OptionalLongText `json:"reason"`
}

// CommandName implements Command.
func (*RecordReview) CommandName() string { return "RecordReview" }

// Validate implements crossFieldRules: a refused verdict names its kind and says why; an accepted one
// names no refusal kind.
func (c *RecordReview) Validate() error {
	if c.Verdict == VerdictRefused {
		if err := checkRequiredEnum("refusal_kind", c.RefusalKind); err != nil {
			return err
		}
		return LongText(c.Reason).check("reason")
	}
	if c.RefusalKind != "" {
		return invalid("refusal_kind", "applies only to a refused verdict")
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *RecordReview) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *RecordReview) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if err := m.open(false); err != nil {
		return nil, err
	}
	i := m.candidateIndex(string(c.CandidateHash))
	if i < 0 {
		return nil, refuse(CodeCandidateUnknown, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash},
			"mission %s produced no candidate %s", m.ID, c.CandidateHash)
	}
	if i != len(m.Candidates)-1 {
		return nil, refuse(CodeCandidateSuperseded, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash, "latest": m.Candidates[len(m.Candidates)-1].CandidateHash},
			"candidate %s was superseded by a newer candidate", c.CandidateHash)
	}
	rev := ReviewRecorded{MissionID: m.ID, CandidateHash: string(c.CandidateHash), Verdict: string(c.Verdict), Reviewer: string(c.Reviewer),
		Principal: in.Principal.Name, Coverage: c.Coverage, RefusalKind: string(c.RefusalKind), Reason: string(c.Reason), At: in.At}
	out := []NewEvent{{Stream: MissionStream(m.ID), Type: TypeReviewRecorded, Data: rev}}
	if c.Verdict == VerdictRefused {
		if c.RefusalKind == RefusalAuthority {
			out = append(out, NewEvent{Stream: MissionStream(m.ID), Type: TypeMissionStopped, Data: MissionStopped{
				MissionID: m.ID, Reason: StopAuthorityRefused, Detail: string(c.Reason), CandidateHash: string(c.CandidateHash), At: in.At,
			}})
		}
		return out, nil
	}
	if err := m.verified(string(c.CandidateHash)); err != nil {
		return nil, err
	}
	var unknown, missing []string
	for _, k := range sortedKeys(c.Coverage) {
		if !slices.ContainsFunc(m.Checks, func(ac AcceptanceCheck) bool { return string(ac.ID) == k }) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return nil, refuse(CodeCoverageUnknownCheck, map[string]any{"mission_id": m.ID, "unknown": unknown},
			"coverage names %v, which are not acceptance checks of mission %s", unknown, m.ID)
	}
	for _, ac := range m.Checks {
		if c.Coverage[string(ac.ID)] == "" {
			missing = append(missing, string(ac.ID))
		}
	}
	if len(missing) > 0 {
		return nil, refuse(CodeCoverageIncomplete, map[string]any{"mission_id": m.ID, "missing": missing},
			"an accepted review covers every acceptance id; %v have no evidence", missing)
	}
	return out, nil
}

// verified refuses a candidate whose verification does not pass.
func (m Mission) verified(hash string) error {
	v := m.Verification(hash)
	if !v.Complete || len(m.Checks) == 0 {
		return refuse(CodeChecksIncomplete, map[string]any{"mission_id": m.ID, "candidate_hash": hash, "missing": v.Missing},
			"acceptance checks %v have no independent result for candidate %s", v.Missing, hash)
	}
	if !v.Passed {
		return refuse(CodeChecksNotPassed, map[string]any{"mission_id": m.ID, "candidate_hash": hash, "blocked": v.Blocked, "passing": v.Passing, "checks": len(m.Checks)},
			"%d of %d acceptance checks pass for candidate %s; any fail, skip, truncation or error blocks verification", v.Passing, len(m.Checks), hash)
	}
	return nil
}

// acceptedCandidate returns the accepted candidate named by hash, refusing
// when no review accepted it or it no longer verifies.
func (m Mission) acceptedCandidate(hash string) (Candidate, error) {
	if m.Accepted == nil {
		return Candidate{}, refuse(CodeReviewNotAccepted, map[string]any{"mission_id": m.ID, "candidate_hash": hash},
			"no review accepted a candidate of mission %s", m.ID)
	}
	if m.Accepted.CandidateHash != hash {
		return Candidate{}, refuse(CodeCandidateHashMismatch, map[string]any{"mission_id": m.ID, "candidate_hash": hash, "accepted": m.Accepted.CandidateHash},
			"the accepted review names candidate %s, not %s", m.Accepted.CandidateHash, hash)
	}
	if err := m.verified(hash); err != nil {
		return Candidate{}, err
	}
	return m.Candidates[m.candidateIndex(hash)], nil
}

// DeliverResult delivers the accepted candidate, exactly once: a second
// delivery of the same candidate (a repeated terminal tick) appends
// nothing.
type DeliverResult struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash Hex64 `json:"candidate_hash"`
	// To names where the result is delivered (a branch, a repository, a
	// person).
	To ShortText `json:"to"`
}

// CommandName implements Command.
func (*DeliverResult) CommandName() string { return "DeliverResult" }

// Streams implements Command: the streams this command reads.
func (c *DeliverResult) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *DeliverResult) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if !m.Submitted {
		return nil, missionUnknown(string(c.MissionID))
	}
	if d := m.Delivery; d != nil {
		if d.CandidateHash == string(c.CandidateHash) {
			return nil, nil
		}
		return nil, refuse(CodeDeliveryConflict, map[string]any{"mission_id": m.ID, "delivered": d.CandidateHash, "delivery": d.Ref},
			"mission %s already delivered candidate %s", m.ID, d.CandidateHash)
	}
	if r := m.stopped(false); r != nil {
		return nil, r
	}
	cand, err := m.acceptedCandidate(string(c.CandidateHash))
	if err != nil {
		return nil, err
	}
	val := make([]Validation, len(m.Checks))
	for i, ac := range m.Checks {
		val[i] = Validation{CheckID: string(ac.ID), Argv: ac.Argv, Pass: cand.Checks[string(ac.ID)].PassRef}
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeResultDelivered, Data: ResultDelivered{
		MissionID: m.ID, CandidateHash: cand.CandidateHash, PatchHash: cand.PatchHash, To: string(c.To),
		Files: cand.FilesChanged, Validation: val, Review: m.Accepted.Ref, At: in.At,
	}}}, nil
}

// IntegratePatch applies the accepted candidate's patch under a
// "patch_apply" approval for "mission-<id>", consumed in the same append.
// Integrating the same candidate again appends nothing and spends nothing.
type IntegratePatch struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash Hex64 `json:"candidate_hash"`
	// PatchHash is the SHA-256 of the candidate's patch: 64 lowercase hex
	// characters.
	PatchHash Hex64 `json:"patch_hash"`
	// ApprovalID is the patch_apply approval to spend (subject mission-<id>);
	// a gate refuses when it is missing.
	ApprovalID OptionalID `json:"approval_id"`
}

// CommandName implements Command.
func (*IntegratePatch) CommandName() string { return "IntegratePatch" }

// Streams implements Command: the streams this command reads.
func (c *IntegratePatch) Streams(States) []string {
	s := []string{MissionStream(c.MissionID)}
	if c.ApprovalID != "" {
		s = append(s, ApprovalStream(c.ApprovalID))
	}
	return s
}

// Decide implements Command: the gates.
func (c *IntegratePatch) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if !m.Submitted {
		return nil, missionUnknown(string(c.MissionID))
	}
	if ig := m.Integration; ig != nil {
		if ig.CandidateHash == string(c.CandidateHash) {
			return nil, nil
		}
		return nil, refuse(CodeCandidateHashMismatch, map[string]any{"mission_id": m.ID, "integrated": ig.CandidateHash},
			"mission %s already integrated candidate %s", m.ID, ig.CandidateHash)
	}
	if r := m.stopped(false); r != nil {
		return nil, r
	}
	cand, err := m.acceptedCandidate(string(c.CandidateHash))
	if err != nil {
		return nil, err
	}
	if cand.PatchHash != string(c.PatchHash) {
		return nil, refuse(CodePatchHashMismatch, map[string]any{"mission_id": m.ID, "patch_hash": c.PatchHash, "accepted_patch_hash": cand.PatchHash},
			"patch %s is not the accepted candidate's patch %s", c.PatchHash, cand.PatchHash)
	}
	consume, err := in.States.Approval(string(c.ApprovalID)).Authorize(ActionPatchApply, MissionStream(m.ID), c.CommandName(), in.At)
	if err != nil {
		return nil, err
	}
	return []NewEvent{
		{Stream: MissionStream(m.ID), Type: TypePatchIntegrated, Data: PatchIntegrated{
			MissionID: m.ID, CandidateHash: string(c.CandidateHash), PatchHash: string(c.PatchHash), ApprovalID: string(c.ApprovalID),
			Review: m.Accepted.Ref, At: in.At,
		}},
		consume,
	}, nil
}
