package aggregates

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"path"
	"slices"
	"sort"
	"time"

	"github.com/greffe/greffe/events"
)

// Mission is the state of one bounded contract given to a worker (stream
// "mission-<id>").
//
// Its life: MissionSubmitted (budgets narrowed from the policy and fixed
// for the mission's life), RouteDecided, optionally AdmissionDecided (a
// mission that starts a runtime), AttemptStarted, then per inference
// InferenceReserved and InferenceSettled (and ReservationReconciled for an
// uncertain one), CandidateProduced, CheckRecorded per acceptance check,
// CorrectionRequested and another candidate (at most Budgets.Corrections
// times), ReviewRecorded, ResultDelivered and PatchIntegrated. MissionStopped
// ends it; the decider itself stops it for stagnation, a truncated
// generation, no modification or an authority refusal.
//
// Evolve never mutates the state it is given: maps and slices are copied
// before they change, so a state can be kept and compared.
type Mission struct {
	ID               string
	Submitted        bool
	TaskClass        string
	Mode             string
	Confidential     bool
	AllowConnected   bool
	DeclaredProvider string
	StartsRuntime    bool
	AllowedFiles     []string
	Checks           []AcceptanceCheck
	// Budgets are the effective budgets fixed at submission.
	Budgets Budgets
	// Route is the newest route; Admission the newest admission.
	Route     *Route
	Admission *Admission
	// Attempts counts the attempts started; Attempt is the newest one.
	Attempts int
	Attempt  *Attempt
	// Reservations by id; Reserved counts them; Errors counts settlements
	// that errored or were rejected before generation.
	Reservations map[string]Reservation
	Reserved     int
	Errors       int
	// Candidates in the order produced.
	Candidates []Candidate
	// AwaitingCandidate is true after an attempt starts or a correction is
	// requested, until a candidate (or a stop) answers it. When a correction
	// is awaited, PendingCorrection is its number and PendingCorrects the
	// hash of the candidate it corrects.
	AwaitingCandidate bool
	PendingCorrection int
	PendingCorrects   string
	Corrections       int
	// LastReview is the newest review; Accepted the newest accepted one.
	LastReview  *Review
	Accepted    *Review
	Stop        *Stop
	Delivery    *Delivery
	Integration *Integration
	Submission  EventRef
	// Events is the number of events folded.
	Events int
}

// AcceptanceCheck is one acceptance check of a mission: an id and the exact
// argv an independent runner executes. ArgvHash is ArgvHash(Argv).
type AcceptanceCheck struct {
	ID       string   `json:"id"`
	Argv     []string `json:"argv"`
	ArgvHash string   `json:"argv_hash,omitempty"`
}

// Route is a folded RouteDecided.
type Route struct {
	RouteDecided
	Ref EventRef
}

// Admission is a folded AdmissionDecided.
type Admission struct {
	AdmissionDecided
	Ref EventRef
}

// Attempt is the state of one attempt.
type Attempt struct {
	N               int
	Provider        string
	ModelTag        string
	BindingIdentity string
	StartedAt       time.Time
	Ended           bool
	EndReason       string
	// LastFinish is the finish reason of the newest completed inference of
	// this attempt, and LastFinishReservation its id.
	LastFinish            string
	LastFinishReservation string
	Ref                   EventRef
}

// Reservation is the state of one inference reservation.
type Reservation struct {
	ID              string
	Attempt         int
	Ordinal         int
	Provider        string
	ModelTag        string
	BindingIdentity string
	// Outcome is "" while open, then completed, rejected_before_generation
	// or uncertain.
	Outcome      string
	FinishReason string
	Reconciled   bool
	Resolution   string
	Ref          EventRef
}

// Candidate is a folded CandidateProduced with the independent checks
// recorded for it.
type Candidate struct {
	CandidateProduced
	// Checks holds, per acceptance check id, the independent runs recorded
	// for this candidate hash.
	Checks map[string]CheckTally
	// WorkerRuns counts checks reported by the worker itself; they never
	// count toward verification.
	WorkerRuns int
	Ref        EventRef
}

// CheckTally sums the independent runs of one check on one candidate.
type CheckTally struct {
	Runs int
	// PassRef is the first independent pass.
	Passed  bool
	PassRef EventRef
	// Blocking is the first non-pass outcome (fail, skipped, truncated,
	// error): any one blocks verification, whatever passes come after.
	Blocking string
	BlockRef EventRef
}

// Review is a folded ReviewRecorded.
type Review struct {
	ReviewRecorded
	Ref EventRef
}

// Stop is a folded MissionStopped.
type Stop struct {
	MissionStopped
	Ref EventRef
}

// Delivery is a folded ResultDelivered.
type Delivery struct {
	ResultDelivered
	Ref EventRef
}

// Integration is a folded PatchIntegrated.
type Integration struct {
	PatchIntegrated
	Ref EventRef
}

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
	Provider        string   `json:"provider"`
	ModelTag        string   `json:"model_tag"`
	BindingIdentity string   `json:"binding_identity,omitempty"`
	RequestSHA256   string   `json:"request_sha256"`
	ResponseSHA256  string   `json:"response_sha256,omitempty"`
	TokensIn        int      `json:"tokens_in"`
	TokensOut       int      `json:"tokens_out"`
	Duration        Duration `json:"duration"`
	FinishReason    string   `json:"finish_reason,omitempty"`
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

// Exists reports whether the mission stream has events.
func (m Mission) Exists() bool { return m.Events > 0 }

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
		r.Outcome, r.FinishReason = d.Outcome, d.Receipt.FinishReason
		rs[d.ReservationID] = r
		m.Reservations = rs
		if d.Outcome == OutcomeRejectedBeforeGeneration || d.Receipt.FinishReason == FinishError {
			m.Errors++
		}
		if d.Outcome == OutcomeCompleted && m.Attempt != nil && m.Attempt.N == r.Attempt {
			a := *m.Attempt
			a.LastFinish, a.LastFinishReservation = d.Receipt.FinishReason, d.ReservationID
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
	if d.RunnerKind != RunnerIndependent {
		c.WorkerRuns++
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

func (m Mission) candidateIndex(hash string) int {
	return slices.IndexFunc(m.Candidates, func(c Candidate) bool { return c.CandidateHash == hash })
}

// Verification is where a candidate stands against the acceptance checks.
type Verification struct {
	// Complete: every acceptance check has at least one independent run.
	Complete bool
	// Passed: complete, and every check passed with no blocking run. A
	// mission without acceptance checks never passes.
	Passed bool
	// Passing counts the checks that passed with no blocking run.
	Passing int
	// Missing lists the checks without an independent run; Blocked maps a
	// check to its first non-pass outcome.
	Missing []string
	Blocked map[string]string
}

// Verification returns where candidate hash stands; a hash the mission
// never produced has every check missing.
func (m Mission) Verification(hash string) Verification {
	var tallies map[string]CheckTally
	if i := m.candidateIndex(hash); i >= 0 {
		tallies = m.Candidates[i].Checks
	}
	return verificationOf(m.Checks, tallies)
}

func verificationOf(checks []AcceptanceCheck, tallies map[string]CheckTally) Verification {
	v := Verification{Blocked: map[string]string{}}
	for _, c := range checks {
		t := tallies[c.ID]
		switch {
		case t.Runs == 0:
			v.Missing = append(v.Missing, c.ID)
		case t.Blocking != "":
			v.Blocked[c.ID] = t.Blocking
		case t.Passed:
			v.Passing++
		}
	}
	v.Complete = len(v.Missing) == 0
	v.Passed = v.Complete && len(v.Blocked) == 0 && len(checks) > 0 && v.Passing == len(checks)
	return v
}

// Uncertain returns the ids of uncertain, unreconciled reservations, sorted.
func (m Mission) Uncertain() []string {
	var out []string
	for id, r := range m.Reservations {
		if r.Outcome == OutcomeUncertain && !r.Reconciled {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// openReservation returns the id of a reservation not yet settled.
func (m Mission) openReservation() string {
	for _, id := range sortedKeys(m.Reservations) {
		if m.Reservations[id].Outcome == "" {
			return id
		}
	}
	return ""
}

// activeAttempt returns the running attempt, or nil.
func (m Mission) activeAttempt() *Attempt {
	if m.Attempt == nil || m.Attempt.Ended {
		return nil
	}
	return m.Attempt
}

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

// SubmitMission submits a mission under the node's policy.
type SubmitMission struct {
	MissionID        string            `json:"mission_id"`
	TaskClass        string            `json:"task_class"`
	Mode             string            `json:"mode"`
	Confidential     bool              `json:"confidential"`
	AllowConnected   bool              `json:"allow_connected"`
	DeclaredProvider string            `json:"declared_provider"`
	StartsRuntime    bool              `json:"starts_runtime"`
	AllowedFiles     []string          `json:"allowed_files"`
	AcceptanceChecks []AcceptanceCheck `json:"acceptance_checks"`
	Budgets          BudgetRequest     `json:"budgets"`
}

// CommandName implements Command.
func (*SubmitMission) CommandName() string { return "SubmitMission" }

// Validate implements Command: the shape checks, field by field.
func (c *SubmitMission) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkText("task_class", c.TaskClass, true, maxShortText); err != nil {
		return err
	}
	if err := checkOneOf("mode", c.Mode, ModeProposal, ModeQualification, ModeDirectReply); err != nil {
		return err
	}
	if c.DeclaredProvider != "" {
		if err := checkID("declared_provider", c.DeclaredProvider); err != nil {
			return err
		}
	}
	if err := checkList("allowed_files", c.AllowedFiles); err != nil {
		return err
	}
	for i, f := range c.AllowedFiles {
		if _, err := path.Match(f, ""); err != nil {
			return invalid(indexPath("allowed_files", i), "%q is not a valid path pattern", f)
		}
	}
	if c.Mode != ModeDirectReply && len(c.AcceptanceChecks) == 0 {
		return invalid("acceptance_checks", "a %s mission needs at least one acceptance check: verification is never vacuous", c.Mode)
	}
	if len(c.AcceptanceChecks) > maxListLen {
		return invalid("acceptance_checks", "has %d entries; the limit is %d", len(c.AcceptanceChecks), maxListLen)
	}
	ids := map[string]bool{}
	for i, ac := range c.AcceptanceChecks {
		p := indexPath("acceptance_checks", i)
		if err := checkID(p+".id", ac.ID); err != nil {
			return err
		}
		if ids[ac.ID] {
			return invalid(p+".id", "%q is listed twice", ac.ID)
		}
		ids[ac.ID] = true
		if len(ac.Argv) == 0 || len(ac.Argv) > maxListLen {
			return invalid(p+".argv", "has %d entries; an exact argv has 1 to %d", len(ac.Argv), maxListLen)
		}
		for j, a := range ac.Argv {
			if err := checkText(indexPath(p+".argv", j), a, j == 0, maxLongText); err != nil {
				return err
			}
		}
		if ac.ArgvHash != "" && ac.ArgvHash != ArgvHash(ac.Argv) {
			return invalid(p+".argv_hash", "is not the hash of argv; leave it out, the node computes it")
		}
	}
	return c.Budgets.validate("budgets")
}

// Streams implements Command: the streams this command reads.
func (c *SubmitMission) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *SubmitMission) Decide(in Inputs) ([]NewEvent, error) {
	if in.States.Mission(c.MissionID).Submitted {
		return nil, refuse(CodeMissionExists, map[string]any{"mission_id": c.MissionID}, "mission %s was already submitted", c.MissionID)
	}
	budgets, err := in.Policy.Budgets.Narrow(c.Budgets)
	if err != nil {
		return nil, err
	}
	checks := make([]AcceptanceCheck, len(c.AcceptanceChecks))
	for i, ac := range c.AcceptanceChecks {
		checks[i] = AcceptanceCheck{ID: ac.ID, Argv: ac.Argv, ArgvHash: ArgvHash(ac.Argv)}
	}
	return []NewEvent{{Stream: MissionStream(c.MissionID), Type: TypeMissionSubmitted, Data: MissionSubmitted{
		MissionID: c.MissionID, TaskClass: c.TaskClass, Mode: c.Mode, Confidential: c.Confidential,
		AllowConnected: c.AllowConnected, DeclaredProvider: c.DeclaredProvider, StartsRuntime: c.StartsRuntime,
		AllowedFiles: c.AllowedFiles, AcceptanceChecks: checks, Budgets: budgets, At: in.At,
	}}}, nil
}

// StartAttempt starts the next attempt on the routed provider. The provider
// must still pass the mission's gate at the command's time. A mission that
// starts a runtime also needs a "startup" approval for "provider-<name>"
// (spent by this start) and an admitted, fresh admission for this attempt.
type StartAttempt struct {
	MissionID  string `json:"mission_id"`
	ApprovalID string `json:"approval_id"`
}

// CommandName implements Command.
func (*StartAttempt) CommandName() string { return "StartAttempt" }

// Validate implements Command: the shape checks, field by field.
func (c *StartAttempt) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if c.ApprovalID != "" {
		return checkID("approval_id", c.ApprovalID)
	}
	return nil
}

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
	m := missionOf(in, c.MissionID)
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
		consume, err := in.States.Approval(c.ApprovalID).Authorize(ActionStartup, ProviderStream(p.Name), c.CommandName(), in.At)
		if err != nil {
			return nil, err
		}
		if err := m.admitted(n, in); err != nil {
			return nil, err
		}
		started.ApprovalID = c.ApprovalID
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
	MissionID string   `json:"mission_id"`
	Reason    string   `json:"reason"`
	Detail    string   `json:"detail"`
	Evidence  []string `json:"evidence"`
}

// CommandName implements Command.
func (*StopAttempt) CommandName() string { return "StopAttempt" }

// Validate implements Command: the shape checks, field by field.
func (c *StopAttempt) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkOneOf("reason", c.Reason, AttemptResourceGuard, AttemptTimeout, AttemptWorkerExited, AttemptCancelled); err != nil {
		return err
	}
	if err := checkText("detail", c.Detail, false, maxLongText); err != nil {
		return err
	}
	return checkList("evidence", c.Evidence)
}

// Streams implements Command: the streams this command reads.
func (c *StopAttempt) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *StopAttempt) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, c.MissionID)
	if err := m.open(false); err != nil {
		return nil, err
	}
	a, err := m.needAttempt()
	if err != nil {
		return nil, err
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeAttemptStopped, Data: AttemptStopped{
		MissionID: m.ID, Attempt: a.N, Reason: c.Reason, Detail: c.Detail, Evidence: c.Evidence, At: in.At,
	}}}, nil
}

// ReserveInference reserves one inference request of the running attempt.
type ReserveInference struct {
	MissionID     string `json:"mission_id"`
	ReservationID string `json:"reservation_id"`
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
	MissionID     string  `json:"mission_id"`
	ReservationID string  `json:"reservation_id"`
	Outcome       string  `json:"outcome"`
	Receipt       Receipt `json:"receipt"`
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
	if err := checkText("receipt.binding_identity", r.BindingIdentity, false, maxShortText); err != nil {
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
	MissionID     string   `json:"mission_id"`
	ReservationID string   `json:"reservation_id"`
	Resolution    string   `json:"resolution"`
	Evidence      []string `json:"evidence"`
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

// RecordCandidate records what the worker produced. A return with no file
// changed is not a candidate: the decider stops the mission with
// truncated_generation when the attempt's newest inference ended on its
// output limit ("length"), and with no_modification otherwise.
type RecordCandidate struct {
	MissionID     string   `json:"mission_id"`
	CandidateHash string   `json:"candidate_hash"`
	PatchHash     string   `json:"patch_hash"`
	FilesChanged  []string `json:"files_changed"`
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

// RecordCheck records one run of an acceptance check on a candidate. When
// it completes the independent results of a correction's candidate, and
// that candidate passes no more checks than the one it corrects, the
// mission stops for stagnation in the same append. (A new attempt's first
// candidate is not a correction and is never judged so.)
type RecordCheck struct {
	MissionID     string   `json:"mission_id"`
	CandidateHash string   `json:"candidate_hash"`
	CheckID       string   `json:"check_id"`
	ArgvHash      string   `json:"argv_hash"`
	Outcome       string   `json:"outcome"`
	Runner        string   `json:"runner"`
	RunnerKind    string   `json:"runner_kind"`
	ExitCode      int      `json:"exit_code"`
	Duration      Duration `json:"duration"`
	OutputBytes   int64    `json:"output_bytes"`
	OutputSHA256  string   `json:"output_sha256"`
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
	if err := checkSHA256("argv_hash", c.ArgvHash, true); err != nil {
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
	m := missionOf(in, c.MissionID)
	if err := m.open(false); err != nil {
		return nil, err
	}
	i := m.candidateIndex(c.CandidateHash)
	if i < 0 {
		return nil, refuse(CodeCandidateUnknown, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash},
			"mission %s produced no candidate %s", m.ID, c.CandidateHash)
	}
	j := slices.IndexFunc(m.Checks, func(ac AcceptanceCheck) bool { return ac.ID == c.CheckID })
	if j < 0 {
		return nil, refuse(CodeCheckUnknown, map[string]any{"mission_id": m.ID, "check_id": c.CheckID}, "%q is not an acceptance check of mission %s", c.CheckID, m.ID)
	}
	if want := ArgvHash(m.Checks[j].Argv); c.ArgvHash != want {
		return nil, refuse(CodeArgvMismatch, map[string]any{"mission_id": m.ID, "check_id": c.CheckID, "argv_hash": c.ArgvHash, "approved_argv_hash": want, "approved_argv": m.Checks[j].Argv},
			"check %s ran another command line than the approved argv", c.CheckID)
	}
	if c.Outcome == CheckPass && (c.Duration.Duration > m.Budgets.CommandTimeout.Duration || c.OutputBytes > m.Budgets.OutputBytesPerCommand) {
		return nil, refuse(CodeCheckOutOfBounds, map[string]any{"mission_id": m.ID, "check_id": c.CheckID,
			"duration": c.Duration.String(), "command_timeout": m.Budgets.CommandTimeout.String(),
			"output_bytes": c.OutputBytes, "output_bytes_per_command": m.Budgets.OutputBytesPerCommand},
			"a pass beyond the per-command bounds cannot count; record it as truncated or error")
	}
	rec := CheckRecorded{MissionID: m.ID, CandidateHash: c.CandidateHash, CheckID: c.CheckID, ArgvHash: c.ArgvHash,
		Outcome: c.Outcome, Runner: c.Runner, RunnerKind: c.RunnerKind, ExitCode: c.ExitCode, Duration: c.Duration,
		OutputBytes: c.OutputBytes, OutputSHA256: c.OutputSHA256, At: in.At}
	out := []NewEvent{{Stream: MissionStream(m.ID), Type: TypeCheckRecorded, Data: rec}}
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

// RecordReview records a review of a candidate. An accepted review needs
// verification passed for this exact candidate hash and coverage for every
// acceptance id. A refusal for authority stops the mission
// (authority_refused); a refusal for a defect leaves it open for a
// correction.
type RecordReview struct {
	MissionID     string            `json:"mission_id"`
	CandidateHash string            `json:"candidate_hash"`
	Verdict       string            `json:"verdict"`
	Reviewer      string            `json:"reviewer"`
	Coverage      map[string]string `json:"coverage"`
	RefusalKind   string            `json:"refusal_kind"`
	Reason        string            `json:"reason"`
}

// CommandName implements Command.
func (*RecordReview) CommandName() string { return "RecordReview" }

// Validate implements Command: the shape checks, field by field.
func (c *RecordReview) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkSHA256("candidate_hash", c.CandidateHash, true); err != nil {
		return err
	}
	if err := checkOneOf("verdict", c.Verdict, VerdictAccepted, VerdictRefused); err != nil {
		return err
	}
	if err := checkText("reviewer", c.Reviewer, true, maxShortText); err != nil {
		return err
	}
	if len(c.Coverage) > maxListLen {
		return invalid("coverage", "has %d entries; the limit is %d", len(c.Coverage), maxListLen)
	}
	for _, k := range sortedKeys(c.Coverage) {
		if err := checkText("coverage."+k, c.Coverage[k], false, maxLongText); err != nil {
			return err
		}
	}
	if c.Verdict == VerdictRefused {
		if err := checkOneOf("refusal_kind", c.RefusalKind, RefusalDefect, RefusalAuthority); err != nil {
			return err
		}
		return checkText("reason", c.Reason, true, maxLongText)
	}
	if c.RefusalKind != "" {
		return invalid("refusal_kind", "applies only to a refused verdict")
	}
	return checkText("reason", c.Reason, false, maxLongText)
}

// Streams implements Command: the streams this command reads.
func (c *RecordReview) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *RecordReview) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, c.MissionID)
	if err := m.open(false); err != nil {
		return nil, err
	}
	i := m.candidateIndex(c.CandidateHash)
	if i < 0 {
		return nil, refuse(CodeCandidateUnknown, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash},
			"mission %s produced no candidate %s", m.ID, c.CandidateHash)
	}
	if i != len(m.Candidates)-1 {
		return nil, refuse(CodeCandidateSuperseded, map[string]any{"mission_id": m.ID, "candidate_hash": c.CandidateHash, "latest": m.Candidates[len(m.Candidates)-1].CandidateHash},
			"candidate %s was superseded by a newer candidate", c.CandidateHash)
	}
	rev := ReviewRecorded{MissionID: m.ID, CandidateHash: c.CandidateHash, Verdict: c.Verdict, Reviewer: c.Reviewer,
		Coverage: c.Coverage, RefusalKind: c.RefusalKind, Reason: c.Reason, At: in.At}
	out := []NewEvent{{Stream: MissionStream(m.ID), Type: TypeReviewRecorded, Data: rev}}
	if c.Verdict == VerdictRefused {
		if c.RefusalKind == RefusalAuthority {
			out = append(out, NewEvent{Stream: MissionStream(m.ID), Type: TypeMissionStopped, Data: MissionStopped{
				MissionID: m.ID, Reason: StopAuthorityRefused, Detail: c.Reason, CandidateHash: c.CandidateHash, At: in.At,
			}})
		}
		return out, nil
	}
	if err := m.verified(c.CandidateHash); err != nil {
		return nil, err
	}
	var unknown, missing []string
	for _, k := range sortedKeys(c.Coverage) {
		if !slices.ContainsFunc(m.Checks, func(ac AcceptanceCheck) bool { return ac.ID == k }) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return nil, refuse(CodeCoverageUnknownCheck, map[string]any{"mission_id": m.ID, "unknown": unknown},
			"coverage names %v, which are not acceptance checks of mission %s", unknown, m.ID)
	}
	for _, ac := range m.Checks {
		if c.Coverage[ac.ID] == "" {
			missing = append(missing, ac.ID)
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

// RequestCorrection asks the worker to correct the newest candidate, whose
// checks must all have an independent result.
type RequestCorrection struct {
	MissionID     string `json:"mission_id"`
	CandidateHash string `json:"candidate_hash"`
	Diagnosis     string `json:"diagnosis"`
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
	MissionID     string `json:"mission_id"`
	CandidateHash string `json:"candidate_hash"`
	To            string `json:"to"`
}

// CommandName implements Command.
func (*DeliverResult) CommandName() string { return "DeliverResult" }

// Validate implements Command: the shape checks, field by field.
func (c *DeliverResult) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkSHA256("candidate_hash", c.CandidateHash, true); err != nil {
		return err
	}
	return checkText("to", c.To, true, maxShortText)
}

// Streams implements Command: the streams this command reads.
func (c *DeliverResult) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *DeliverResult) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, c.MissionID)
	if !m.Submitted {
		return nil, missionUnknown(c.MissionID)
	}
	if d := m.Delivery; d != nil {
		if d.CandidateHash == c.CandidateHash {
			return nil, nil
		}
		return nil, refuse(CodeDeliveryConflict, map[string]any{"mission_id": m.ID, "delivered": d.CandidateHash, "delivery": d.Ref},
			"mission %s already delivered candidate %s", m.ID, d.CandidateHash)
	}
	if r := m.stopped(false); r != nil {
		return nil, r
	}
	cand, err := m.acceptedCandidate(c.CandidateHash)
	if err != nil {
		return nil, err
	}
	val := make([]Validation, len(m.Checks))
	for i, ac := range m.Checks {
		val[i] = Validation{CheckID: ac.ID, Argv: ac.Argv, Pass: cand.Checks[ac.ID].PassRef}
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeResultDelivered, Data: ResultDelivered{
		MissionID: m.ID, CandidateHash: cand.CandidateHash, PatchHash: cand.PatchHash, To: c.To,
		Files: cand.FilesChanged, Validation: val, Review: m.Accepted.Ref, At: in.At,
	}}}, nil
}

// IntegratePatch applies the accepted candidate's patch under a
// "patch_apply" approval for "mission-<id>", consumed in the same append.
// Integrating the same candidate again appends nothing and spends nothing.
type IntegratePatch struct {
	MissionID     string `json:"mission_id"`
	CandidateHash string `json:"candidate_hash"`
	PatchHash     string `json:"patch_hash"`
	ApprovalID    string `json:"approval_id"`
}

// CommandName implements Command.
func (*IntegratePatch) CommandName() string { return "IntegratePatch" }

// Validate implements Command: the shape checks, field by field.
func (c *IntegratePatch) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkSHA256("candidate_hash", c.CandidateHash, true); err != nil {
		return err
	}
	if err := checkSHA256("patch_hash", c.PatchHash, true); err != nil {
		return err
	}
	if c.ApprovalID != "" {
		return checkID("approval_id", c.ApprovalID)
	}
	return nil
}

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
	m := missionOf(in, c.MissionID)
	if !m.Submitted {
		return nil, missionUnknown(c.MissionID)
	}
	if ig := m.Integration; ig != nil {
		if ig.CandidateHash == c.CandidateHash {
			return nil, nil
		}
		return nil, refuse(CodeCandidateHashMismatch, map[string]any{"mission_id": m.ID, "integrated": ig.CandidateHash},
			"mission %s already integrated candidate %s", m.ID, ig.CandidateHash)
	}
	if r := m.stopped(false); r != nil {
		return nil, r
	}
	cand, err := m.acceptedCandidate(c.CandidateHash)
	if err != nil {
		return nil, err
	}
	if cand.PatchHash != c.PatchHash {
		return nil, refuse(CodePatchHashMismatch, map[string]any{"mission_id": m.ID, "patch_hash": c.PatchHash, "accepted_patch_hash": cand.PatchHash},
			"patch %s is not the accepted candidate's patch %s", c.PatchHash, cand.PatchHash)
	}
	consume, err := in.States.Approval(c.ApprovalID).Authorize(ActionPatchApply, MissionStream(m.ID), c.CommandName(), in.At)
	if err != nil {
		return nil, err
	}
	return []NewEvent{
		{Stream: MissionStream(m.ID), Type: TypePatchIntegrated, Data: PatchIntegrated{
			MissionID: m.ID, CandidateHash: c.CandidateHash, PatchHash: c.PatchHash, ApprovalID: c.ApprovalID,
			Review: m.Accepted.Ref, At: in.At,
		}},
		consume,
	}, nil
}

// StopMission stops a mission for a reason the supervisor asserts
// (cancelled, authority_refused, checks_failed, budget_exhausted). Stopping
// it again for the same reason appends nothing.
type StopMission struct {
	MissionID string `json:"mission_id"`
	Reason    string `json:"reason"`
	Detail    string `json:"detail"`
}

// CommandName implements Command.
func (*StopMission) CommandName() string { return "StopMission" }

// Validate implements Command: the shape checks, field by field.
func (c *StopMission) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkOneOf("reason", c.Reason, StopCancelled, StopAuthorityRefused, StopChecksFailed, StopBudgetExhausted); err != nil {
		return err
	}
	return checkText("detail", c.Detail, false, maxLongText)
}

// Streams implements Command: the streams this command reads.
func (c *StopMission) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *StopMission) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, c.MissionID)
	if m.Stop != nil && m.Stop.Reason == c.Reason {
		return nil, nil
	}
	if err := m.open(false); err != nil {
		return nil, err
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeMissionStopped, Data: MissionStopped{
		MissionID: m.ID, Reason: c.Reason, Detail: c.Detail, At: in.At,
	}}}, nil
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
