package aggregates

import (
	"path"
	"slices"

	"github.com/greffe/greffe/events"
)

// Mission candidates: what the worker produced, the independent runs of
// the acceptance checks on it (and the stagnation stop they can trigger),
// and the corrections requested of it.

// RecordCandidate records what the worker produced. A return with no file
// changed is not a candidate: the decider stops the mission with
// truncated_generation when the attempt's newest inference ended on its
// output limit ("length"), and with no_modification otherwise.
type RecordCandidate struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// CandidateHash is the SHA-256 of the candidate (64 lowercase hex);
	// required when files changed, empty otherwise.
	CandidateHash OptionalHex64 `json:"candidate_hash"`
	// PatchHash is the SHA-256 of the patch (64 lowercase hex); required
	// when files changed, empty otherwise.
	PatchHash OptionalHex64 `json:"patch_hash"`
	// FilesChanged are the paths the candidate's patch changes, each within
	// the mission's allowed_files.
	FilesChanged ShortTexts `json:"files_changed"`
}

// CommandName implements Command.
func (*RecordCandidate) CommandName() string { return "RecordCandidate" }

// Validate implements crossFieldRules: a candidate that changed files names its hashes.
func (c *RecordCandidate) Validate() error {
	if len(c.FilesChanged) == 0 {
		return nil
	}
	if err := Hex64(c.CandidateHash).check("candidate_hash"); err != nil {
		return err
	}
	return Hex64(c.PatchHash).check("patch_hash")
}

// Streams implements Command: the streams this command reads.
func (c *RecordCandidate) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *RecordCandidate) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if err := m.open(false); err != nil {
		return nil, err
	}
	a, err := m.needAttempt()
	if err != nil {
		return nil, err
	}
	if !m.AwaitingCandidate {
		return nil, refuse(CodeCandidateNotExpected, map[string]any{"mission_id": m.ID},
			"mission %s is not waiting for a candidate: request a correction first", m.ID)
	}
	if len(c.FilesChanged) == 0 {
		stop := MissionStopped{MissionID: m.ID, Reason: StopNoModification, Detail: "the worker returned without changing any file", At: in.At}
		if a.LastFinish == FinishLength {
			stop.Reason, stop.ReservationID = StopTruncatedGeneration, a.LastFinishReservation
			stop.Detail = "the generation ended on its output limit without changing any file"
		}
		return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeMissionStopped, Data: stop}}, nil
	}
	if i := m.candidateIndex(string(c.CandidateHash)); i >= 0 {
		return nil, refuse(CodeCandidateDuplicate, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash, "candidate": m.Candidates[i].Ref},
			"candidate %s was already produced; repeating it is not a correction", c.CandidateHash)
	}
	var outside []string
	for _, f := range c.FilesChanged {
		if !slices.ContainsFunc(m.AllowedFiles, func(p string) bool { ok, _ := path.Match(p, f); return ok }) {
			outside = append(outside, f)
		}
	}
	if len(outside) > 0 {
		return nil, refuse(CodeFileNotAllowed, map[string]any{"mission_id": m.ID, "files": outside, "allowed_files": m.AllowedFiles},
			"the candidate changes %v, outside the mission's allowed files", outside)
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeCandidateProduced, Data: CandidateProduced{
		MissionID: m.ID, Attempt: a.N, Correction: m.PendingCorrection, Corrects: m.PendingCorrects, CandidateHash: string(c.CandidateHash),
		PatchHash: string(c.PatchHash), FilesChanged: c.FilesChanged, At: in.At,
	}}}, nil
}

// RecordCheck records one run of an acceptance check on a candidate as a
// writer states it: the CheckRecorded is marked stated, and a run stated
// as independent counts for nothing (issue #20): an independent result is
// a check runner's signed run (RecordSignedCheck), which passes the same
// gates. A pass with a nonzero exit code is refused as incoherent.
type RecordCheck struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash Hex64 `json:"candidate_hash"`
	// CheckID is the acceptance check's id, as the mission's acceptance_checks
	// name it.
	CheckID ID `json:"check_id"`
	// ArgvHash is ArgvHash(argv): "sha256:" and the hex SHA-256 of the argv as
	// a compact JSON array.
	ArgvHash Digest `json:"argv_hash"`
	// Outcome is the check's outcome: pass, fail, skipped, truncated or error.
	Outcome CheckOutcome `json:"outcome"`
	// Runner is who ran the check, as stated (recorded, not trusted).
	Runner ShortText `json:"runner"`
	// RunnerKind says whether the runner is independent of the worker
	// (independent) or the worker itself (worker), as stated; a stated run
	// proves no pass: only a check runner's signed run does
	// (RecordSignedCheck).
	RunnerKind RunnerKind `json:"runner_kind"`
	// ExitCode is the check's exit code; 0 for a pass.
	ExitCode int `json:"exit_code" jsonschema:"optional"`
	// Duration is how long the check ran (a Go duration).
	Duration NonNegativeDuration `json:"duration"`
	// OutputBytes is the size of the kept output, in bytes.
	OutputBytes Size `json:"output_bytes"`
	// OutputSHA256 is the hex SHA-256 of the kept output; empty when none was
	// kept.
	OutputSHA256 OptionalHex64 `json:"output_sha256"`
}

// CommandName implements Command.
func (*RecordCheck) CommandName() string { return "RecordCheck" }

// Streams implements Command: the streams this command reads.
func (c *RecordCheck) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *RecordCheck) Decide(in Inputs) ([]NewEvent, error) {
	return recordCheck(in, CheckRecorded{MissionID: string(c.MissionID), CandidateHash: string(c.CandidateHash), CheckID: string(c.CheckID), ArgvHash: string(c.ArgvHash),
		Outcome: string(c.Outcome), Runner: string(c.Runner), RunnerKind: string(c.RunnerKind), ExitCode: c.ExitCode, Duration: Duration(c.Duration),
		OutputBytes: int64(c.OutputBytes), OutputSHA256: string(c.OutputSHA256), Stated: true, At: in.At}, nil)
}

// recordCheck applies the gates of one run of an acceptance check, stated
// (signed nil) or signed (signed is the CheckRunSigned that carries the
// runner's signed bytes, appended just before rec), and returns the
// events to append. When the run completes the independent results of a
// correction's candidate, and that candidate passes no more checks than
// the one it corrects, the mission stops for stagnation in the same
// append. (A new attempt's first candidate is not a correction and is
// never judged so.)
func recordCheck(in Inputs, rec CheckRecorded, signed *NewEvent) ([]NewEvent, error) {
	rec.Principal = in.Principal.Name
	m := missionOf(in, rec.MissionID)
	if err := m.open(false); err != nil {
		return nil, err
	}
	i := m.candidateIndex(rec.CandidateHash)
	if i < 0 {
		return nil, refuse(CodeCandidateUnknown, map[string]any{"mission_id": m.ID, "candidate_hash": rec.CandidateHash},
			"mission %s produced no candidate %s", m.ID, rec.CandidateHash)
	}
	j := slices.IndexFunc(m.Checks, func(ac AcceptanceCheck) bool { return string(ac.ID) == rec.CheckID })
	if j < 0 {
		return nil, refuse(CodeCheckUnknown, map[string]any{"mission_id": m.ID, "check_id": rec.CheckID}, "%q is not an acceptance check of mission %s", rec.CheckID, m.ID)
	}
	if want := events.ArgvHash(m.Checks[j].Argv); rec.ArgvHash != want {
		return nil, refuse(CodeArgvMismatch, map[string]any{"mission_id": m.ID, "check_id": rec.CheckID, "argv_hash": rec.ArgvHash, "approved_argv_hash": want, "approved_argv": m.Checks[j].Argv},
			"check %s ran another command line than the approved argv", rec.CheckID)
	}
	if rec.Outcome == CheckPass && rec.ExitCode != 0 {
		return nil, refuse(CodeCheckOutcomeIncoherent, map[string]any{"mission_id": m.ID, "check_id": rec.CheckID, "outcome": rec.Outcome, "exit_code": rec.ExitCode},
			"check %s is reported as a pass with exit code %d: a pass exits 0; record what the exit code says (fail or error)", rec.CheckID, rec.ExitCode)
	}
	if rec.Outcome == CheckPass && (rec.Duration.Duration > m.Budgets.CommandTimeout.Duration || rec.OutputBytes > m.Budgets.OutputBytesPerCommand) {
		return nil, refuse(CodeCheckOutOfBounds, map[string]any{"mission_id": m.ID, "check_id": rec.CheckID,
			"duration": rec.Duration.String(), "command_timeout": m.Budgets.CommandTimeout.String(),
			"output_bytes": rec.OutputBytes, "output_bytes_per_command": m.Budgets.OutputBytesPerCommand},
			"a pass beyond the per-command bounds cannot count; record it as truncated or error")
	}
	var out []NewEvent
	if signed != nil {
		out = append(out, *signed)
	}
	out = append(out, NewEvent{Stream: MissionStream(m.ID), Type: TypeCheckRecorded, Data: rec})
	cand := m.Candidates[i]
	before := verificationOf(m.Checks, cand.Checks)
	after := verificationOf(m.Checks, cand.withCheck(rec, EventRef{}).Checks)
	if j := m.candidateIndex(cand.Corrects); j >= 0 && i == len(m.Candidates)-1 && !before.Complete && after.Complete {
		prev := m.Candidates[j]
		if pv := verificationOf(m.Checks, prev.Checks); after.Passing <= pv.Passing {
			out = append(out, NewEvent{Stream: MissionStream(m.ID), Type: TypeMissionStopped, Data: MissionStopped{
				MissionID: m.ID, Reason: StopStagnation,
				Detail:        "the correction passes no more acceptance checks than the candidate it corrects",
				CandidateHash: cand.CandidateHash, Passed: after.Passing,
				PreviousCandidateHash: prev.CandidateHash, PreviousPassed: pv.Passing, At: in.At,
			}})
		}
	}
	return out, nil
}

// RequestCorrection asks the worker to correct the newest candidate, whose
// checks must all have an independent result.
type RequestCorrection struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash Hex64 `json:"candidate_hash"`
	// Diagnosis says what is wrong with the candidate and what to correct, in
	// words.
	Diagnosis LongText `json:"diagnosis"`
}

// CommandName implements Command.
func (*RequestCorrection) CommandName() string { return "RequestCorrection" }

// Streams implements Command: the streams this command reads.
func (c *RequestCorrection) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *RequestCorrection) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if !m.Submitted {
		return nil, missionUnknown(string(c.MissionID))
	}
	// The budget is a fact whatever else holds: a correction beyond it is
	// refused as such, even on a mission already stopped.
	if m.Corrections >= m.Budgets.Corrections {
		return nil, refuse(CodeCorrectionLimit, map[string]any{"mission_id": m.ID, "used": m.Corrections, "limit": m.Budgets.Corrections},
			"mission %s may request %d correction(s) and requested %d", m.ID, m.Budgets.Corrections, m.Corrections)
	}
	if err := m.open(true); err != nil {
		return nil, err
	}
	if _, err := m.needAttempt(); err != nil {
		return nil, err
	}
	if m.AwaitingCandidate {
		return nil, refuse(CodeCorrectionPending, map[string]any{"mission_id": m.ID}, "mission %s is already waiting for a candidate", m.ID)
	}
	i := m.candidateIndex(string(c.CandidateHash))
	if i < 0 {
		return nil, refuse(CodeCandidateUnknown, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash},
			"mission %s produced no candidate %s", m.ID, c.CandidateHash)
	}
	if i != len(m.Candidates)-1 {
		return nil, refuse(CodeCandidateSuperseded, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash}, "candidate %s was superseded", c.CandidateHash)
	}
	if m.Accepted != nil && m.Accepted.CandidateHash == string(c.CandidateHash) {
		return nil, refuse(CodeCandidateAccepted, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash, "review": m.Accepted.Ref},
			"candidate %s was accepted; there is nothing to correct", c.CandidateHash)
	}
	if v := m.Verification(string(c.CandidateHash)); !v.Complete {
		return nil, refuse(CodeChecksIncomplete, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash, "missing": v.Missing},
			"a correction is judged against complete checks; %v have no independent result yet", v.Missing)
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeCorrectionRequested, Data: CorrectionRequested{
		MissionID: m.ID, CandidateHash: string(c.CandidateHash), Correction: m.Corrections + 1, Diagnosis: string(c.Diagnosis), At: in.At,
	}}}, nil
}
