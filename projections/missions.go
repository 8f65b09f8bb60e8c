package projections

import (
	"slices"
	"strings"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// The missions board: per mission its state, route, attempt, the budgets
// spent against their ceilings, the checks of each candidate by outcome
// (with the verification rule of the gates: only independent runs count,
// the first non-pass blocks), the review, delivery, integration and stop.

type missionRow struct {
	ID               string                 `json:"id"`
	TaskClass        string                 `json:"task_class"`
	Mode             string                 `json:"mode"`
	Confidential     bool                   `json:"confidential"`
	DeclaredProvider string                 `json:"declared_provider"`
	StartsRuntime    bool                   `json:"starts_runtime"`
	Checks           []string               `json:"checks"`
	Budgets          missionBudgets         `json:"budgets"`
	Route            *RouteSummary          `json:"route"`
	Admission        *AdmissionSummary      `json:"admission"`
	Attempts         int                    `json:"attempts"`
	Attempt          *AttemptSummary        `json:"attempt"`
	Reserved         int                    `json:"reserved"`
	Errors           int                    `json:"errors"`
	TokensIn         int64                  `json:"tokens_in"`
	TokensOut        int64                  `json:"tokens_out"`
	Reservations     map[string]reservation `json:"reservations"`
	Corrections      int                    `json:"corrections"`
	Candidates       []candidateRow         `json:"candidates"`
	Review           *ReviewSummary         `json:"review"`
	Accepted         string                 `json:"accepted"`
	Stop             *StopSummary           `json:"stop"`
	Delivery         *DeliverySummary       `json:"delivery"`
	Integration      *IntegrationSummary    `json:"integration"`
}

type missionBudgets struct {
	InferenceRequests   int `json:"inference_requests"`
	ErrorRecoveryCycles int `json:"error_recovery_cycles"`
	Attempts            int `json:"attempts"`
	Corrections         int `json:"corrections"`
}

type reservation struct {
	Attempt    int    `json:"attempt"`
	Outcome    string `json:"outcome"`
	Finish     string `json:"finish"`
	Reconciled bool   `json:"reconciled"`
}

type candidateRow struct {
	Hash       string `json:"hash"`
	PatchHash  string `json:"patch_hash"`
	Attempt    int    `json:"attempt"`
	Correction int    `json:"correction"`
	Files      int    `json:"files"`
	// Tallies are the independent runs of each acceptance check, in the
	// order of missionRow.Checks.
	Tallies    []tally `json:"tallies"`
	WorkerRuns int     `json:"worker_runs"`
	// StatedRuns counts runs a writer stated as independent, unsigned:
	// shown, never counted (aggregates.CheckRecorded.Signed).
	StatedRuns int `json:"stated_runs"`
}

type tally struct {
	Runs     int    `json:"runs"`
	Passed   bool   `json:"passed"`
	Blocking string `json:"blocking"`
}

// RouteSummary is a mission's newest route.
type RouteSummary struct {
	Selected     string              `json:"selected"`
	SelectedKind string              `json:"selected_kind"`
	ModelTag     string              `json:"model_tag"`
	Fallback     bool                `json:"fallback"`
	Event        aggregates.EventRef `json:"event"`
}

// AdmissionSummary is a mission's newest admission decision.
type AdmissionSummary struct {
	Attempt  int                 `json:"attempt"`
	Decision string              `json:"decision"`
	Failed   []string            `json:"failed_screens,omitempty"`
	Event    aggregates.EventRef `json:"event"`
}

// AttemptSummary is a mission's newest attempt.
type AttemptSummary struct {
	N         int    `json:"n"`
	Provider  string `json:"provider"`
	ModelTag  string `json:"model_tag"`
	Ended     bool   `json:"ended"`
	EndReason string `json:"end_reason,omitempty"`
}

// ReviewSummary is a mission's newest review.
type ReviewSummary struct {
	CandidateHash string `json:"candidate_hash"`
	Verdict       string `json:"verdict"`
	Reviewer      string `json:"reviewer"`
	// Principal is who sent the review (its token's name; "anonymous" on
	// a node without tokens): Reviewer is what it stated (issue #20).
	Principal   string              `json:"principal,omitempty"`
	RefusalKind string              `json:"refusal_kind,omitempty"`
	Event       aggregates.EventRef `json:"event"`
}

// StopSummary is why a mission stopped.
type StopSummary struct {
	Reason string              `json:"reason"`
	Detail string              `json:"detail,omitempty"`
	Event  aggregates.EventRef `json:"event"`
}

// DeliverySummary is a mission's delivery.
type DeliverySummary struct {
	CandidateHash string              `json:"candidate_hash"`
	To            string              `json:"to"`
	Event         aggregates.EventRef `json:"event"`
}

// IntegrationSummary is a mission's integrated patch.
type IntegrationSummary struct {
	CandidateHash string              `json:"candidate_hash"`
	PatchHash     string              `json:"patch_hash"`
	ApprovalID    string              `json:"approval_id"`
	Event         aggregates.EventRef `json:"event"`
}

type missions struct {
	interner
	rows *table[missionRow]
}

func newMissions(Env) Model { return &missions{rows: newTable[missionRow]("m/")} }

var (
	submitKeys    = []string{"task_class", "mode", "confidential", "declared_provider", "starts_runtime", "acceptance_checks", "budgets"}
	budgetKeys    = []string{"inference_requests", "error_recovery_cycles", "attempts", "corrections"}
	idKeys        = []string{"id"}
	routeKeys     = []string{"selected", "selected_kind", "model_tag", "fallback"}
	admissionKeys = []string{"attempt", "decision", "screens"}
	screenKeys    = []string{"passed", "code"}
	attemptKeys   = []string{"attempt", "provider", "model_tag"}
	reserveKeys   = []string{"reservation_id", "attempt"}
	settleKeys    = []string{"reservation_id", "outcome", "receipt"}
	receiptKeys   = []string{"finish_reason", "tokens_in", "tokens_out"}
	reconcileKeys = []string{"reservation_id"}
	candKeys      = []string{"candidate_hash", "patch_hash", "attempt", "correction", "files_changed"}
	checkKeys     = []string{"candidate_hash", "check_id", "outcome", "runner_kind", "signed_by"}
	reviewKeys    = []string{"candidate_hash", "verdict", "reviewer", "refusal_kind", "principal"}
	stopKeys      = []string{"reason", "detail"}
	deliverKeys   = []string{"candidate_hash", "to"}
	integrateKeys = []string{"candidate_hash", "patch_hash", "approval_id"}
)

func (m *missions) Apply(e *events.Event) error {
	if !strings.HasPrefix(e.Stream, aggregates.MissionPrefix) {
		return nil
	}
	r := m.rows.upsert(strings.TrimPrefix(e.Stream, aggregates.MissionPrefix))
	var v [7][]byte
	switch e.Type {
	case aggregates.TypeMissionSubmitted:
		fields(e.Data, submitKeys, v[:])
		r.ID = strings.TrimPrefix(e.Stream, aggregates.MissionPrefix)
		r.TaskClass, r.Mode, r.Confidential, r.DeclaredProvider, r.StartsRuntime = str(v[0]), str(v[1]), boolean(v[2]), str(v[3]), boolean(v[4])
		r.Checks = []string{}
		elements(v[5], func(el []byte) {
			var c [1][]byte
			fields(el, idKeys, c[:])
			r.Checks = append(r.Checks, str(c[0]))
		})
		var b [4][]byte
		fields(v[6], budgetKeys, b[:])
		r.Budgets = missionBudgets{InferenceRequests: int(i64(b[0])), ErrorRecoveryCycles: int(i64(b[1])), Attempts: int(i64(b[2])), Corrections: int(i64(b[3]))}
	case aggregates.TypeRouteDecided:
		fields(e.Data, routeKeys, v[:])
		r.Route = &RouteSummary{Selected: str(v[0]), SelectedKind: str(v[1]), ModelTag: str(v[2]), Fallback: boolean(v[3]), Event: m.ref(e)}
	case aggregates.TypeAdmissionDecided:
		fields(e.Data, admissionKeys, v[:])
		a := &AdmissionSummary{Attempt: int(i64(v[0])), Decision: str(v[1]), Event: m.ref(e)}
		elements(v[2], func(el []byte) {
			var s [2][]byte
			fields(el, screenKeys, s[:])
			if !boolean(s[0]) {
				a.Failed = append(a.Failed, str(s[1]))
			}
		})
		r.Admission = a
	case aggregates.TypeAttemptStarted:
		fields(e.Data, attemptKeys, v[:])
		r.Attempts++
		r.Attempt = &AttemptSummary{N: int(i64(v[0])), Provider: str(v[1]), ModelTag: str(v[2])}
	case aggregates.TypeAttemptStopped:
		fields(e.Data, stopKeys, v[:])
		if r.Attempt != nil {
			r.Attempt.Ended, r.Attempt.EndReason = true, str(v[0])
		}
	case aggregates.TypeInferenceReserved:
		fields(e.Data, reserveKeys, v[:])
		if r.Reservations == nil {
			r.Reservations = map[string]reservation{}
		}
		r.Reservations[str(v[0])] = reservation{Attempt: int(i64(v[1]))}
		r.Reserved++
	case aggregates.TypeInferenceSettled:
		fields(e.Data, settleKeys, v[:])
		var rc [3][]byte
		fields(v[2], receiptKeys, rc[:])
		id, outcome, finish := str(v[0]), str(v[1]), str(rc[0])
		res := r.Reservations[id]
		res.Outcome, res.Finish = outcome, finish
		if r.Reservations == nil {
			r.Reservations = map[string]reservation{}
		}
		r.Reservations[id] = res
		if outcome == aggregates.OutcomeRejectedBeforeGeneration || finish == aggregates.FinishError {
			r.Errors++
		}
		r.TokensIn += i64(rc[1])
		r.TokensOut += i64(rc[2])
	case aggregates.TypeReservationReconciled:
		fields(e.Data, reconcileKeys, v[:])
		id := str(v[0])
		res := r.Reservations[id]
		res.Reconciled = true
		if r.Reservations == nil {
			r.Reservations = map[string]reservation{}
		}
		r.Reservations[id] = res
	case aggregates.TypeCandidateProduced:
		fields(e.Data, candKeys, v[:])
		c := candidateRow{Hash: str(v[0]), PatchHash: str(v[1]), Attempt: int(i64(v[2])), Correction: int(i64(v[3])), Tallies: make([]tally, len(r.Checks))}
		elements(v[4], func([]byte) { c.Files++ })
		r.Candidates = append(r.Candidates, c)
	case aggregates.TypeCheckRecorded:
		// The commonest event of the log: folded without allocating
		// unless it names a check for the first time.
		fields(e.Data, checkKeys, v[:])
		hash := raw(v[0])
		i := slices.IndexFunc(r.Candidates, func(c candidateRow) bool { return c.Hash == string(hash) })
		if i < 0 {
			return foldError(e, "check of a candidate the mission never produced")
		}
		c := &r.Candidates[i]
		if !is(v[3], aggregates.RunnerIndependent) {
			c.WorkerRuns++
			break
		}
		if len(v[4]) == 0 || is(v[4], "") {
			// Stated by a writer: never an independent result (issue #20).
			c.StatedRuns++
			break
		}
		id := raw(v[1])
		if id == nil {
			id = []byte(str(v[1]))
		}
		k := slices.IndexFunc(r.Checks, func(c string) bool { return c == string(id) })
		if k < 0 || k >= len(c.Tallies) {
			break // not an acceptance check: the gate refuses those
		}
		t := &c.Tallies[k]
		t.Runs++
		if is(v[2], aggregates.CheckPass) {
			t.Passed = true
		} else if t.Blocking == "" {
			t.Blocking = outcome(v[2])
		}
	case aggregates.TypeReviewRecorded:
		fields(e.Data, reviewKeys, v[:])
		r.Review = &ReviewSummary{CandidateHash: str(v[0]), Verdict: str(v[1]), Reviewer: str(v[2]), RefusalKind: str(v[3]), Principal: str(v[4]), Event: m.ref(e)}
		if r.Review.Verdict == aggregates.VerdictAccepted {
			r.Accepted = r.Review.CandidateHash
		}
	case aggregates.TypeCorrectionRequested:
		r.Corrections++
	case aggregates.TypeMissionStopped:
		fields(e.Data, stopKeys, v[:])
		r.Stop = &StopSummary{Reason: str(v[0]), Detail: str(v[1]), Event: m.ref(e)}
	case aggregates.TypeResultDelivered:
		fields(e.Data, deliverKeys, v[:])
		r.Delivery = &DeliverySummary{CandidateHash: str(v[0]), To: str(v[1]), Event: m.ref(e)}
	case aggregates.TypePatchIntegrated:
		fields(e.Data, integrateKeys, v[:])
		r.Integration = &IntegrationSummary{CandidateHash: str(v[0]), PatchHash: str(v[1]), ApprovalID: str(v[2]), Event: m.ref(e)}
	default:
		// A type this model does not read (one a later decider added):
		// nothing it shows depends on it.
		return nil
	}
	return nil
}

// outcome returns a check outcome as its constant (no allocation for the
// known ones).
func outcome(v []byte) string {
	for _, o := range []string{aggregates.CheckFail, aggregates.CheckSkipped, aggregates.CheckTruncated, aggregates.CheckError, aggregates.CheckPass} {
		if is(v, o) {
			return o
		}
	}
	return str(v)
}

func (m *missions) Flush(put func(string, []byte) error) error { return m.rows.flush(put) }

func (m *missions) Load(key string, value []byte) error { return loadTables(key, value, m.rows.load) }

// Mission states on the board.
const (
	MissionSubmitted  = "submitted"
	MissionRouted     = "routed"
	MissionRunning    = "running"
	MissionUncertain  = "uncertain"
	MissionAccepted   = "accepted"
	MissionDelivered  = "delivered"
	MissionIntegrated = "integrated"
	MissionStopped    = "stopped"
)

// MissionRow is one row of the missions board.
type MissionRow struct {
	Key              string              `json:"key"`
	MissionID        string              `json:"mission_id"`
	State            string              `json:"state"`
	TaskClass        string              `json:"task_class"`
	Mode             string              `json:"mode"`
	Confidential     bool                `json:"confidential"`
	DeclaredProvider string              `json:"declared_provider,omitempty"`
	Route            *RouteSummary       `json:"route"`
	Admission        *AdmissionSummary   `json:"admission,omitempty"`
	Attempt          *AttemptSummary     `json:"attempt"`
	Budgets          map[string]Spent    `json:"budgets"`
	Tokens           map[string]int64    `json:"tokens"`
	Uncertain        []string            `json:"uncertain"`
	Candidates       []CandidateChecks   `json:"candidates"`
	Review           *ReviewSummary      `json:"review"`
	Accepted         string              `json:"accepted,omitempty"`
	Delivery         *DeliverySummary    `json:"delivery"`
	Integration      *IntegrationSummary `json:"integration"`
	Stop             *StopSummary        `json:"stop"`
}

// Spent is a budget's use against its ceiling.
type Spent struct {
	Used  int `json:"used"`
	Limit int `json:"limit"`
}

// CandidateChecks is one candidate with its acceptance checks by outcome:
// pass, fail, skipped, truncated, error (the first non-pass of a check
// blocks it) and missing (no independent run).
type CandidateChecks struct {
	Hash       string         `json:"hash"`
	Attempt    int            `json:"attempt"`
	Correction int            `json:"correction"`
	Files      int            `json:"files"`
	Checks     map[string]int `json:"checks"`
	Verified   bool           `json:"verified"`
	WorkerRuns int            `json:"worker_runs"`
	// StatedRuns counts runs a writer stated as independent, without a
	// check runner's signature; they never count.
	StatedRuns int `json:"stated_runs"`
}

func (m *missions) View(q Query) any {
	rows := []MissionRow{}
	for _, k := range m.rows.keys() {
		if q.Key != "" && k != q.Key {
			continue
		}
		r := m.rows.get(k)
		row := MissionRow{Key: k, MissionID: k, TaskClass: r.TaskClass, Mode: r.Mode, Confidential: r.Confidential,
			DeclaredProvider: r.DeclaredProvider, Route: r.Route, Admission: r.Admission, Attempt: r.Attempt,
			Review: r.Review, Accepted: r.Accepted, Delivery: r.Delivery, Integration: r.Integration, Stop: r.Stop,
			Budgets: map[string]Spent{
				"attempts":              {r.Attempts, r.Budgets.Attempts},
				"inference_requests":    {r.Reserved, r.Budgets.InferenceRequests},
				"corrections":           {r.Corrections, r.Budgets.Corrections},
				"error_recovery_cycles": {r.Errors, r.Budgets.ErrorRecoveryCycles},
			},
			Tokens:     map[string]int64{"in": r.TokensIn, "out": r.TokensOut},
			Uncertain:  []string{},
			Candidates: []CandidateChecks{},
		}
		for _, id := range sortedMapKeys(r.Reservations) {
			if res := r.Reservations[id]; res.Outcome == aggregates.OutcomeUncertain && !res.Reconciled {
				row.Uncertain = append(row.Uncertain, id)
			}
		}
		for _, c := range r.Candidates {
			cc := CandidateChecks{Hash: c.Hash, Attempt: c.Attempt, Correction: c.Correction, Files: c.Files, WorkerRuns: c.WorkerRuns, StatedRuns: c.StatedRuns,
				Checks: map[string]int{aggregates.CheckPass: 0, aggregates.CheckFail: 0, aggregates.CheckSkipped: 0,
					aggregates.CheckTruncated: 0, aggregates.CheckError: 0, "missing": 0}}
			for k := range r.Checks {
				var t tally
				if k < len(c.Tallies) {
					t = c.Tallies[k]
				}
				switch {
				case t.Runs == 0:
					cc.Checks["missing"]++
				case t.Blocking != "":
					cc.Checks[t.Blocking]++
				case t.Passed:
					cc.Checks[aggregates.CheckPass]++
				}
			}
			cc.Verified = len(r.Checks) > 0 && cc.Checks[aggregates.CheckPass] == len(r.Checks)
			row.Candidates = append(row.Candidates, cc)
		}
		switch {
		case r.Stop != nil:
			row.State = MissionStopped
		case r.Integration != nil:
			row.State = MissionIntegrated
		case r.Delivery != nil:
			row.State = MissionDelivered
		case r.Accepted != "":
			row.State = MissionAccepted
		case len(row.Uncertain) > 0:
			row.State = MissionUncertain
		case r.Attempt != nil && !r.Attempt.Ended:
			row.State = MissionRunning
		case r.Route != nil:
			row.State = MissionRouted
		default:
			row.State = MissionSubmitted
		}
		rows = append(rows, row)
	}
	return rows
}
