package aggregates

import (
	"time"

	"github.com/greffe/greffe/events"
)

// Approval is the state of one owner's decision (stream "approval-<id>"):
// a grant of some uses of one action on one subject, until an expiry.
//
// Subjects are the stream of the aggregate the action applies to, so that
// the subject a gate expects is unambiguous:
//
//	action            subject                     spent by
//	startup           provider-<name>             StartAttempt of a mission that starts a runtime
//	activation        provider-<name>             ActivateProvider
//	activation        executor-<id>               RegisterExecutorKey
//	patch_apply       mission-<id>                IntegratePatch
//	preparation, qualification, release, network_boundary
//	                  (recorded for the record; no gate spends them yet)
//
// An action is authorized only by a grant that exists, is for that exact
// action and subject, is not revoked, not expired at the command's time and
// has a use left. A use is spent by emitting ApprovalConsumed on this
// stream in the same atomic append as the action it authorizes. Nothing
// renews a grant: running a check "offline", reproducing a command or
// reading the approval writes nothing here.
type Approval struct {
	ID       string
	Granted  bool
	Approver string
	// Principal is who sent the grant (ApprovalGranted.Principal).
	Principal  string
	Action     string
	Subject    string
	Uses       int
	Used       int
	ExpiresAt  time.Time
	GrantedAt  time.Time
	Conditions []string
	Revoked    bool
	RevokedAt  time.Time
	// Grant, LastUse and Revocation are the events that prove each fact.
	Grant, LastUse, Revocation EventRef
	// Events is the number of events folded.
	Events int
}

// Approval actions (DOMAIN.md).
const (
	ActionStartup         = "startup"
	ActionPreparation     = "preparation"
	ActionQualification   = "qualification"
	ActionActivation      = "activation"
	ActionPatchApply      = "patch_apply"
	ActionRelease         = "release"
	ActionNetworkBoundary = "network_boundary"
)

// ApprovalAction is the action an approval permits: one of the Action…
// constants.
type ApprovalAction string

// Values lists the approval actions.
func (ApprovalAction) Values() []string {
	return []string{ActionStartup, ActionPreparation, ActionQualification, ActionActivation, ActionPatchApply, ActionRelease, ActionNetworkBoundary}
}

// Approval event types.
const (
	TypeApprovalGranted  = "ApprovalGranted"
	TypeApprovalConsumed = "ApprovalConsumed"
	TypeApprovalRevoked  = "ApprovalRevoked"
)

// ApprovalGranted is the data of TypeApprovalGranted.
type ApprovalGranted struct {
	// ApprovalID is the approval's id (its stream is approval-<id>).
	ApprovalID string `json:"approval_id"`
	// Approver is who approved it, as the command stated it: the principal
	// itself (approver_mismatch refuses any other name), or, from a node
	// without tokens, what the anonymous principal stated.
	Approver string `json:"approver"`
	// Principal is the authenticated principal that granted it
	// ("anonymous" on a node without tokens); absent from grants recorded
	// before issue #20.
	Principal string `json:"principal,omitempty"`
	// Action is the action the approval permits: startup, preparation,
	// qualification, activation, patch_apply, release or network_boundary.
	Action string `json:"action"`
	// Subject is the stream the approval is for (e.g. "provider-glm",
	// "mission-m1").
	Subject string `json:"subject"`
	// Uses is how many times the approval may be spent, 1 to 1000.
	Uses int `json:"uses"`
	// ExpiresAt is when the approval stops being valid (RFC 3339).
	ExpiresAt time.Time `json:"expires_at"`
	// Conditions are conditions of the approval, in words; recorded, not
	// judged.
	Conditions []string `json:"conditions,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ApprovalConsumed is the data of TypeApprovalConsumed: one use spent by the
// command named in By, on the subject stream it acted on.
type ApprovalConsumed struct {
	// ApprovalID is the approval's id (its stream is approval-<id>).
	ApprovalID string `json:"approval_id"`
	// By is the command that spent the use (its name).
	By string `json:"by"`
	// Subject is the stream the spending command acted on.
	Subject string `json:"subject"`
	// Use is the use's number, from 1.
	Use int `json:"use"`
	// Remaining is how many uses are left.
	Remaining int `json:"remaining"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ApprovalRevoked is the data of TypeApprovalRevoked.
type ApprovalRevoked struct {
	// ApprovalID is the approval's id (its stream is approval-<id>).
	ApprovalID string `json:"approval_id"`
	// Reason says why the approval was revoked.
	Reason string `json:"reason"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// Exists reports whether the approval stream has events.
func (a Approval) Exists() bool { return a.Events > 0 }

// Remaining returns the uses left (0 when consumed or never granted).
func (a Approval) Remaining() int {
	if !a.Granted || a.Used >= a.Uses {
		return 0
	}
	return a.Uses - a.Used
}

// Approval statuses, as the approvals projection shows them.
const (
	ApprovalStatusMissing  = "missing"
	ApprovalStatusActive   = "active"
	ApprovalStatusConsumed = "consumed"
	ApprovalStatusExpired  = "expired"
	ApprovalStatusRevoked  = "revoked"
)

// Status returns the approval's status at time at; revoked wins over
// expired, which wins over consumed.
func (a Approval) Status(at time.Time) string {
	switch {
	case !a.Granted:
		return ApprovalStatusMissing
	case a.Revoked:
		return ApprovalStatusRevoked
	case !at.Before(a.ExpiresAt):
		return ApprovalStatusExpired
	case a.Remaining() == 0:
		return ApprovalStatusConsumed
	}
	return ApprovalStatusActive
}

// Evolve folds one event of the approval stream.
func (a Approval) Evolve(e *events.Event) (Approval, error) {
	switch e.Type {
	case TypeApprovalGranted:
		var d ApprovalGranted
		if err := decodeData(e, &d); err != nil {
			return a, err
		}
		a.ID, a.Granted, a.Approver, a.Principal, a.Action, a.Subject = d.ApprovalID, true, d.Approver, d.Principal, d.Action, d.Subject
		a.Uses, a.ExpiresAt, a.GrantedAt, a.Conditions = d.Uses, d.ExpiresAt, d.At, d.Conditions
		a.Grant = RefOf(e)
	case TypeApprovalConsumed:
		var d ApprovalConsumed
		if err := decodeData(e, &d); err != nil {
			return a, err
		}
		a.Used++
		a.LastUse = RefOf(e)
	case TypeApprovalRevoked:
		var d ApprovalRevoked
		if err := decodeData(e, &d); err != nil {
			return a, err
		}
		a.Revoked, a.RevokedAt = true, d.At
		a.Revocation = RefOf(e)
	default:
		return a, foldError(e, ErrUnknownEventType)
	}
	a.Events++
	return a, nil
}

// Refusal codes of the Approval gates.
const (
	// CodeApprovalExists: GrantApproval on an id already granted; a grant
	// is never renewed or widened in place.
	CodeApprovalExists = "approval_exists"
	// CodeApprovalExpiryPast: a grant whose expiry is not after its time.
	CodeApprovalExpiryPast = "approval_expiry_past"
	// CodeApprovalMissing: the action needs a grant and none exists under
	// that id (or no id was given).
	CodeApprovalMissing = "approval_missing"
	// CodeApprovalActionMismatch: the grant is for another action.
	CodeApprovalActionMismatch = "approval_action_mismatch"
	// CodeApprovalSubjectMismatch: the grant is for another subject.
	CodeApprovalSubjectMismatch = "approval_subject_mismatch"
	// CodeApprovalRevoked: the grant was revoked.
	CodeApprovalRevoked = "approval_revoked"
	// CodeApprovalExpired: the grant expired before the command's time.
	CodeApprovalExpired = "approval_expired"
	// CodeApprovalConsumed: every use of the grant is spent.
	CodeApprovalConsumed = "approval_consumed"
)

// Authorize checks that a authorizes action on subject at time at, and
// returns the ApprovalConsumed event that spends one use (to be appended
// with the action's own events), or a Refusal. by names the command.
func (a Approval) Authorize(action, subject, by string, at time.Time) (NewEvent, error) {
	det := map[string]any{"approval_id": a.ID, "action": action, "subject": subject}
	switch {
	case !a.Granted:
		return NewEvent{}, refuse(CodeApprovalMissing, det, "%s on %s needs an unexpired, unrevoked, unconsumed %s approval; none was granted under this id", by, subject, action)
	case a.Action != action:
		det["granted_action"] = a.Action
		return NewEvent{}, refuse(CodeApprovalActionMismatch, det, "approval %s grants %s, not %s", a.ID, a.Action, action)
	case a.Subject != subject:
		det["granted_subject"] = a.Subject
		return NewEvent{}, refuse(CodeApprovalSubjectMismatch, det, "approval %s is for %s, not %s", a.ID, a.Subject, subject)
	case a.Revoked:
		det["revoked_at"] = a.RevokedAt
		return NewEvent{}, refuse(CodeApprovalRevoked, det, "approval %s was revoked", a.ID)
	case !at.Before(a.ExpiresAt):
		det["expires_at"] = a.ExpiresAt
		return NewEvent{}, refuse(CodeApprovalExpired, det, "approval %s expired at %s", a.ID, a.ExpiresAt.UTC().Format(time.RFC3339))
	case a.Remaining() == 0:
		det["uses"] = a.Uses
		return NewEvent{}, refuse(CodeApprovalConsumed, det, "approval %s was granted for %d use(s), all spent; a new approval is needed", a.ID, a.Uses)
	}
	return NewEvent{Stream: ApprovalStream(a.ID), Type: TypeApprovalConsumed, Data: ApprovalConsumed{
		ApprovalID: a.ID, By: by, Subject: subject, Use: a.Used + 1, Remaining: a.Remaining() - 1, At: at,
	}}, nil
}

// GrantApproval records an owner's approval. Only an approver (or the
// admin) sends it, in its own name: Approver must be the principal's name
// (approver_mismatch), except on a node without tokens, where what the
// anonymous principal states is recorded as stated.
type GrantApproval struct {
	// ApprovalID is the approval's id (its stream is approval-<id>).
	ApprovalID ID `json:"approval_id"`
	// Approver is who approves it: the sending principal's own name.
	Approver ShortText `json:"approver"`
	// Action is the action the approval permits: one of the values its schema lists.
	Action ApprovalAction `json:"action"`
	// Subject is the stream the approval is for (e.g. "provider-glm",
	// "mission-m1").
	Subject ShortText `json:"subject"`
	// Uses is how many times the approval may be spent, 1 to 1000.
	Uses ApprovalUses `json:"uses"`
	// ExpiresAt is when the approval stops being valid (RFC 3339).
	ExpiresAt time.Time `json:"expires_at"`
	// Conditions are conditions of the approval, in words; recorded, not
	// judged.
	Conditions Conditions `json:"conditions,omitempty"`
}

// CommandName implements Command.
func (*GrantApproval) CommandName() string { return "GrantApproval" }

// Validate implements crossFieldRules: every grant expires (a time has no zero JSON Schema can refuse).
func (c *GrantApproval) Validate() error {
	if c.ExpiresAt.IsZero() {
		return invalid("expires_at", "is required: every grant expires")
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *GrantApproval) Streams(States) []string { return []string{ApprovalStream(c.ApprovalID)} }

// Decide implements Command: the gates.
func (c *GrantApproval) Decide(in Inputs) ([]NewEvent, error) {
	if err := checkApprover(in.Principal, string(c.Approver)); err != nil {
		return nil, err
	}
	a := in.States.Approval(string(c.ApprovalID))
	if a.Granted {
		return nil, refuse(CodeApprovalExists, map[string]any{"approval_id": c.ApprovalID},
			"approval %s was already granted; grants are never renewed in place, grant a new id", c.ApprovalID)
	}
	if !c.ExpiresAt.After(in.At) {
		return nil, refuse(CodeApprovalExpiryPast, map[string]any{"expires_at": c.ExpiresAt, "at": in.At},
			"the grant would expire at %s, not after its own time", c.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return []NewEvent{{Stream: ApprovalStream(c.ApprovalID), Type: TypeApprovalGranted, Data: ApprovalGranted{
		ApprovalID: string(c.ApprovalID), Approver: string(c.Approver), Principal: in.Principal.Name, Action: string(c.Action), Subject: string(c.Subject),
		Uses: int(c.Uses), ExpiresAt: c.ExpiresAt.UTC(), Conditions: c.Conditions, At: in.At,
	}}}, nil
}

// RevokeApproval revokes a grant. Revoking twice appends nothing.
type RevokeApproval struct {
	// ApprovalID is the approval's id (its stream is approval-<id>).
	ApprovalID ID `json:"approval_id"`
	// Reason says why the approval is revoked.
	Reason LongText `json:"reason"`
}

// CommandName implements Command.
func (*RevokeApproval) CommandName() string { return "RevokeApproval" }

// Streams implements Command: the streams this command reads.
func (c *RevokeApproval) Streams(States) []string { return []string{ApprovalStream(c.ApprovalID)} }

// Decide implements Command: the gates.
func (c *RevokeApproval) Decide(in Inputs) ([]NewEvent, error) {
	a := in.States.Approval(string(c.ApprovalID))
	if !a.Granted {
		return nil, refuse(CodeApprovalMissing, map[string]any{"approval_id": c.ApprovalID}, "approval %s was never granted", c.ApprovalID)
	}
	if a.Revoked {
		return nil, nil
	}
	return []NewEvent{{Stream: ApprovalStream(c.ApprovalID), Type: TypeApprovalRevoked, Data: ApprovalRevoked{
		ApprovalID: string(c.ApprovalID), Reason: string(c.Reason), At: in.At,
	}}}, nil
}
