package aggregates

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/greffe/greffe/events"
)

// A claim's scope is structured (issue #15): it names what the claim covers
// (its subjects, the exact model tag, the cases measured, the conditions)
// and AcceptClaim refuses it when it covers more than its evidence does. A
// whole-string denylist ("general quality", "everything") judged scopes
// before; it let "general quality of GLM-4.7-Flash on every task" through,
// since no list of words can judge what a sentence covers.
//
// What each kind of evidence covers (Coverage):
//
//   - an independent passing check: the mission it ran for (subject
//     mission/<id>) and its check id (a case), on its candidate;
//   - a signed measurement: its host (subject host/<host>) and its
//     measurement id (a case), from its start to its end;
//   - an ok probe that listed the tag exactly: its provider (subject
//     provider/<name>) and that exact tag, at the time it was observed.
//
// A claim's subjects, model tag and cases must each be covered by at least
// one of its verified evidence events; its conditions are recorded for the
// reader and not judged. So a claim about a model whose evidence is one
// probe of one tag covers that provider and tag at that time, and the
// acceptance records that time (ClaimAccepted.evidence[].covers.at).

// ClaimScope is what a claim covers.
type ClaimScope struct {
	// Subjects are what the claim is about: providers, missions or hosts,
	// each of which some evidence must cover. A proposal may name none;
	// accepting it then is refused (claim_scope_missing, recorded).
	Subjects ClaimSubjects `json:"subjects"`
	// ModelTag, when set, is the exact model tag the claim is about; an ok
	// probe that listed exactly that tag must be among the evidence.
	ModelTag OptionalShortText `json:"model_tag,omitempty"`
	// Cases, when set, are the cases or inputs the claim covers: check ids
	// (of a passing check) or measurement ids (of a signed measurement).
	Cases ClaimCases `json:"cases,omitempty"`
	// Conditions are the conditions the claim was observed under, in
	// words (a repository, a load, a date); recorded, not judged.
	Conditions OptionalLongText `json:"conditions,omitempty"`
}

// ClaimSubject is one thing a claim is about.
type ClaimSubject struct {
	// Kind is provider, mission or host.
	Kind SubjectKind `json:"kind"`
	// ID is the provider's name, the mission's id or the host's name.
	ID ID `json:"id"`
}

// Claim subject kinds.
const (
	SubjectProvider = "provider"
	SubjectMission  = "mission"
	SubjectHost     = "host"
)

// SubjectKind is what a claim's subject is: a provider, a mission or a
// host.
type SubjectKind string

// Values lists the subject kinds.
func (SubjectKind) Values() []string { return []string{SubjectProvider, SubjectMission, SubjectHost} }

// ClaimSubjects are up to MaxClaimEvidence subjects of a claim, each
// listed once.
type ClaimSubjects []ClaimSubject

func (l ClaimSubjects) check(path string) error {
	if len(l) > MaxClaimEvidence {
		return invalid(path, "has %d subjects; the limit is %d", len(l), MaxClaimEvidence)
	}
	return checkStructs(path, l, "", func(s ClaimSubject) ClaimSubject { return s },
		func(s ClaimSubject) string { return string(s.Kind) + " " + string(s.ID) })
}
func (ClaimSubjects) jsonSchema() map[string]any {
	return structListSchema("ClaimSubject", 0, MaxClaimEvidence, true)
}

// Coverage is what one verified evidence event covers.
type Coverage struct {
	// Subject is the subject the evidence covers.
	Subject ClaimSubject `json:"subject"`
	// ModelTag is the exact model tag the evidence covers; empty when none.
	ModelTag string `json:"model_tag,omitempty"`
	// Case is the case (a check id or measurement id) the evidence covers;
	// empty when none.
	Case string `json:"case,omitempty"`
	// At is when what it proves was observed: a check's time, a
	// measurement's end, a probe's observation.
	At time.Time `json:"at"`
}

// CodeClaimScopeExceedsEvidence: the claim's scope names a subject, a
// model tag or a case that none of its verified evidence covers.
const CodeClaimScopeExceedsEvidence = "claim_scope_exceeds_evidence"

// uncovered returns what the scope names that no coverage covers, as
// "provider/glm", "model_tag/…", "case/c01".
func (s ClaimScope) uncovered(cov []Coverage) []string {
	var out []string
	for _, sub := range s.Subjects {
		if !slices.ContainsFunc(cov, func(c Coverage) bool { return c.Subject == sub }) {
			out = append(out, string(sub.Kind)+"/"+string(sub.ID))
		}
	}
	if s.ModelTag != "" && !slices.ContainsFunc(cov, func(c Coverage) bool { return c.ModelTag == string(s.ModelTag) }) {
		out = append(out, "model_tag/"+string(s.ModelTag))
	}
	for _, k := range s.Cases {
		if !slices.ContainsFunc(cov, func(c Coverage) bool { return c.Case == k }) {
			out = append(out, "case/"+k)
		}
	}
	return out
}

// storedScope reads a ClaimProposed's scope: a ClaimScope, or the words of
// a claim proposed before scopes were structured (legacy, judged as a
// scope that cannot be bounded).
func storedScope(raw json.RawMessage) (scope ClaimScope, legacy string, err error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return scope, "", nil
	case raw[0] == '"':
		err = events.DecodeStored(raw, &legacy)
		return scope, legacy, err
	}
	err = events.DecodeStored(raw, &scope)
	return scope, "", err
}
