package aggregates

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

// evidenceHistory records one of each kind of evidence and returns the
// ledger with the ids of: an independent pass (signed by the check
// runner), a fail, a worker's own pass, a pass a writer stated as
// independent, a signed measurement, a signed measurement its host's
// policy refused, an ok probe (the executor's, signed)
// listing the tag exactly, a probe listing an alias only, the same ok
// probe as a writer stated it, and an event that is no evidence.
func evidenceHistory(t *testing.T) (*ledger, map[string]uuid.UUID) {
	l := newLedger(t)
	l.given(started(m1, 2)...)
	l.given(candidate(m1, "v1"))
	ids := map[string]uuid.UUID{}
	rec := func(name string, s step) {
		l.given(s)
		ids[name] = l.log[len(l.log)-1].ID
	}
	rec("pass", check(m1, "v1", "c01", CheckPass))
	rec("fail", check(m1, "v1", "c02", CheckFail))
	worker := statedCheck(m1, "v1", "c02", CheckPass)
	worker.RunnerKind = RunnerWorker
	rec("worker", worker)
	rec("stated-pass", statedCheck(m1, "v1", "c01", CheckPass))
	l.given(registered(gpu1, 1)...)
	l.given(requestProbe("x"), claim("x", gpu1))
	rec("measurement", signed(resources("x"), 1))
	// A signed refusal of the executor's host policy (issue #20): signed,
	// and of nothing measured.
	refused := resources("refused")
	refused.Outcome, refused.ExitCode, refused.Error = ResultRefusedByHost, -1, "run_not_allowed: … (host policy: runs)"
	l.given(requestProbe("refused"), claim("refused", gpu1))
	rec("refused", signed(refused, 1))
	rec("probe", signedProbe(glm, ProbeSmoke, ProbeOK, glmTag))
	rec("alias", signedProbe(glm, ProbeModels, ProbeOK, "glm-4.7-flash"))
	rec("stated-probe", probe(glm, ProbeSmoke, ProbeOK, glmTag))
	ids["other"] = l.log[0].ID // ProviderDeclared
	return l, ids
}

func TestClaim_Decide(t *testing.T) {
	propose := func(scope ClaimScope, evidence ...string) func(map[string]uuid.UUID) *ProposeClaim {
		return func(ids map[string]uuid.UUID) *ProposeClaim {
			var ev []uuid.UUID
			for _, e := range evidence {
				id, ok := ids[e]
				if !ok {
					id = uuid.NewSHA1(uuid.Nil, []byte(e))
				}
				ev = append(ev, id)
			}
			return &ProposeClaim{ClaimID: "k1", Statement: "GLM-4.7-Flash wrote a script that passes c01", Scope: scope, Evidence: ev}
		}
	}
	acceptK1 := &AcceptClaim{ClaimID: "k1", Reviewer: "auditor"}
	mission := func(cases ...string) ClaimScope {
		return ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectMission, ID: m1}}, Cases: cases}
	}
	thisCase := mission("c01")
	// What one probe of one tag covers: that provider and that tag.
	probeScope := ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectProvider, ID: glm}}, ModelTag: glmTag}
	cases := []struct {
		name   string
		claim  func(map[string]uuid.UUID) *ProposeClaim
		before []step
		when   Command
		code   string
	}{
		{name: "unknown claim", when: acceptK1, code: CodeClaimUnknown},
		{name: "no scope stated", claim: propose(ClaimScope{Conditions: "this throwaway repo"}, "pass"), when: acceptK1, code: CodeClaimScopeMissing},
		{name: "a scope in words from before structured scopes", before: []step{NewEvent{Stream: "claim-k1", Type: TypeClaimProposed,
			Data: map[string]any{"claim_id": "k1", "statement": "s", "scope": "qualité générale du modèle", "evidence": []string{"00000000-0000-4000-8000-000000000001"}, "at": t0}}},
			when: acceptK1, code: CodeClaimScopeUnbounded},
		{name: "no evidence", claim: propose(thisCase), when: acceptK1, code: CodeClaimEvidenceMissing},
		// The scope covers more than its evidence (issue #15): "general
		// quality of GLM-4.7-Flash on every task" on one check.
		{name: "a provider no evidence covers", claim: propose(ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectMission, ID: m1}, {Kind: SubjectProvider, ID: glm}}}, "pass"),
			when: acceptK1, code: CodeClaimScopeExceedsEvidence},
		{name: "a case no evidence covers", claim: propose(mission("c01", "c02"), "pass"), when: acceptK1, code: CodeClaimScopeExceedsEvidence},
		{name: "a model tag no probe listed", claim: propose(ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectMission, ID: m1}}, ModelTag: glmTag}, "pass"),
			when: acceptK1, code: CodeClaimScopeExceedsEvidence},
		{name: "another tag than the probe's", claim: propose(ClaimScope{Subjects: probeScope.Subjects, ModelTag: "glm-4.7-flash"}, "probe"),
			when: acceptK1, code: CodeClaimScopeExceedsEvidence},
		{name: "a host no measurement ran on", claim: propose(ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectHost, ID: "spark-9"}}}, "measurement"),
			when: acceptK1, code: CodeClaimScopeExceedsEvidence},
		{name: "one probe of one tag covers that provider and tag", claim: propose(probeScope, "probe"), before: []step{acceptK1}, when: acceptK1},
		{name: "evidence that names no event", claim: propose(thisCase, "pass", "nowhere"), when: acceptK1, code: CodeClaimEvidenceUnresolved},
		{name: "a failing check is no evidence", claim: propose(thisCase, "pass", "fail"), when: acceptK1, code: CodeClaimEvidenceUnverified},
		{name: "the worker's own pass is no evidence", claim: propose(thisCase, "worker"), when: acceptK1, code: CodeClaimEvidenceUnverified},
		{name: "an alias probe is no evidence", claim: propose(thisCase, "alias"), when: acceptK1, code: CodeClaimEvidenceUnverified},
		// Issue #20: what a writer states is recorded, and proves nothing.
		{name: "a pass a writer stated as independent is no evidence", claim: propose(thisCase, "stated-pass"), when: acceptK1, code: CodeClaimEvidenceUnverified},
		{name: "a probe a writer stated is no evidence", claim: propose(probeScope, "stated-probe"), when: acceptK1, code: CodeClaimEvidenceUnverified},
		{name: "a declaration is no evidence", claim: propose(thisCase, "other"), when: acceptK1, code: CodeClaimEvidenceUnverified},
		{name: "a measurement its host refused is no evidence", claim: propose(ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectHost, ID: host}}}, "refused"),
			when: acceptK1, code: CodeClaimEvidenceUnverified},
		{name: "a measurement whose key was revoked since", claim: propose(thisCase, "measurement"),
			before: []step{&RevokeExecutorKey{ExecutorID: gpu1, KeyID: ShortText(keyIDOf(1)), Reason: "compromised"}}, when: acceptK1, code: CodeClaimEvidenceUnverified},
		{name: "accepted after being refused", claim: propose(thisCase, "pass"), before: []step{&RefuseClaim{ClaimID: "k1", Reason: "r"}}, when: acceptK1, code: CodeClaimClosed},
		{name: "refused after being accepted", claim: propose(thisCase, "pass"), before: []step{acceptK1}, when: &RefuseClaim{ClaimID: "k1", Reason: "r"}, code: CodeClaimClosed},
		{name: "refuse an unknown claim", when: &RefuseClaim{ClaimID: "k1", Reason: "r"}, code: CodeClaimUnknown},
		{name: "accepted twice appends nothing", claim: propose(thisCase, "pass"), before: []step{acceptK1}, when: acceptK1},
		{name: "refused twice appends nothing", claim: propose(thisCase, "pass"), before: []step{&RefuseClaim{ClaimID: "k1", Reason: "r"}}, when: &RefuseClaim{ClaimID: "k1", Reason: "r"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, ids := evidenceHistory(t)
			if tc.claim != nil {
				l.given(tc.claim(ids))
			}
			l.given(tc.before...)
			got, err := l.decide(tc.when)
			if tc.code != "" {
				assertCode(t, err, tc.code)
				return
			}
			if err != nil || got != nil {
				t.Fatalf("got %v, %v; want no events", got, err)
			}
		})
	}

	t.Run("propose", func(t *testing.T) {
		l, ids := evidenceHistory(t)
		c := propose(thisCase, "pass")(ids)
		got, err := l.decide(c)
		if err != nil {
			t.Fatal(err)
		}
		want := []NewEvent{{Stream: "claim-k1", Type: TypeClaimProposed, Data: ClaimProposed{ClaimID: "k1", Statement: string(c.Statement), Scope: thisCase, Evidence: []uuid.UUID{ids["pass"]}, At: t0}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		l.given(c)
		_, err = l.decide(c)
		assertCode(t, err, CodeClaimExists)
	})

	// The refusal says why each reference does not verify: a host's
	// refusal, not a bad signature.
	t.Run("a refused measurement's reason", func(t *testing.T) {
		l, ids := evidenceHistory(t)
		l.given(propose(ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectHost, ID: host}}}, "measurement", "refused")(ids))
		_, err := l.decide(acceptK1)
		assertCode(t, err, CodeClaimEvidenceUnverified)
		var r *Refusal
		errors.As(err, &r)
		want := map[string]string{ids["refused"].String(): "the measurement was refused by its host's policy (refused_by_host): nothing was measured"}
		if diff := cmp.Diff(want, r.Details["reasons"]); diff != "" {
			t.Errorf("details.reasons (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{ids["refused"].String()}, r.Details["unverified"]); diff != "" {
			t.Errorf("details.unverified (-want +got):\n%s", diff)
		}
	})

	t.Run("accepted on a pass, a signed measurement and a live probe", func(t *testing.T) {
		l, ids := evidenceHistory(t)
		l.given(propose(ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectMission, ID: m1}, {Kind: SubjectHost, ID: host}, {Kind: SubjectProvider, ID: glm}},
			ModelTag: glmTag, Cases: []string{"c01", "x"}, Conditions: "this throwaway repo, this run"}, "pass", "measurement", "probe")(ids))
		got, err := l.decide(acceptK1)
		if err != nil {
			t.Fatal(err)
		}
		refOf := func(id uuid.UUID) EventRef {
			e, _ := l.byID(id)
			return RefOf(&e)
		}
		want := []NewEvent{{Stream: "claim-k1", Type: TypeClaimAccepted, Data: ClaimAccepted{ClaimID: "k1", Reviewer: "auditor", Principal: AnonymousName, At: t0, Evidence: []Evidence{
			{EventID: ids["pass"], Ref: refOf(ids["pass"]), Kind: EvidenceCheck, Verified: true, Reason: "independent pass of check c01 on candidate " + hexOf("v1"),
				Covers: []Coverage{{Subject: ClaimSubject{Kind: SubjectMission, ID: m1}, Case: "c01", At: t0}}},
			{EventID: ids["measurement"], Ref: refOf(ids["measurement"]), Kind: EvidenceMeasurement, Verified: true, Reason: "signed measurement",
				Covers: []Coverage{{Subject: ClaimSubject{Kind: SubjectHost, ID: host}, Case: "x", At: t0}}},
			{EventID: ids["probe"], Ref: refOf(ids["probe"]), Kind: EvidenceProbe, Verified: true, Reason: "smoke probe listed " + glmTag + " exactly",
				Covers: []Coverage{{Subject: ClaimSubject{Kind: SubjectProvider, ID: glm}, ModelTag: glmTag, At: t0}}},
		}}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}
