package aggregates

import (
	"github.com/greffe/greffe/events"
)

// Mission lifecycle: submitting a mission under the node's policy, and
// stopping it for a reason the supervisor asserts.

// SubmitMission submits a mission under the node's policy.
type SubmitMission struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// TaskClass is the class of task (matched against the providers'
	// task_classes).
	TaskClass ShortText `json:"task_class"`
	// Mode is the mission's mode: one of the values its schema lists.
	Mode MissionMode `json:"mode"`
	// Confidential keeps the mission off connected providers: its data may
	// leave no local host.
	Confidential bool `json:"confidential" jsonschema:"optional"`
	// AllowConnected allows routing to a connected (remote) provider when no
	// local one is ready.
	AllowConnected bool `json:"allow_connected" jsonschema:"optional"`
	// DeclaredProvider is the provider the mission asks for; empty lets
	// routing choose.
	DeclaredProvider OptionalID `json:"declared_provider"`
	// StartsRuntime says the mission starts a local runtime (a model server),
	// which needs a startup approval and an admission.
	StartsRuntime bool `json:"starts_runtime" jsonschema:"optional"`
	// AllowedFiles are the paths the mission's patches may change; empty
	// allows none to be named.
	AllowedFiles PathPatterns `json:"allowed_files"`
	// AcceptanceChecks are the checks an independent runner executes on each
	// candidate; a result is delivered only when all pass.
	AcceptanceChecks AcceptanceChecks `json:"acceptance_checks" jsonschema:"required"`
	// Budgets are the mission's budgets: the policy's, narrowed by what the
	// submission asks (never widened).
	Budgets BudgetRequest `json:"budgets" jsonschema:"optional"`
}

// CommandName implements Command.
func (*SubmitMission) CommandName() string { return "SubmitMission" }

// Validate implements crossFieldRules: a mission that is not a direct reply has checks,
// and an acceptance check's argv_hash, when given, is its argv's.
func (c *SubmitMission) Validate() error {
	if c.Mode != ModeDirectReply && len(c.AcceptanceChecks) == 0 {
		return invalid("acceptance_checks", "a %s mission needs at least one acceptance check: verification is never vacuous", c.Mode)
	}
	for i, ac := range c.AcceptanceChecks {
		if ac.ArgvHash != "" && ac.ArgvHash != events.ArgvHash(ac.Argv) {
			return invalid(indexPath("acceptance_checks", i)+".argv_hash", "is not the hash of argv; leave it out, the node computes it")
		}
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *SubmitMission) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *SubmitMission) Decide(in Inputs) ([]NewEvent, error) {
	if in.States.Mission(string(c.MissionID)).Submitted {
		return nil, refuse(CodeMissionExists, map[string]any{"mission_id": c.MissionID}, "mission %s was already submitted", c.MissionID)
	}
	budgets, err := in.Policy.Budgets.Narrow(c.Budgets)
	if err != nil {
		return nil, err
	}
	checks := make([]AcceptanceCheck, len(c.AcceptanceChecks))
	for i, ac := range c.AcceptanceChecks {
		checks[i] = AcceptanceCheck{ID: ac.ID, Argv: ac.Argv, ArgvHash: events.ArgvHash(ac.Argv)}
	}
	return []NewEvent{{Stream: MissionStream(c.MissionID), Type: TypeMissionSubmitted, Data: MissionSubmitted{
		MissionID: string(c.MissionID), TaskClass: string(c.TaskClass), Mode: string(c.Mode), Confidential: c.Confidential,
		AllowConnected: c.AllowConnected, DeclaredProvider: string(c.DeclaredProvider), StartsRuntime: c.StartsRuntime,
		AllowedFiles: c.AllowedFiles, AcceptanceChecks: checks, Budgets: budgets, At: in.At,
	}}}, nil
}

// StopMission stops a mission for a reason the supervisor asserts
// (cancelled, authority_refused, checks_failed, budget_exhausted). Stopping
// it again for the same reason appends nothing.
type StopMission struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// Reason is why the mission stops: one of the values its schema lists.
	Reason MissionStopReason `json:"reason"`
	// Detail says more, in words; empty when there is nothing to add.
	Detail OptionalLongText `json:"detail"`
}

// CommandName implements Command.
func (*StopMission) CommandName() string { return "StopMission" }

// Streams implements Command: the streams this command reads.
func (c *StopMission) Streams(States) []string { return []string{MissionStream(c.MissionID)} }

// Decide implements Command: the gates.
func (c *StopMission) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if m.Stop != nil && m.Stop.Reason == string(c.Reason) {
		return nil, nil
	}
	if err := m.open(false); err != nil {
		return nil, err
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeMissionStopped, Data: MissionStopped{
		MissionID: m.ID, Reason: string(c.Reason), Detail: string(c.Detail), At: in.At,
	}}}, nil
}
