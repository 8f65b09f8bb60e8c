package aggregates

import (
	"slices"
	"sort"
	"strconv"
	"time"
)

// The Mission aggregate (stream "mission-<id>"), one idea a file:
//
//   - mission.go: its state, and the questions the gates ask of it;
//   - mission_events.go: its event types, their data and the values their
//     fields take;
//   - mission_fold.go: Evolve, how each event changes the state;
//   - mission_gates.go: its refusal codes and the gates several commands
//     share;
//   - its commands, one file per stage of a mission: mission_lifecycle.go
//     (submit, stop), mission_attempts.go (start and stop an attempt),
//     mission_inference.go (reserve, settle and reconcile inference),
//     mission_candidates.go (candidates, their checks, corrections) and
//     mission_delivery.go (review, delivery, integration).
//
// Routing (DecideRoute) and admission (DecideAdmission) are in routing.go
// and admission.go.

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

// AcceptanceChecks are a mission's acceptance checks: up to 256, each id
// listed once.
type AcceptanceChecks []AcceptanceCheck

func (l AcceptanceChecks) check(path string) error {
	if len(l) > maxListLen {
		return invalid(path, "has %d entries; the limit is %d", len(l), maxListLen)
	}
	return checkStructs(path, l, "id", func(c AcceptanceCheck) ID { return c.ID },
		func(c AcceptanceCheck) string { return strconv.Quote(string(c.ID)) })
}
func (AcceptanceChecks) jsonSchema() map[string]any {
	return structListSchema("AcceptanceCheck", 0, maxListLen, false)
}

// AcceptanceCheck is one acceptance check of a mission: an id and the exact
// argv an independent runner executes. ArgvHash is ArgvHash(Argv).
type AcceptanceCheck struct {
	// ID is the check's id, unique within the mission.
	ID ID `json:"id"`
	// Argv is the exact command line: the program and its arguments, in order.
	Argv Argv `json:"argv"`
	// ArgvHash is ArgvHash(Argv); a submission may leave it out (it is
	// computed), and a wrong one is refused.
	ArgvHash string `json:"argv_hash,omitempty"`
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
// recorded for it: independent means signed by a registered check runner
// (CheckRecorded.Signed).
type Candidate struct {
	CandidateProduced
	// Checks holds, per acceptance check id, the independent runs recorded
	// for this candidate hash.
	Checks map[string]CheckTally
	// WorkerRuns counts checks reported by the worker itself; they never
	// count toward verification.
	WorkerRuns int
	// StatedRuns counts runs a writer stated as independent without a
	// check runner's signature; they never count toward verification.
	StatedRuns int
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

// Exists reports whether the mission stream has events.
func (m Mission) Exists() bool { return m.Events > 0 }

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
		t := tallies[string(c.ID)]
		switch {
		case t.Runs == 0:
			v.Missing = append(v.Missing, string(c.ID))
		case t.Blocking != "":
			v.Blocked[string(c.ID)] = t.Blocking
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
