package aggregates

import (
	"time"
)

// Mission events: the event types of a mission stream, the data each one
// stores, and the values their fields take (modes, outcomes, finish
// reasons, verdicts, stop reasons). The data types are a stored format:
// fields are added, never renamed or removed.

// Mission modes. A direct reply needs a provider eligible_for_attempt; the
// others need one activation_ready.
const (
	ModeProposal      = "proposal"
	ModeQualification = "qualification"
	ModeDirectReply   = "direct_reply"
)

// Inference outcomes and finish reasons (DOMAIN.md: a normal stop, a
// truncation, an error and a call without final answer stay apart).
const (
	OutcomeCompleted                = "completed"
	OutcomeRejectedBeforeGeneration = "rejected_before_generation"
	OutcomeUncertain                = "uncertain"

	FinishStop          = "stop"
	FinishLength        = "length"
	FinishError         = "error"
	FinishNoFinalAnswer = "no_final_answer"

	ResolutionCompleted    = "completed"
	ResolutionNotGenerated = "not_generated"
)

// Check outcomes and runner kinds.
const (
	CheckPass      = "pass"
	CheckFail      = "fail"
	CheckSkipped   = "skipped"
	CheckTruncated = "truncated"
	CheckError     = "error"

	RunnerIndependent = "independent"
	RunnerWorker      = "worker"
)

// Review verdicts and refusal kinds: an authority refusal is not a defect
// to revise, and stops the mission.
const (
	VerdictAccepted = "accepted"
	VerdictRefused  = "refused"

	RefusalDefect    = "defect"
	RefusalAuthority = "authority"
)

// Stop reasons of a mission. Stagnation, truncated generation and no
// modification are set by the decider from the facts; the others come
// with StopMission (or, for authority_refused, a review).
const (
	StopStagnation          = "stagnation"
	StopAuthorityRefused    = "authority_refused"
	StopBudgetExhausted     = "budget_exhausted"
	StopTruncatedGeneration = "truncated_generation"
	StopNoModification      = "no_modification"
	StopChecksFailed        = "checks_failed"
	StopCancelled           = "cancelled"
)

// Reasons an attempt ends before its mission does.
const (
	AttemptResourceGuard = "resource_guard"
	AttemptTimeout       = "timeout"
	AttemptWorkerExited  = "worker_exited"
	AttemptCancelled     = "cancelled"
)

// The enumerations of the mission commands' fields, each listing its
// values once (values.go).

// MissionMode is a mission's mode.
type MissionMode string

// Values lists the mission modes.
func (MissionMode) Values() []string {
	return []string{ModeProposal, ModeQualification, ModeDirectReply}
}

// InferenceOutcome is how an inference request ended.
type InferenceOutcome string

// Values lists the inference outcomes.
func (InferenceOutcome) Values() []string {
	return []string{OutcomeCompleted, OutcomeRejectedBeforeGeneration, OutcomeUncertain}
}

// FinishReason is why a generation finished; empty when none was
// observed (only a completed request has one).
type FinishReason string

// Values lists the finish reasons, empty included.
func (FinishReason) Values() []string {
	return []string{"", FinishStop, FinishLength, FinishError, FinishNoFinalAnswer}
}

// Resolution is how an uncertain reservation was resolved.
type Resolution string

// Values lists the resolutions.
func (Resolution) Values() []string { return []string{ResolutionCompleted, ResolutionNotGenerated} }

// CheckOutcome is an acceptance check run's outcome.
type CheckOutcome string

// Values lists the check outcomes.
func (CheckOutcome) Values() []string {
	return []string{CheckPass, CheckFail, CheckSkipped, CheckTruncated, CheckError}
}

// RunnerKind says whether a check's runner is independent of the worker.
type RunnerKind string

// Values lists the runner kinds.
func (RunnerKind) Values() []string { return []string{RunnerIndependent, RunnerWorker} }

// Verdict is a review's verdict.
type Verdict string

// Values lists the verdicts.
func (Verdict) Values() []string { return []string{VerdictAccepted, VerdictRefused} }

// RefusalKind is what kind of refusal a refused review is; empty for an
// accepted one.
type RefusalKind string

// Values lists the refusal kinds, empty included.
func (RefusalKind) Values() []string { return []string{"", RefusalDefect, RefusalAuthority} }

// MissionStopReason is a reason a supervisor stops a mission for (the
// decider's own reasons, stagnation and the others, are never sent).
type MissionStopReason string

// Values lists the reasons StopMission may give.
func (MissionStopReason) Values() []string {
	return []string{StopCancelled, StopAuthorityRefused, StopChecksFailed, StopBudgetExhausted}
}

// AttemptStopReason is why an attempt ends before its mission.
type AttemptStopReason string

// Values lists the attempt stop reasons.
func (AttemptStopReason) Values() []string {
	return []string{AttemptResourceGuard, AttemptTimeout, AttemptWorkerExited, AttemptCancelled}
}

// Mission event types.
const (
	TypeMissionSubmitted      = "MissionSubmitted"
	TypeRouteDecided          = "RouteDecided"
	TypeAdmissionDecided      = "AdmissionDecided"
	TypeAttemptStarted        = "AttemptStarted"
	TypeAttemptStopped        = "AttemptStopped"
	TypeInferenceReserved     = "InferenceReserved"
	TypeInferenceSettled      = "InferenceSettled"
	TypeReservationReconciled = "ReservationReconciled"
	TypeCandidateProduced     = "CandidateProduced"
	TypeCheckRecorded         = "CheckRecorded"
	// TypeCheckRunSigned is a check runner's signed result, stored verbatim
	// (mission_checks_signed.go); the CheckRecorded it derives follows it
	// in the same append.
	TypeCheckRunSigned      = "CheckRunSigned"
	TypeReviewRecorded      = "ReviewRecorded"
	TypeCorrectionRequested = "CorrectionRequested"
	TypeMissionStopped      = "MissionStopped"
	TypeResultDelivered     = "ResultDelivered"
	TypePatchIntegrated     = "PatchIntegrated"
)

// MissionSubmitted is the data of TypeMissionSubmitted. Budgets are the
// effective budgets: the policy's, narrowed by the submission.
type MissionSubmitted struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// TaskClass is the class of task (matched against the providers'
	// task_classes).
	TaskClass string `json:"task_class"`
	// Mode is the mission's mode: proposal, qualification or direct_reply.
	Mode string `json:"mode"`
	// Confidential keeps the mission off connected providers: its data may
	// leave no local host.
	Confidential bool `json:"confidential"`
	// AllowConnected allows routing to a connected (remote) provider when no
	// local one is ready.
	AllowConnected bool `json:"allow_connected"`
	// DeclaredProvider is the provider the mission asks for; empty lets
	// routing choose.
	DeclaredProvider string `json:"declared_provider,omitempty"`
	// StartsRuntime says the mission starts a local runtime (a model server),
	// which needs a startup approval and an admission.
	StartsRuntime bool `json:"starts_runtime"`
	// AllowedFiles are the paths the mission's patches may change; empty
	// allows none to be named.
	AllowedFiles []string `json:"allowed_files"`
	// AcceptanceChecks are the checks an independent runner executes on each
	// candidate; a result is delivered only when all pass.
	AcceptanceChecks []AcceptanceCheck `json:"acceptance_checks"`
	// Budgets are the mission's budgets: the policy's, narrowed by what the
	// submission asks (never widened).
	Budgets Budgets `json:"budgets"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// AttemptStarted is the data of TypeAttemptStarted. Readiness is the
// selected provider's activation (or eligibility) fact at the start.
type AttemptStarted struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// Attempt is the attempt's number within the mission, from 1.
	Attempt int `json:"attempt"`
	// Provider is the provider the attempt uses (the route's selection).
	Provider string `json:"provider"`
	// ModelTag is the exact model tag the provider serves (no alias).
	ModelTag string `json:"model_tag"`
	// BindingIdentity is the verified binding's identity ("sha256:" and 64
	// hex); empty when the provider needs no binding.
	BindingIdentity string `json:"binding_identity,omitempty"`
	// Readiness is the provider's readiness fact as read when the decision was
	// taken.
	Readiness Fact `json:"readiness"`
	// ApprovalID is the startup approval spent; empty when the mission starts
	// no runtime.
	ApprovalID string `json:"approval_id,omitempty"`
	// Admission is the admission the attempt started under; absent when the
	// mission starts no runtime.
	Admission *EventRef `json:"admission,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// AttemptStopped is the data of TypeAttemptStopped.
type AttemptStopped struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// Attempt is the attempt's number within the mission, from 1.
	Attempt int `json:"attempt"`
	// Reason is why the attempt stopped: resource_guard, timeout,
	// worker_exited or cancelled.
	Reason string `json:"reason"`
	// Detail says more, in words; empty when there is nothing to add.
	Detail string `json:"detail,omitempty"`
	// Evidence are references to what grounds it (event ids or measurement
	// ids), in words an auditor can follow; may be empty.
	Evidence []string `json:"evidence,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// InferenceReserved is the data of TypeInferenceReserved.
type InferenceReserved struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// ReservationID is the inference reservation's id, unique within the
	// mission.
	ReservationID string `json:"reservation_id"`
	// Attempt is the attempt's number within the mission, from 1.
	Attempt int `json:"attempt"`
	// Ordinal is the inference's number within the mission, from 1 (counted
	// against the inference_requests budget).
	Ordinal int `json:"ordinal"`
	// Provider is the provider's name (its stream is provider-<name>).
	Provider string `json:"provider"`
	// ModelTag is the exact model tag the provider serves (no alias).
	ModelTag string `json:"model_tag"`
	// BindingIdentity is the verified binding's identity ("sha256:" and 64
	// hex); empty when the provider needs no binding.
	BindingIdentity string `json:"binding_identity,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// Receipt is the receipt of one inference call. Digests are hex SHA-256 of
// the exact request and response bodies; tokens are counts; Duration is
// the call's wall time.
type Receipt struct {
	// Provider is the provider's name (its stream is provider-<name>).
	Provider ID `json:"provider"`
	// ModelTag is the exact model tag the provider serves (no alias).
	ModelTag ShortText `json:"model_tag"`
	// BindingIdentity is the verified binding's identity ("sha256:" and 64
	// hex); empty when the provider needs no binding.
	BindingIdentity OptionalDigest `json:"binding_identity,omitempty"`
	// RequestSHA256 is the hex SHA-256 of the exact request body.
	RequestSHA256 Hex64 `json:"request_sha256"`
	// ResponseSHA256 is the hex SHA-256 of the exact response body; required
	// when completed, empty when nothing came back.
	ResponseSHA256 OptionalHex64 `json:"response_sha256,omitempty"`
	// TokensIn is the number of prompt tokens.
	TokensIn Count `json:"tokens_in"`
	// TokensOut is the number of generated tokens; 0 when rejected before
	// generation.
	TokensOut Count `json:"tokens_out"`
	// Duration is how long it ran (a Go duration).
	Duration NonNegativeDuration `json:"duration"`
	// FinishReason is why generation finished (stop, length, error,
	// no_final_answer); required when completed, empty otherwise.
	FinishReason FinishReason `json:"finish_reason,omitempty"`
}

// InferenceSettled is the data of TypeInferenceSettled.
type InferenceSettled struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// ReservationID is the inference reservation's id, unique within the
	// mission.
	ReservationID string `json:"reservation_id"`
	// Attempt is the attempt's number within the mission, from 1.
	Attempt int `json:"attempt"`
	// Outcome is how the inference ended: completed,
	// rejected_before_generation or uncertain.
	Outcome string `json:"outcome"`
	// Receipt is the inference call's receipt.
	Receipt Receipt `json:"receipt"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ReservationReconciled is the data of TypeReservationReconciled.
type ReservationReconciled struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// ReservationID is the inference reservation's id, unique within the
	// mission.
	ReservationID string `json:"reservation_id"`
	// Resolution is how the reservation was resolved: completed or
	// not_generated.
	Resolution string `json:"resolution"`
	// Evidence are what grounds the resolution, in words an auditor can
	// follow.
	Evidence []string `json:"evidence"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// CandidateProduced is the data of TypeCandidateProduced. Correction is 0
// for an attempt's first candidate and n for the answer to the n-th
// correction, whose corrected candidate is Corrects.
type CandidateProduced struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// Attempt is the attempt's number within the mission, from 1.
	Attempt int `json:"attempt"`
	// Correction is 0 for an attempt's first candidate, n for the answer to
	// the n-th correction.
	Correction int `json:"correction"`
	// Corrects is the hash of the candidate this one corrects; empty for an
	// attempt's first candidate.
	Corrects string `json:"corrects,omitempty"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash string `json:"candidate_hash"`
	// PatchHash is the SHA-256 of the candidate's patch: 64 lowercase hex
	// characters.
	PatchHash string `json:"patch_hash"`
	// FilesChanged are the paths the candidate's patch changes, relative to
	// the repository.
	FilesChanged []string `json:"files_changed"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// CheckRecorded is the data of TypeCheckRecorded. OutputBytes is the size
// of the kept output.
type CheckRecorded struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash string `json:"candidate_hash"`
	// CheckID is the acceptance check's id, as the mission's acceptance_checks
	// name it.
	CheckID string `json:"check_id"`
	// ArgvHash is ArgvHash(argv): "sha256:" and the hex SHA-256 of the argv as
	// a compact JSON array.
	ArgvHash string `json:"argv_hash"`
	// Outcome is the check's outcome: pass, fail, skipped, truncated or error.
	Outcome string `json:"outcome"`
	// Runner is who ran the check (a person, a CI job, an executor), as
	// stated: a check proves a pass only through SignedBy.
	Runner string `json:"runner"`
	// Principal is the authenticated principal that sent the check
	// ("anonymous" on a node without tokens): who vouches for Runner.
	// Absent from checks recorded before issue #20.
	Principal string `json:"principal,omitempty"`
	// RunnerKind says whether the runner is independent of the worker
	// (independent) or the worker itself (worker); only an independent run can
	// prove a pass.
	RunnerKind string `json:"runner_kind"`
	// ExitCode is the process's exit code (0 for success).
	ExitCode int `json:"exit_code"`
	// Duration is how long it ran (a Go duration).
	Duration Duration `json:"duration"`
	// OutputBytes is the size of the kept output, in bytes.
	OutputBytes int64 `json:"output_bytes"`
	// OutputSHA256 is the hex SHA-256 of the kept output; empty when no output
	// was kept.
	OutputSHA256 string `json:"output_sha256,omitempty"`
	// SignedBy is the check runner whose registered key signed the run
	// (RecordSignedCheck; the CheckRunSigned just before it holds the
	// signed bytes): only such a run is independent proof. Empty for a
	// run a writer stated.
	SignedBy string `json:"signed_by,omitempty"`
	// KeyIDs are the keys that signed it.
	KeyIDs []string `json:"key_ids,omitempty"`
	// Stated marks a run a writer stated (RecordCheck): recorded as
	// stated, never counted as an independent result nor as evidence,
	// whatever its runner_kind says. (Runs recorded before issue #20 carry
	// neither this nor signed_by, and prove nothing either.)
	Stated bool `json:"stated,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// Signed reports whether the run was signed by an independent check
// runner's registered key, verified when it was recorded: the only runs
// that count toward verification.
func (d *CheckRecorded) Signed() bool { return d.SignedBy != "" && d.RunnerKind == RunnerIndependent }

// ReviewRecorded is the data of TypeReviewRecorded. Coverage maps each
// acceptance id to the evidence the reviewer relied on.
type ReviewRecorded struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash string `json:"candidate_hash"`
	// Verdict is the review's verdict: accepted or refused.
	Verdict string `json:"verdict"`
	// Reviewer is who reviewed it, as the command stated it: an accountable
	// person or role, not the worker. A statement, recorded, never
	// checked against the principal.
	Reviewer string `json:"reviewer"`
	// Principal is the authenticated principal that sent the review
	// ("anonymous" on a node without tokens): who vouches for Reviewer.
	// Absent from reviews recorded before issue #20.
	Principal string `json:"principal,omitempty"`
	// Coverage maps each acceptance check id to the evidence the reviewer
	// relied on for it.
	Coverage map[string]string `json:"coverage,omitempty"`
	// RefusalKind says what kind of refusal: defect (the candidate is wrong)
	// or authority (it needs a decision no reviewer may take); empty unless
	// the verdict is refused.
	RefusalKind string `json:"refusal_kind,omitempty"`
	// Reason says why, in words.
	Reason string `json:"reason,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// CorrectionRequested is the data of TypeCorrectionRequested.
type CorrectionRequested struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash string `json:"candidate_hash"`
	// Correction is the correction's number within the attempt, from 1.
	Correction int `json:"correction"`
	// Diagnosis says what is wrong with the candidate and what to correct, in
	// words.
	Diagnosis string `json:"diagnosis"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// MissionStopped is the data of TypeMissionStopped. For a stagnation stop,
// CandidateHash/Passed and PreviousCandidateHash/PreviousPassed are the
// grounds; for a truncated generation, ReservationID is the inference that
// ended on "length".
type MissionStopped struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// Reason is why the mission stopped (e.g. cancelled, stagnation,
	// truncated_generation, budget_exhausted).
	Reason string `json:"reason"`
	// Detail says more, in words; empty when there is nothing to add.
	Detail string `json:"detail,omitempty"`
	// CandidateHash is, for a stagnation stop, the newest candidate.
	CandidateHash string `json:"candidate_hash,omitempty"`
	// Passed is, for a stagnation stop, how many checks the newest candidate
	// passed.
	Passed int `json:"passed,omitempty"`
	// PreviousCandidateHash is, for a stagnation stop, the candidate it did
	// not improve on.
	PreviousCandidateHash string `json:"previous_candidate_hash,omitempty"`
	// PreviousPassed is, for a stagnation stop, how many checks that candidate
	// passed.
	PreviousPassed int `json:"previous_passed,omitempty"`
	// ReservationID is, for a truncated generation, the inference that ended
	// on "length".
	ReservationID string `json:"reservation_id,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// Validation is one validation command attested by the accepted run: the
// check's exact argv and the independent pass that proves it.
type Validation struct {
	// CheckID is the acceptance check's id.
	CheckID string `json:"check_id"`
	// Argv is the check's exact argv.
	Argv []string `json:"argv"`
	// Pass is the independent passing check's event.
	Pass EventRef `json:"pass"`
}

// ResultDelivered is the data of TypeResultDelivered: the delivery receipt.
type ResultDelivered struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash string `json:"candidate_hash"`
	// PatchHash is the SHA-256 of the candidate's patch: 64 lowercase hex
	// characters.
	PatchHash string `json:"patch_hash"`
	// To names where the result is delivered (a branch, a repository, a
	// person).
	To string `json:"to"`
	// Files are the paths the delivered patch changes.
	Files []string `json:"files"`
	// Validation are the acceptance checks the result passed, each with its
	// independent pass.
	Validation []Validation `json:"validation"`
	// Review is the accepting review's event.
	Review EventRef `json:"review"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// PatchIntegrated is the data of TypePatchIntegrated.
type PatchIntegrated struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash string `json:"candidate_hash"`
	// PatchHash is the SHA-256 of the candidate's patch: 64 lowercase hex
	// characters.
	PatchHash string `json:"patch_hash"`
	// ApprovalID is the patch_apply approval spent.
	ApprovalID string `json:"approval_id"`
	// Review is the accepting review's event.
	Review EventRef `json:"review"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}
