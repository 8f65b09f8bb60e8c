package aggregates

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/greffe/greffe/events"
)

// Claim is the state of one claim (stream "claim-<id>"): a statement, the
// scope it is made for, and the events it rests on. A claim is accepted only
// when its scope is stated, every evidence reference resolves to a verified
// event (see ResolveEvidence), and the scope covers no more than that
// evidence does (claim_scope.go).
type Claim struct {
	ID        string
	Proposed  bool
	Statement string
	Scope     ClaimScope
	// LegacyScope is the scope in words of a claim proposed before scopes
	// were structured; such a claim is never accepted.
	LegacyScope string
	Evidence    []uuid.UUID
	Accepted    bool
	Refused     bool
	// Proposal, Acceptance and Refusal prove each fact.
	Proposal, Acceptance, Refusal EventRef
	// Events is the number of events folded.
	Events int
}

// Exists reports whether the claim stream has events.
func (c Claim) Exists() bool { return c.Events > 0 }

// Claim event types.
const (
	TypeClaimProposed = "ClaimProposed"
	TypeClaimAccepted = "ClaimAccepted"
	TypeClaimRefused  = "ClaimRefused"
)

// ClaimProposed is the data of TypeClaimProposed.
// Scope is a ClaimScope; a claim proposed before issue #15 stored its
// scope as a string, which Evolve still reads (Claim.LegacyScope).
type ClaimProposed struct {
	// ClaimID is the claim's id (its stream is claim-<id>).
	ClaimID string `json:"claim_id"`
	// Statement is what the claim says, in words.
	Statement string `json:"statement"`
	// Scope is what it covers.
	Scope ClaimScope `json:"scope"`
	// Evidence are the ids of the events the claim rests on.
	Evidence []uuid.UUID `json:"evidence"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ClaimAccepted is the data of TypeClaimAccepted: the evidence as resolved.
type ClaimAccepted struct {
	// ClaimID is the claim's id (its stream is claim-<id>).
	ClaimID string `json:"claim_id"`
	// Reviewer is who reviewed it, as the command stated it: an accountable
	// person or role, not the worker. A statement, recorded, never checked
	// against the principal: what accepts a claim is its verified evidence.
	Reviewer string `json:"reviewer"`
	// Principal is the authenticated principal that sent AcceptClaim
	// ("anonymous" on a node without tokens): who vouches for Reviewer.
	// Absent from acceptances recorded before issue #20.
	Principal string `json:"principal,omitempty"`
	// Evidence is each evidence event, resolved and verified, with what it
	// covers.
	Evidence []Evidence `json:"evidence"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ClaimRefused is the data of TypeClaimRefused.
type ClaimRefused struct {
	// ClaimID is the claim's id (its stream is claim-<id>).
	ClaimID string `json:"claim_id"`
	// Reason says why the claim was refused.
	Reason string `json:"reason"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// Evolve folds one event of the claim stream.
func (c Claim) Evolve(e *events.Event) (Claim, error) {
	switch e.Type {
	case TypeClaimProposed:
		var d struct {
			ClaimID   string          `json:"claim_id"`
			Statement string          `json:"statement"`
			Scope     json.RawMessage `json:"scope"`
			Evidence  []uuid.UUID     `json:"evidence"`
		}
		if err := decodeData(e, &d); err != nil {
			return c, err
		}
		scope, legacy, err := storedScope(d.Scope)
		if err != nil {
			return c, foldError(e, err)
		}
		c.ID, c.Proposed, c.Statement, c.Scope, c.LegacyScope, c.Evidence, c.Proposal = d.ClaimID, true, d.Statement, scope, legacy, d.Evidence, RefOf(e)
	case TypeClaimAccepted:
		var d ClaimAccepted
		if err := decodeData(e, &d); err != nil {
			return c, err
		}
		c.Accepted, c.Acceptance = true, RefOf(e)
	case TypeClaimRefused:
		var d ClaimRefused
		if err := decodeData(e, &d); err != nil {
			return c, err
		}
		c.Refused, c.Refusal = true, RefOf(e)
	default:
		return c, foldError(e, ErrUnknownEventType)
	}
	c.Events++
	return c, nil
}

// Refusal codes of the Claim gates.
const (
	// CodeClaimExists: a claim id is proposed once.
	CodeClaimExists = "claim_exists"
	// CodeClaimUnknown: no claim under this id.
	CodeClaimUnknown = "claim_unknown"
	// CodeClaimClosed: the claim was already accepted or refused the other
	// way.
	CodeClaimClosed = "claim_closed"
	// CodeClaimScopeMissing: the claim's scope names no subject.
	CodeClaimScopeMissing = "claim_scope_missing"
	// CodeClaimScopeUnbounded: the scope is words (a claim proposed before
	// scopes were structured), which cannot be judged against evidence.
	CodeClaimScopeUnbounded = "claim_scope_unbounded"
	// CodeClaimEvidenceMissing: the claim cites no evidence.
	CodeClaimEvidenceMissing = "claim_evidence_missing"
	// CodeClaimEvidenceUnresolved: an evidence reference names no recorded
	// event.
	CodeClaimEvidenceUnresolved = "claim_evidence_unresolved"
	// CodeClaimEvidenceUnverified: an evidence reference resolves to an
	// event that is not a passing independent check, a signed measurement
	// or a live probe, each signed by a registered key (what a writer
	// stated never verifies).
	CodeClaimEvidenceUnverified = "claim_evidence_unverified"
)

// ProposeClaim proposes a claim.
type ProposeClaim struct {
	// ClaimID is the claim's id (its stream is claim-<id>).
	ClaimID ID `json:"claim_id"`
	// Statement is what the claim says, in words.
	Statement LongText `json:"statement"`
	// Scope is what the claim covers; AcceptClaim judges it against the
	// evidence.
	Scope ClaimScope `json:"scope" jsonschema:"optional"`
	// Evidence are the ids of the events the claim rests on.
	Evidence EvidenceRefs `json:"evidence"`
}

// MaxClaimEvidence bounds the evidence references of one claim.
const MaxClaimEvidence = 64

// CommandName implements Command.
func (*ProposeClaim) CommandName() string { return "ProposeClaim" }

// Streams implements Command: the streams this command reads.
func (c *ProposeClaim) Streams(States) []string { return []string{ClaimStream(c.ClaimID)} }

// Decide implements Command: the gates.
func (c *ProposeClaim) Decide(in Inputs) ([]NewEvent, error) {
	if in.States.Claim(string(c.ClaimID)).Proposed {
		return nil, refuse(CodeClaimExists, map[string]any{"claim_id": c.ClaimID}, "claim %s was already proposed", c.ClaimID)
	}
	return []NewEvent{{Stream: ClaimStream(c.ClaimID), Type: TypeClaimProposed, Data: ClaimProposed{
		ClaimID: string(c.ClaimID), Statement: string(c.Statement), Scope: c.Scope, Evidence: c.Evidence, At: in.At,
	}}}, nil
}

// AcceptClaim accepts a claim whose scope is stated and whose evidence all
// verifies. It implements EvidenceCommand: the caller resolves the claim's
// references into Inputs.Evidence. Accepting it again appends nothing.
type AcceptClaim struct {
	// ClaimID is the claim's id (its stream is claim-<id>).
	ClaimID ID `json:"claim_id"`
	// Reviewer is who reviewed it, as stated: an accountable person or
	// role, not the worker. Recorded beside the authenticated principal,
	// never checked against it.
	Reviewer ShortText `json:"reviewer"`
}

// CommandName implements Command.
func (*AcceptClaim) CommandName() string { return "AcceptClaim" }

// Streams implements Command: the streams this command reads.
func (c *AcceptClaim) Streams(States) []string { return []string{ClaimStream(c.ClaimID)} }

// EvidenceRefs returns the claim's evidence references once its stream is
// loaded.
func (c *AcceptClaim) EvidenceRefs(loaded States) []uuid.UUID {
	return loaded.Claim(string(c.ClaimID)).Evidence
}

// Decide implements Command: the gates.
func (c *AcceptClaim) Decide(in Inputs) ([]NewEvent, error) {
	cl := in.States.Claim(string(c.ClaimID))
	det := map[string]any{"claim_id": c.ClaimID}
	switch {
	case !cl.Proposed:
		return nil, refuse(CodeClaimUnknown, det, "no claim %s was proposed", c.ClaimID)
	case cl.Accepted:
		return nil, nil
	case cl.Refused:
		return nil, refuse(CodeClaimClosed, det, "claim %s was refused", c.ClaimID)
	case cl.LegacyScope != "":
		det["scope"] = cl.LegacyScope
		return nil, refuse(CodeClaimScopeUnbounded, det,
			"scope %q is words, which cannot be judged against evidence: propose the claim again with a structured scope (subjects, model tag, cases)", cl.LegacyScope)
	case len(cl.Scope.Subjects) == 0:
		return nil, refuse(CodeClaimScopeMissing, det, "claim %s names no subject: say which provider, mission or host it holds for", c.ClaimID)
	case len(cl.Evidence) == 0:
		return nil, refuse(CodeClaimEvidenceMissing, det, "claim %s cites no evidence", c.ClaimID)
	}
	resolved := make([]Evidence, 0, len(cl.Evidence))
	var unresolved, unverified []string
	reasons := map[string]string{} // unverified id -> why (ResolveEvidence's reason)
	for _, id := range cl.Evidence {
		ev, ok := in.Evidence[id]
		switch {
		case !ok:
			unresolved = append(unresolved, id.String())
		case !ev.Verified || ev.EventID != id:
			unverified = append(unverified, id.String())
			reasons[id.String()] = ev.Reason
		}
		resolved = append(resolved, ev)
	}
	if len(unresolved) > 0 {
		det["unresolved"] = unresolved
		return nil, refuse(CodeClaimEvidenceUnresolved, det, "evidence %v names no recorded event", unresolved)
	}
	if len(unverified) > 0 {
		det["unverified"], det["reasons"] = unverified, reasons
		return nil, refuse(CodeClaimEvidenceUnverified, det,
			"evidence %v is not a signed passing independent check, a signed measurement or a signed live probe (details.reasons says why, for each)", unverified)
	}
	var cov []Coverage
	for _, ev := range resolved {
		cov = append(cov, ev.Covers...)
	}
	if out := cl.Scope.uncovered(cov); len(out) > 0 {
		det["uncovered"], det["covered"] = out, cov
		return nil, refuse(CodeClaimScopeExceedsEvidence, det,
			"claim %s covers more than its evidence: %s covered by none of it", c.ClaimID, strings.Join(out, ", "))
	}
	return []NewEvent{{Stream: ClaimStream(c.ClaimID), Type: TypeClaimAccepted, Data: ClaimAccepted{
		ClaimID: string(c.ClaimID), Reviewer: string(c.Reviewer), Principal: in.Principal.Name, Evidence: resolved, At: in.At,
	}}}, nil
}

// RefuseClaim refuses a claim. Refusing it again appends nothing.
type RefuseClaim struct {
	// ClaimID is the claim's id (its stream is claim-<id>).
	ClaimID ID `json:"claim_id"`
	// Reason says why the claim is refused.
	Reason LongText `json:"reason"`
}

// CommandName implements Command.
func (*RefuseClaim) CommandName() string { return "RefuseClaim" }

// Streams implements Command: the streams this command reads.
func (c *RefuseClaim) Streams(States) []string { return []string{ClaimStream(c.ClaimID)} }

// Decide implements Command: the gates.
func (c *RefuseClaim) Decide(in Inputs) ([]NewEvent, error) {
	cl := in.States.Claim(string(c.ClaimID))
	det := map[string]any{"claim_id": c.ClaimID}
	switch {
	case !cl.Proposed:
		return nil, refuse(CodeClaimUnknown, det, "no claim %s was proposed", c.ClaimID)
	case cl.Refused:
		return nil, nil
	case cl.Accepted:
		return nil, refuse(CodeClaimClosed, det, "claim %s was accepted", c.ClaimID)
	}
	return []NewEvent{{Stream: ClaimStream(c.ClaimID), Type: TypeClaimRefused, Data: ClaimRefused{
		ClaimID: string(c.ClaimID), Reason: string(c.Reason), At: in.At,
	}}}, nil
}
