package aggregates

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	TypeReviewRecorded        = "ReviewRecorded"
	TypeCorrectionRequested   = "CorrectionRequested"
	TypeMissionStopped        = "MissionStopped"
	TypeResultDelivered       = "ResultDelivered"
	TypePatchIntegrated       = "PatchIntegrated"
)

// MissionSubmitted is the data of TypeMissionSubmitted. Budgets are the
// effective budgets: the policy's, narrowed by the submission.
type MissionSubmitted struct {
	MissionID        string            `json:"mission_id"`
	TaskClass        string            `json:"task_class"`
	Mode             string            `json:"mode"`
	Confidential     bool              `json:"confidential"`
	AllowConnected   bool              `json:"allow_connected"`
	DeclaredProvider string            `json:"declared_provider,omitempty"`
	StartsRuntime    bool              `json:"starts_runtime"`
	AllowedFiles     []string          `json:"allowed_files"`
	AcceptanceChecks []AcceptanceCheck `json:"acceptance_checks"`
	Budgets          Budgets           `json:"budgets"`
	At               time.Time         `json:"at"`
}

// AttemptStarted is the data of TypeAttemptStarted. Readiness is the
// selected provider's activation (or eligibility) fact at the start.
type AttemptStarted struct {
	MissionID       string    `json:"mission_id"`
	Attempt         int       `json:"attempt"`
	Provider        string    `json:"provider"`
	ModelTag        string    `json:"model_tag"`
	BindingIdentity string    `json:"binding_identity,omitempty"`
	Readiness       Fact      `json:"readiness"`
	ApprovalID      string    `json:"approval_id,omitempty"`
	Admission       *EventRef `json:"admission,omitempty"`
	At              time.Time `json:"at"`
}

// AttemptStopped is the data of TypeAttemptStopped.
type AttemptStopped struct {
	MissionID string    `json:"mission_id"`
	Attempt   int       `json:"attempt"`
	Reason    string    `json:"reason"`
	Detail    string    `json:"detail,omitempty"`
	Evidence  []string  `json:"evidence,omitempty"`
	At        time.Time `json:"at"`
}

// InferenceReserved is the data of TypeInferenceReserved.
type InferenceReserved struct {
	MissionID       string    `json:"mission_id"`
	ReservationID   string    `json:"reservation_id"`
	Attempt         int       `json:"attempt"`
	Ordinal         int       `json:"ordinal"`
	Provider        string    `json:"provider"`
	ModelTag        string    `json:"model_tag"`
	BindingIdentity string    `json:"binding_identity,omitempty"`
	At              time.Time `json:"at"`
}

// Receipt is the receipt of one inference call. Digests are hex SHA-256 of
// the exact request and response bodies; tokens are counts; Duration is
// the call's wall time.
type Receipt struct {
	Provider        string   `json:"provider" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	ModelTag        string   `json:"model_tag" jsonschema:"minLength=1,maxLength=256,pattern=\\S"`
	BindingIdentity string   `json:"binding_identity,omitempty" jsonschema:"pattern=^(sha256:[0-9a-f]{64})?$"`
	RequestSHA256   string   `json:"request_sha256" jsonschema:"pattern=^[0-9a-f]{64}$"`
	ResponseSHA256  string   `json:"response_sha256,omitempty" jsonschema:"pattern=^([0-9a-f]{64})?$"`
	TokensIn        int      `json:"tokens_in" jsonschema:"optional,minimum=0"`
	TokensOut       int      `json:"tokens_out" jsonschema:"optional,minimum=0"`
	Duration        Duration `json:"duration" jsonschema:"optional"`
	FinishReason    string   `json:"finish_reason,omitempty" jsonschema:"enum=,enum=stop,enum=length,enum=error,enum=no_final_answer"`
}

// InferenceSettled is the data of TypeInferenceSettled.
type InferenceSettled struct {
	MissionID     string    `json:"mission_id"`
	ReservationID string    `json:"reservation_id"`
	Attempt       int       `json:"attempt"`
	Outcome       string    `json:"outcome"`
	Receipt       Receipt   `json:"receipt"`
	At            time.Time `json:"at"`
}

// ReservationReconciled is the data of TypeReservationReconciled.
type ReservationReconciled struct {
	MissionID     string    `json:"mission_id"`
	ReservationID string    `json:"reservation_id"`
	Resolution    string    `json:"resolution"`
	Evidence      []string  `json:"evidence"`
	At            time.Time `json:"at"`
}

// CandidateProduced is the data of TypeCandidateProduced. Correction is 0
// for an attempt's first candidate and n for the answer to the n-th
// correction, whose corrected candidate is Corrects.
type CandidateProduced struct {
	MissionID     string    `json:"mission_id"`
	Attempt       int       `json:"attempt"`
	Correction    int       `json:"correction"`
	Corrects      string    `json:"corrects,omitempty"`
	CandidateHash string    `json:"candidate_hash"`
	PatchHash     string    `json:"patch_hash"`
	FilesChanged  []string  `json:"files_changed"`
	At            time.Time `json:"at"`
}

// CheckRecorded is the data of TypeCheckRecorded. OutputBytes is the size
// of the kept output.
type CheckRecorded struct {
	MissionID     string    `json:"mission_id"`
	CandidateHash string    `json:"candidate_hash"`
	CheckID       string    `json:"check_id"`
	ArgvHash      string    `json:"argv_hash"`
	Outcome       string    `json:"outcome"`
	Runner        string    `json:"runner"`
	RunnerKind    string    `json:"runner_kind"`
	ExitCode      int       `json:"exit_code"`
	Duration      Duration  `json:"duration"`
	OutputBytes   int64     `json:"output_bytes"`
	OutputSHA256  string    `json:"output_sha256,omitempty"`
	At            time.Time `json:"at"`
}

// ReviewRecorded is the data of TypeReviewRecorded. Coverage maps each
// acceptance id to the evidence the reviewer relied on.
type ReviewRecorded struct {
	MissionID     string            `json:"mission_id"`
	CandidateHash string            `json:"candidate_hash"`
	Verdict       string            `json:"verdict"`
	Reviewer      string            `json:"reviewer"`
	Coverage      map[string]string `json:"coverage,omitempty"`
	RefusalKind   string            `json:"refusal_kind,omitempty"`
	Reason        string            `json:"reason,omitempty"`
	At            time.Time         `json:"at"`
}

// CorrectionRequested is the data of TypeCorrectionRequested.
type CorrectionRequested struct {
	MissionID     string    `json:"mission_id"`
	CandidateHash string    `json:"candidate_hash"`
	Correction    int       `json:"correction"`
	Diagnosis     string    `json:"diagnosis"`
	At            time.Time `json:"at"`
}

// MissionStopped is the data of TypeMissionStopped. For a stagnation stop,
// CandidateHash/Passed and PreviousCandidateHash/PreviousPassed are the
// grounds; for a truncated generation, ReservationID is the inference that
// ended on "length".
type MissionStopped struct {
	MissionID             string    `json:"mission_id"`
	Reason                string    `json:"reason"`
	Detail                string    `json:"detail,omitempty"`
	CandidateHash         string    `json:"candidate_hash,omitempty"`
	Passed                int       `json:"passed,omitempty"`
	PreviousCandidateHash string    `json:"previous_candidate_hash,omitempty"`
	PreviousPassed        int       `json:"previous_passed,omitempty"`
	ReservationID         string    `json:"reservation_id,omitempty"`
	At                    time.Time `json:"at"`
}

// Validation is one validation command attested by the accepted run: the
// check's exact argv and the independent pass that proves it.
type Validation struct {
	CheckID string   `json:"check_id"`
	Argv    []string `json:"argv"`
	Pass    EventRef `json:"pass"`
}

// ResultDelivered is the data of TypeResultDelivered: the delivery receipt.
type ResultDelivered struct {
	MissionID     string       `json:"mission_id"`
	CandidateHash string       `json:"candidate_hash"`
	PatchHash     string       `json:"patch_hash"`
	To            string       `json:"to"`
	Files         []string     `json:"files"`
	Validation    []Validation `json:"validation"`
	Review        EventRef     `json:"review"`
	At            time.Time    `json:"at"`
}

// PatchIntegrated is the data of TypePatchIntegrated.
type PatchIntegrated struct {
	MissionID     string    `json:"mission_id"`
	CandidateHash string    `json:"candidate_hash"`
	PatchHash     string    `json:"patch_hash"`
	ApprovalID    string    `json:"approval_id"`
	Review        EventRef  `json:"review"`
	At            time.Time `json:"at"`
}

// ArgvHash returns "sha256:" and the hex SHA-256 of argv written as a JSON
// array of strings without spaces or HTML escaping: the identity of an
// exact command line.
func ArgvHash(argv []string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if argv == nil {
		argv = []string{}
	}
	if err := enc.Encode(argv); err != nil {
		panic(err) // a string slice always encodes
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}
