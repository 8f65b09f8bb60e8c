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
	MissionID string `json:"mission_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// CandidateHash is the SHA-256 of the candidate (64 lowercase hex);
	// required when files changed, empty otherwise.
	CandidateHash string `json:"candidate_hash" jsonschema:"pattern=^([0-9a-f]{64})?$"`
	// PatchHash is the SHA-256 of the patch (64 lowercase hex); required
	// when files changed, empty otherwise.
	PatchHash string `json:"patch_hash" jsonschema:"pattern=^([0-9a-f]{64})?$"`
	// FilesChanged are the paths the candidate's patch changes, each within
	// the mission's allowed_files.
	FilesChanged []string `json:"files_changed" jsonschema:"maxItems=256,uniqueItems=true,optional,minLength=1,maxLength=256,pattern=\\S"`
}

// CommandName implements Command.
func (*RecordCandidate) CommandName() string { return "RecordCandidate" }

// Validate implements Command: the shape checks, field by field.
func (c *RecordCandidate) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkList("files_changed", c.FilesChanged); err != nil {
		return err
	}
	if len(c.FilesChanged) == 0 {
		return nil
	}
	if err := checkSHA256("candidate_hash", c.CandidateHash, true); err != nil {
		return err
	}
	return checkSHA256("patch_hash", c.PatchHash, true)
}

// Streams implements Command: the streams this command reads.
func (c *RecordCandidate) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *RecordCandidate) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, c.MissionID)
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
	if i := m.candidateIndex(c.CandidateHash); i >= 0 {
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
		MissionID: m.ID, Attempt: a.N, Correction: m.PendingCorrection, Corrects: m.PendingCorrects, CandidateHash: c.CandidateHash,
		PatchHash: c.PatchHash, FilesChanged: c.FilesChanged, At: in.At,
	}}}, nil
}

// RecordCheck records one run of an acceptance check on a candidate as a
// writer states it: the CheckRecorded is marked stated, and a run stated
// as independent counts for nothing (issue #20): an independent result is
// a check runner's signed run (RecordSignedCheck), which passes the same
// gates. A pass with a nonzero exit code is refused as incoherent.
type RecordCheck struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash string `json:"candidate_hash" jsonschema:"pattern=^[0-9a-f]{64}$"`
	// CheckID is the acceptance check's id, as the mission's acceptance_checks
	// name it.
	CheckID string `json:"check_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// ArgvHash is ArgvHash(argv): "sha256:" and the hex SHA-256 of the argv as
	// a compact JSON array.
	ArgvHash string `json:"argv_hash" jsonschema:"pattern=^sha256:[0-9a-f]{64}$"`
	// Outcome is the check's outcome: pass, fail, skipped, truncated or error.
	Outcome string `json:"outcome" jsonschema:"enum=pass,enum=fail,enum=skipped,enum=truncated,enum=error"`
	// Runner is who ran the check, as stated (recorded, not trusted).
	Runner string `json:"runner" jsonschema:"minLength=1,maxLength=256,pattern=\\S"`
	// RunnerKind says whether the runner is independent of the worker
	// (independent) or the worker itself (worker), as stated; a stated run
	// proves no pass: only a check runner's signed run does
	// (RecordSignedCheck).
	RunnerKind string `json:"runner_kind" jsonschema:"enum=independent,enum=worker"`
	// ExitCode is the check's exit code; 0 for a pass.
	ExitCode int `json:"exit_code" jsonschema:"optional"`
	// Duration is how long the check ran (a Go duration).
	Duration Duration `json:"duration" jsonschema:"optional"`
	// OutputBytes is the size of the kept output, in bytes.
	OutputBytes int64 `json:"output_bytes" jsonschema:"optional,minimum=0"`
	// OutputSHA256 is the hex SHA-256 of the kept output; empty when none was
	// kept.
	OutputSHA256 string `json:"output_sha256" jsonschema:"pattern=^([0-9a-f]{64})?$,optional"`
}

// CommandName implements Command.
func (*RecordCheck) CommandName() string { return "RecordCheck" }

// Validate implements Command: the shape checks, field by field.
func (c *RecordCheck) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkSHA256("candidate_hash", c.CandidateHash, true); err != nil {
		return err
	}
	if err := checkID("check_id", c.CheckID); err != nil {
		return err
	}
	if err := checkDigest("argv_hash", c.ArgvHash, true); err != nil {
		return err
	}
	if err := checkOneOf("outcome", c.Outcome, CheckPass, CheckFail, CheckSkipped, CheckTruncated, CheckError); err != nil {
		return err
	}
	if err := checkText("runner", c.Runner, true, maxShortText); err != nil {
		return err
	}
	if err := checkOneOf("runner_kind", c.RunnerKind, RunnerIndependent, RunnerWorker); err != nil {
		return err
	}
	if c.Duration.Duration < 0 {
		return invalid("duration", "is %s; must be >= 0", c.Duration)
	}
	if c.OutputBytes < 0 {
		return invalid("output_bytes", "is %d; must be >= 0", c.OutputBytes)
	}
	return checkSHA256("output_sha256", c.OutputSHA256, false)
}

// Streams implements Command: the streams this command reads.
func (c *RecordCheck) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *RecordCheck) Decide(in Inputs) ([]NewEvent, error) {
	return recordCheck(in, CheckRecorded{MissionID: c.MissionID, CandidateHash: c.CandidateHash, CheckID: c.CheckID, ArgvHash: c.ArgvHash,
		Outcome: c.Outcome, Runner: c.Runner, RunnerKind: c.RunnerKind, ExitCode: c.ExitCode, Duration: c.Duration,
		OutputBytes: c.OutputBytes, OutputSHA256: c.OutputSHA256, Stated: true, At: in.At}, nil)
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
	j := slices.IndexFunc(m.Checks, func(ac AcceptanceCheck) bool { return ac.ID == rec.CheckID })
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
	MissionID string `json:"mission_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash string `json:"candidate_hash" jsonschema:"pattern=^[0-9a-f]{64}$"`
	// Diagnosis says what is wrong with the candidate and what to correct, in
	// words.
	Diagnosis string `json:"diagnosis" jsonschema:"minLength=1,maxLength=4096,pattern=\\S"`
}

// CommandName implements Command.
func (*RequestCorrection) CommandName() string { return "RequestCorrection" }

// Validate implements Command: the shape checks, field by field.
func (c *RequestCorrection) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkSHA256("candidate_hash", c.CandidateHash, true); err != nil {
		return err
	}
	return checkText("diagnosis", c.Diagnosis, true, maxLongText)
}

// Streams implements Command: the streams this command reads.
func (c *RequestCorrection) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *RequestCorrection) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, c.MissionID)
	if !m.Submitted {
		return nil, missionUnknown(c.MissionID)
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
	i := m.candidateIndex(c.CandidateHash)
	if i < 0 {
		return nil, refuse(CodeCandidateUnknown, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash},
			"mission %s produced no candidate %s", m.ID, c.CandidateHash)
	}
	if i != len(m.Candidates)-1 {
		return nil, refuse(CodeCandidateSuperseded, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash}, "candidate %s was superseded", c.CandidateHash)
	}
	if m.Accepted != nil && m.Accepted.CandidateHash == c.CandidateHash {
		return nil, refuse(CodeCandidateAccepted, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash, "review": m.Accepted.Ref},
			"candidate %s was accepted; there is nothing to correct", c.CandidateHash)
	}
	if v := m.Verification(c.CandidateHash); !v.Complete {
		return nil, refuse(CodeChecksIncomplete, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash, "missing": v.Missing},
			"a correction is judged against complete checks; %v have no independent result yet", v.Missing)
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeCorrectionRequested, Data: CorrectionRequested{
		MissionID: m.ID, CandidateHash: c.CandidateHash, Correction: m.Corrections + 1, Diagnosis: c.Diagnosis, At: in.At,
	}}}, nil
}
