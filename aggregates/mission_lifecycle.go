package aggregates

import (
	"path"

	"github.com/greffe/greffe/events"
)

// Mission lifecycle: submitting a mission under the node's policy, and
// stopping it for a reason the supervisor asserts.

// SubmitMission submits a mission under the node's policy.
type SubmitMission struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// TaskClass is the class of task (matched against the providers'
	// task_classes).
	TaskClass string `json:"task_class" jsonschema:"minLength=1,maxLength=256,pattern=\\S"`
	// Mode is the mission's mode: one of the values its schema lists.
	Mode string `json:"mode" jsonschema:"enum=proposal,enum=qualification,enum=direct_reply"`
	// Confidential keeps the mission off connected providers: its data may
	// leave no local host.
	Confidential bool `json:"confidential" jsonschema:"optional"`
	// AllowConnected allows routing to a connected (remote) provider when no
	// local one is ready.
	AllowConnected bool `json:"allow_connected" jsonschema:"optional"`
	// DeclaredProvider is the provider the mission asks for; empty lets
	// routing choose.
	DeclaredProvider string `json:"declared_provider" jsonschema:"maxLength=128,pattern=^(\\S+)?$,optional"`
	// StartsRuntime says the mission starts a local runtime (a model server),
	// which needs a startup approval and an admission.
	StartsRuntime bool `json:"starts_runtime" jsonschema:"optional"`
	// AllowedFiles are the paths the mission's patches may change; empty
	// allows none to be named.
	AllowedFiles []string `json:"allowed_files" jsonschema:"maxItems=256,uniqueItems=true,optional,minLength=1,maxLength=256,pattern=\\S"`
	// AcceptanceChecks are the checks an independent runner executes on each
	// candidate; a result is delivered only when all pass.
	AcceptanceChecks []AcceptanceCheck `json:"acceptance_checks"`
	// Budgets are the mission's budgets: the policy's, narrowed by what the
	// submission asks (never widened).
	Budgets BudgetRequest `json:"budgets" jsonschema:"optional"`
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
		if ac.ArgvHash != "" && ac.ArgvHash != events.ArgvHash(ac.Argv) {
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
		checks[i] = AcceptanceCheck{ID: ac.ID, Argv: ac.Argv, ArgvHash: events.ArgvHash(ac.Argv)}
	}
	return []NewEvent{{Stream: MissionStream(c.MissionID), Type: TypeMissionSubmitted, Data: MissionSubmitted{
		MissionID: c.MissionID, TaskClass: c.TaskClass, Mode: c.Mode, Confidential: c.Confidential,
		AllowConnected: c.AllowConnected, DeclaredProvider: c.DeclaredProvider, StartsRuntime: c.StartsRuntime,
		AllowedFiles: c.AllowedFiles, AcceptanceChecks: checks, Budgets: budgets, At: in.At,
	}}}, nil
}

// StopMission stops a mission for a reason the supervisor asserts
// (cancelled, authority_refused, checks_failed, budget_exhausted). Stopping
// it again for the same reason appends nothing.
type StopMission struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// Reason is why the mission stops: one of the values its schema lists.
	Reason string `json:"reason" jsonschema:"enum=cancelled,enum=authority_refused,enum=checks_failed,enum=budget_exhausted"`
	// Detail says more, in words; empty when there is nothing to add.
	Detail string `json:"detail" jsonschema:"maxLength=4096,optional"`
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
