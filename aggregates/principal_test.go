package aggregates

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// TestMaySend: the catalogue's one rule of who sends what. Every command
// names its roles; the approvals are an approver's, the executor's
// commands an executor's, the rest a writer's; the admin sends all; a
// reader or an operator sends none.
func TestMaySend(t *testing.T) {
	// RevokeExecutorKey is an approver's too (issue #20): a revocation
	// disables an executor, and a writer could revoke every one.
	approvals := []string{"GrantApproval", "RevokeApproval", "ApproveProbeSchedule", "EndProbeSchedule", "ApproveMeasurement", "RevokeExecutorKey"}
	executors := []string{"ClaimMeasurement", "RenewMeasurementLease", "RecordMeasurement", "RequestScheduledProbe"}
	for _, name := range CommandNames() {
		want := RoleWriter
		switch {
		case contains(approvals, name):
			want = RoleApprover
		case contains(executors, name):
			want = RoleExecutor
		}
		got := map[string]bool{}
		for _, r := range []string{RoleReader, RoleWriter, RoleApprover, RoleOperator, RoleExecutor, RoleAdmin, ""} {
			got[r] = MaySend(r, name)
		}
		if diff := cmp.Diff(map[string]bool{RoleReader: false, RoleWriter: want == RoleWriter, RoleApprover: want == RoleApprover,
			RoleOperator: false, RoleExecutor: want == RoleExecutor, RoleAdmin: true, "": false}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff([]string{RoleAdmin, want}, CommandRoles(name)); diff != "" {
			t.Errorf("CommandRoles(%s) (-want +got):\n%s", name, diff)
		}
	}
	if MaySend(RoleAdmin, "GrantEverything") || CommandRoles("GrantEverything") != nil {
		t.Error("an unknown command is sent by a role")
	}
	if diff := cmp.Diff([]string{RoleAdmin, RoleWriter, RoleApprover, RoleExecutor}, SenderRoles()); diff != "" {
		t.Errorf("SenderRoles (-want +got):\n%s", diff)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestDecide_RoleNotAllowed: a role the catalogue does not let send a
// command is refused before any gate, whatever the state; the zero
// principal sends nothing.
func TestDecide_RoleNotAllowed(t *testing.T) {
	runGWT(t, []gwt{
		{name: "a writer grants", given: []step{as(alice)}, when: &GrantApproval{ApprovalID: "a1", Approver: "alice", Action: ActionStartup,
			Subject: "provider-x", Uses: 1, ExpiresAt: t0.Add(time.Hour)}, code: CodeRoleNotAllowed},
		{name: "an approver declares a provider", given: []step{as(carol)}, when: declare(glm, KindLocal, "local_ollama", glmTag), code: CodeRoleNotAllowed},
		{name: "an executor declares a provider", given: []step{as(gpu1Principal)}, when: declare(glm, KindLocal, "local_ollama", glmTag), code: CodeRoleNotAllowed},
		{name: "a writer claims a measurement", given: []step{registered(gpu1, 1), requestProbe("x"), as(alice)}, when: claim("x", gpu1), code: CodeRoleNotAllowed},
		{name: "a reader", given: []step{as(Principal{Name: "audit", Role: RoleReader})}, when: declare(glm, KindLocal, "local_ollama", glmTag), code: CodeRoleNotAllowed},
		{name: "no principal", given: []step{as(Principal{})}, when: declare(glm, KindLocal, "local_ollama", glmTag), code: CodeRoleNotAllowed},
		{name: "a writer declares a provider", given: []step{as(alice)}, when: declare(glm, KindLocal, "local_ollama", glmTag),
			wantFn: func(l *ledger) []NewEvent {
				d := declare(glm, KindLocal, "local_ollama", glmTag)
				return []NewEvent{{Stream: "provider-glm-local", Type: TypeProviderDeclared, Data: ProviderDeclared{Name: glm, Kind: KindLocal, Profile: "local_ollama",
					Endpoint: string(d.Endpoint), ModelTag: glmTag, Capabilities: d.Capabilities, TaskClasses: d.TaskClasses, At: t0}}}
			}},
	})
}

// TestApproveMeasurement_Decide: an approver approves one exact request,
// once, before any claim; the approver is the principal.
func TestApproveMeasurement_Decide(t *testing.T) {
	approve := &ApproveMeasurement{MeasurementID: "x"}
	base := []step{registered(gpu1, 1), requestProbe("x")}
	runGWT(t, []gwt{
		{name: "approve", given: []step{base, as(carol)}, when: approve,
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementApproved, Data: MeasurementApproved{MeasurementID: "x", Host: host, Approver: "carol", At: t0}}}},
		{name: "approve on a node without tokens", given: base, when: approve,
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementApproved, Data: MeasurementApproved{MeasurementID: "x", Host: host, Approver: AnonymousName, At: t0}}}},
		{name: "approve an unknown request", given: []step{as(carol)}, when: approve, code: CodeMeasurementUnknown},
		{name: "approve twice", given: []step{base, as(carol), approve}, when: approve, code: CodeMeasurementAlreadyApproved},
		{name: "approve a claimed request", given: []step{base, claim("x", gpu1), as(carol)}, when: approve, code: CodeMeasurementAlreadyClaimed},
		{name: "approve a recorded request", given: []step{base, claim("x", gpu1), signed(resources("x"), 1), as(carol)}, when: approve, code: CodeMeasurementAlreadyClaimed},
		{name: "a writer approves", given: []step{base, as(alice)}, when: approve, code: CodeRoleNotAllowed},
		{name: "an executor approves", given: []step{base, as(gpu1Principal)}, when: approve, code: CodeRoleNotAllowed},
	})
	l := newLedger(t)
	l.given(base, as(carol), approve)
	m := l.state(MeasurementStream("x")).(Measurement)
	if !m.Approved || m.ApprovedBy != "carol" || m.ApprovalRef != l.last(TypeMeasurementApproved) || m.Status() != MeasurementStatusRequested {
		t.Errorf("the approved request: %+v", m)
	}
}

// TestExecutorPrincipal_Decide: an executor principal acts only for its
// own executor id; the admin (and a node without tokens) for any.
func TestExecutorPrincipal_Decide(t *testing.T) {
	base := []step{registered(gpu1, 1), registered("gpu2", 2), requestProbe("x")}
	claimed := []step{base, claim("x", gpu1)}
	renew := &RenewMeasurementLease{MeasurementID: "x", ExecutorID: gpu1, LeaseUntil: t0.Add(70 * time.Second)}
	runGWT(t, []gwt{
		{name: "claim in another executor's name", given: []step{base, as(gpu2Principal)}, when: claim("x", gpu1), code: CodeExecutorPrincipalMismatch},
		{name: "claim in its own name", given: []step{base, as(gpu1Principal)}, when: claim("x", gpu1),
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementClaimed, Data: MeasurementClaimed{MeasurementID: "x", ExecutorID: gpu1, LeaseUntil: t0.Add(time.Minute), At: t0}}}},
		{name: "the admin claims in an executor's name", given: []step{base, as(Principal{Name: "root", Role: RoleAdmin})}, when: claim("x", gpu1),
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementClaimed, Data: MeasurementClaimed{MeasurementID: "x", ExecutorID: gpu1, LeaseUntil: t0.Add(time.Minute), At: t0}}}},
		{name: "renew in another executor's name", given: []step{claimed, as(gpu2Principal)}, when: renew, code: CodeExecutorPrincipalMismatch},
		{name: "renew in its own name", given: []step{claimed, as(gpu1Principal)}, when: renew,
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementLeaseRenewed, Data: MeasurementLeaseRenewed{MeasurementID: "x", ExecutorID: gpu1, LeaseUntil: t0.Add(70 * time.Second), At: t0}}}},
		{name: "record in another executor's name", given: []step{claimed, as(gpu2Principal)}, when: signed(resources("x"), 1), code: CodeExecutorPrincipalMismatch},
		{name: "record in its own name", given: []step{claimed, as(gpu1Principal)}, when: signed(resources("x"), 1),
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementRecorded,
				Data: json.RawMessage(signed(resources("x"), 1).Payload), Envelope: &signed(resources("x"), 1).Envelope}}},
	})
}

// TestKeyRoles: a key signs only the facts of its role: a check runner's
// key claims and signs no measurement, an executor's signs no check.
func TestKeyRoles(t *testing.T) {
	asRunner := func(id string) []step { // executorKey(1) registered as a check runner
		return []step{grant("reg-"+id, ActionActivation, ExecutorStream(id), 1),
			&RegisterExecutorKey{ExecutorID: ID(id), Host: host, PublicKey: pubOf(executorKey(1)), ApprovalID: OptionalID("reg-" + id), Role: KeyRoleCheckRunner}}
	}
	byGPU1 := check(m1, "v1", "c01", CheckPass)
	byGPU1.RunnerID = gpu1
	runGWT(t, []gwt{
		{name: "a check runner claims a measurement", given: []step{asRunner(gpu1), requestProbe("x")}, when: claim("x", gpu1), code: CodeExecutorKeyUnknown},
		{name: "an executor's key signs a check", given: []step{started(m1, 2), candidate(m1, "v1"), registered(gpu1, 1)},
			when: &runnerCheck{CheckRun: byGPU1.CheckRun, Seed: 1}, code: CodeExecutorKeyUnknown},
		{name: "a check runner's registration records its role", given: asRunner("ci-2")[:1],
			when: asRunner("ci-2")[1].(*RegisterExecutorKey),
			wantFn: func(l *ledger) []NewEvent {
				return []NewEvent{
					{Stream: "executor-ci-2", Type: events.TypeExecutorKeyRegistered, Data: events.KeyRegisteredData{ExecutorID: "ci-2", Host: host,
						KeyID: keyIDOf(1), PublicKey: pubOf(executorKey(1)), ApprovalID: "reg-ci-2", Role: KeyRoleCheckRunner}},
					{Stream: "approval-reg-ci-2", Type: TypeApprovalConsumed, Data: ApprovalConsumed{ApprovalID: "reg-ci-2", By: "RegisterExecutorKey",
						Subject: "executor-ci-2", Use: 1, Remaining: 0, At: t0}},
				}
			}},
	})
	// The executor's key signing a check: the signature names a key the
	// runner id has, but not as a check runner.
	l := newLedger(t)
	l.given(asRunner("ci-2")...)
	x := l.state(ExecutorStream("ci-2")).(Executor)
	if _, _, ok := x.Lookup(keyIDOf(1)); ok || len(x.ActiveKeys(KeyRoleExecutor)) != 0 {
		t.Error("a check runner's key verifies a measurement")
	}
	if _, _, ok := x.RunnerLookup(keyIDOf(1)); !ok || len(x.ActiveKeys(KeyRoleCheckRunner)) != 1 {
		t.Error("a check runner's key does not verify its checks")
	}
}

// TestSignedCheck_Decide: the gates of a check runner's signed run, before
// RecordCheck's own.
func TestSignedCheck_Decide(t *testing.T) {
	given := []step{started(m1, 2), candidate(m1, "v1")}
	unsigned := check(m1, "v1", "c01", CheckPass).signed()
	unsigned.Envelope.Signatures = nil
	otherType := check(m1, "v1", "c01", CheckPass).signed()
	otherType.Envelope.PayloadType = MeasurementPayloadType
	tampered := check(m1, "v1", "c01", CheckPass).signed()
	tampered.Envelope.Signatures[0].Sig[0] ^= 0xff
	forOther := check("m2", "v1", "c01", CheckPass).signed()
	forOther.MissionID = m1
	byAnother := check(m1, "v1", "c01", CheckPass)
	byAnother.RunnerID = "ci-2"
	runGWT(t, []gwt{
		{name: "no signature", given: given, when: unsigned, code: CodeSignatureInvalid},
		{name: "a measurement's payload type", given: given, when: otherType, code: CodeSignatureInvalid},
		{name: "a signature that does not verify", given: given, when: tampered, code: CodeSignatureInvalid},
		{name: "a run signed for another mission", given: given, when: forOther, code: CodeResultNotForRequest},
		{name: "a runner without a key", given: given, when: byAnother, code: CodeExecutorKeyUnknown},
		{name: "a revoked runner key", given: []step{given, &RevokeExecutorKey{ExecutorID: runner, KeyID: ShortText(keyIDOf(runnerSeed)), Reason: "r"}},
			when: check(m1, "v1", "c01", CheckPass), code: CodeExecutorKeyRevoked},
		{name: "a signed pass with exit code 1", given: given, when: func() *runnerCheck {
			c := check(m1, "v1", "c01", CheckPass)
			c.ExitCode = 1
			return c
		}(), code: CodeCheckOutcomeIncoherent},
	})
	// What counts: the signed pass completes verification, the stated
	// one does not.
	l := newLedger(t)
	l.given(given...)
	l.given(statedCheck(m1, "v1", "c01", CheckPass), statedCheck(m1, "v1", "c02", CheckPass))
	m := l.state(MissionStream(m1)).(Mission)
	if v := m.Verification(hexOf("v1")); v.Complete || m.Candidates[0].StatedRuns != 2 {
		t.Fatalf("after two stated passes: %+v, %d stated runs", v, m.Candidates[0].StatedRuns)
	}
	l.given(checks(m1, "v1", 2, 2)...)
	if v := l.state(MissionStream(m1)).(Mission).Verification(hexOf("v1")); !v.Passed {
		t.Fatalf("after two signed passes: %+v", v)
	}
}

// TestRevokeExecutorKey_Roles: revoking a key disables an executor (or
// every check a runner signs), so it is an approver's command (issue #20):
// a writer that could revoke could stop every GPU host at once.
func TestRevokeExecutorKey_Roles(t *testing.T) {
	revoke := &RevokeExecutorKey{ExecutorID: gpu1, KeyID: ShortText(keyIDOf(1)), Reason: "the host was reinstalled"}
	revoked := []NewEvent{{Stream: "executor-gpu1", Type: events.TypeExecutorKeyRevoked, Data: events.KeyRevokedData{
		ExecutorID: gpu1, KeyID: keyIDOf(1), Reason: "the host was reinstalled"}}}
	runGWT(t, []gwt{
		{name: "a writer revokes an executor's key", given: []step{registered(gpu1, 1), as(alice)}, when: revoke, code: CodeRoleNotAllowed},
		{name: "an executor revokes its own key", given: []step{registered(gpu1, 1), as(gpu1Principal)}, when: revoke, code: CodeRoleNotAllowed},
		{name: "an approver revokes it", given: []step{registered(gpu1, 1), as(carol)}, when: revoke, want: revoked},
		{name: "the admin revokes it", given: []step{registered(gpu1, 1), as(Principal{Name: "root", Role: RoleAdmin})}, when: revoke, want: revoked},
	})
}

// TestPrincipals_StatedNamesBesideThePrincipal: a reviewer, a verifier, an
// observer or a runner a command names is a statement: it is recorded as
// stated, beside the authenticated principal that sent it (issue #20),
// never checked against it, and it authorizes nothing.
func TestPrincipals_StatedNamesBesideThePrincipal(t *testing.T) {
	arts := artifacts()
	review := accept(m1, "v1", 2)
	review.Reviewer = "the-release-board"
	bound := propose("b1", "qwen", "qwen3.8:27b", arts)
	runGWT(t, []gwt{
		{name: "a review", given: []step{started(m1, 2), candidate(m1, "v1"), checks(m1, "v1", 2, 2), as(alice)}, when: review,
			want: []NewEvent{{Stream: "mission-m1", Type: TypeReviewRecorded, Data: ReviewRecorded{MissionID: m1, CandidateHash: hexOf("v1"),
				Verdict: VerdictAccepted, Reviewer: "the-release-board", Principal: "alice", Coverage: fullCoverage(2), At: t0}}}},
		{name: "a binding's verification", given: []step{bound, signedHashes("b1", arts), as(alice)},
			when: &VerifyBinding{BindingID: "b1", VerifiedBy: "supervisor-1"},
			want: []NewEvent{{Stream: "binding-b1", Type: TypeBindingVerified, Data: BindingVerified{BindingID: "b1", Identity: string(bound.Identity),
				VerifiedBy: "supervisor-1", Principal: "alice", At: t0}}}},
		{name: "a stated hash", given: []step{bound, as(alice)}, when: hashArtifact("b1", arts[0], VerifierSupervisor),
			want: []NewEvent{{Stream: "binding-b1", Type: TypeArtifactHashed, Data: ArtifactHashed{BindingID: "b1", Path: string(arts[0].Path), Size: int64(arts[0].Size),
				MtimeNS: hashMtime, SHA256: string(arts[0].SHA256), Role: string(arts[0].Role), VerifiedBy: "supervisor-1", Principal: "alice",
				VerifierRole: VerifierSupervisor, Stated: true, At: t0}}}},
		{name: "a stated probe", given: []step{declare(glm, KindLocal, "local_ollama", glmTag), as(alice)}, when: probe(glm, ProbeModels, ProbeOK, glmTag),
			want: []NewEvent{{Stream: "provider-glm-local", Type: TypeProbeRecorded, Data: ProbeRecorded{Provider: glm, Kind: ProbeModels, Outcome: ProbeOK,
				Models: []string{glmTag}, Latency: D(40 * time.Millisecond), ObservedBy: "supervisor", Principal: "alice", ObservedAt: t0,
				ExpectedTag: glmTag, ExactTagListed: true, Stated: true, At: t0}}}},
		{name: "a stated check", given: []step{started(m1, 2), candidate(m1, "v1"), as(alice)}, when: statedCheck(m1, "v1", "c01", CheckPass),
			want: []NewEvent{{Stream: "mission-m1", Type: TypeCheckRecorded, Data: CheckRecorded{MissionID: m1, CandidateHash: hexOf("v1"), CheckID: "c01",
				ArgvHash: events.ArgvHash([]string{"bash", "tests/run_case.sh", "c01"}), Outcome: CheckPass, Runner: "elora-supervisor", Principal: "alice",
				RunnerKind: RunnerIndependent, Duration: D(2 * time.Second), OutputBytes: 512, Stated: true, At: t0}}}},
	})

	// A claim's acceptance: the stated reviewer beside the principal.
	l, ids := evidenceHistory(t)
	l.given(&ProposeClaim{ClaimID: "k1", Statement: "c01 passes", Scope: ClaimScope{Subjects: []ClaimSubject{{Kind: SubjectMission, ID: m1}}, Cases: []string{"c01"}},
		Evidence: []uuid.UUID{ids["pass"]}}, as(alice))
	got, err := l.decide(&AcceptClaim{ClaimID: "k1", Reviewer: "auditor"})
	if err != nil || len(got) != 1 {
		t.Fatalf("accept: %v %v", got, err)
	}
	if d := got[0].Data.(ClaimAccepted); d.Reviewer != "auditor" || d.Principal != "alice" {
		t.Errorf("ClaimAccepted reviewer %q principal %q; want auditor beside alice", d.Reviewer, d.Principal)
	}
}
