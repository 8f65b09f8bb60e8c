package aggregates

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestApproval_Decide(t *testing.T) {
	exp := t0.Add(30 * 24 * time.Hour)
	runGWT(t, []gwt{
		{
			name: "grant",
			when: grant("a1", ActionPatchApply, MissionStream("m1"), 1),
			want: []NewEvent{{Stream: "approval-a1", Type: TypeApprovalGranted, Data: ApprovalGranted{
				ApprovalID: "a1", Approver: "owner", Principal: AnonymousName, Action: ActionPatchApply, Subject: "mission-m1", Uses: 1, ExpiresAt: exp, At: t0,
			}}},
		},
		{
			// A node without tokens records what the anonymous principal
			// states; an authenticated approver grants in its own name.
			name:  "an approver grants in its own name",
			given: []step{as(carol)},
			when:  &GrantApproval{ApprovalID: "a1", Approver: "carol", Action: ActionPatchApply, Subject: "mission-m1", Uses: 1, ExpiresAt: exp},
			want: []NewEvent{{Stream: "approval-a1", Type: TypeApprovalGranted, Data: ApprovalGranted{
				ApprovalID: "a1", Approver: "carol", Principal: "carol", Action: ActionPatchApply, Subject: "mission-m1", Uses: 1, ExpiresAt: exp, At: t0,
			}}},
		},
		{
			name:  "an approver grants in another's name",
			given: []step{as(carol)},
			when:  grant("a1", ActionPatchApply, MissionStream("m1"), 1),
			code:  CodeApproverMismatch,
		},
		{
			name:  "the admin grants in another's name",
			given: []step{as(Principal{Name: "root", Role: RoleAdmin})},
			when:  grant("a1", ActionPatchApply, MissionStream("m1"), 1),
			code:  CodeApproverMismatch,
		},
		{
			name:  "a writer grants",
			given: []step{as(alice)},
			when:  &GrantApproval{ApprovalID: "a1", Approver: "alice", Action: ActionPatchApply, Subject: "mission-m1", Uses: 1, ExpiresAt: exp},
			code:  CodeRoleNotAllowed,
		},
		{
			name:  "a writer revokes",
			given: []step{grant("a1", ActionStartup, "provider-x", 1), as(alice)},
			when:  &RevokeApproval{ApprovalID: "a1", Reason: "r"},
			code:  CodeRoleNotAllowed,
		},
		{
			name:  "grant twice is never a renewal",
			given: []step{grant("a1", ActionPatchApply, MissionStream("m1"), 1)},
			when:  grant("a1", ActionPatchApply, MissionStream("m1"), 2),
			code:  CodeApprovalExists,
		},
		{
			name: "grant already expired",
			when: &GrantApproval{ApprovalID: "a1", Approver: "owner", Action: ActionStartup, Subject: "provider-x", Uses: 1, ExpiresAt: t0},
			code: CodeApprovalExpiryPast,
		},
		{
			name:  "revoke",
			given: []step{grant("a1", ActionStartup, "provider-x", 1)},
			when:  &RevokeApproval{ApprovalID: "a1", Reason: "owner changed their mind"},
			want: []NewEvent{{Stream: "approval-a1", Type: TypeApprovalRevoked, Data: ApprovalRevoked{
				ApprovalID: "a1", Reason: "owner changed their mind", At: t0}}},
		},
		{
			name:  "revoke twice appends nothing",
			given: []step{grant("a1", ActionStartup, "provider-x", 1), &RevokeApproval{ApprovalID: "a1", Reason: "r"}},
			when:  &RevokeApproval{ApprovalID: "a1", Reason: "r"},
			want:  nil,
		},
		{
			name: "revoke what was never granted",
			when: &RevokeApproval{ApprovalID: "nope", Reason: "r"},
			code: CodeApprovalMissing,
		},
	})
}

// TestApproval_Authorize shows every approval gate: each refusal, then the
// consumption that a valid grant yields.
func TestApproval_Authorize(t *testing.T) {
	const subject = "mission-m1"
	cases := []struct {
		name    string
		given   []step
		action  string
		subject string
		at      time.Duration
		code    string
	}{
		{name: "missing", action: ActionPatchApply, subject: subject, code: CodeApprovalMissing},
		{name: "other action", given: []step{grant("a1", ActionRelease, subject, 1)}, action: ActionPatchApply, subject: subject, code: CodeApprovalActionMismatch},
		{name: "other subject", given: []step{grant("a1", ActionPatchApply, "mission-m2", 1)}, action: ActionPatchApply, subject: subject, code: CodeApprovalSubjectMismatch},
		{name: "revoked", given: []step{grant("a1", ActionPatchApply, subject, 1), &RevokeApproval{ApprovalID: "a1", Reason: "r"}}, action: ActionPatchApply, subject: subject, code: CodeApprovalRevoked},
		{name: "expired", given: []step{grant("a1", ActionPatchApply, subject, 1)}, action: ActionPatchApply, subject: subject, at: 31 * 24 * time.Hour, code: CodeApprovalExpired},
		{name: "consumed", given: []step{grant("a1", ActionPatchApply, subject, 1), NewEvent{Stream: "approval-a1", Type: TypeApprovalConsumed, Data: ApprovalConsumed{ApprovalID: "a1", By: "IntegratePatch", Subject: subject, Use: 1, At: t0}}}, action: ActionPatchApply, subject: subject, code: CodeApprovalConsumed},
		{name: "valid", given: []step{grant("a1", ActionPatchApply, subject, 2)}, action: ActionPatchApply, subject: subject},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.given(tc.given...)
			a := l.state(ApprovalStream("a1")).(Approval)
			a.ID = "a1"
			got, err := a.Authorize(tc.action, tc.subject, "IntegratePatch", at(tc.at))
			if tc.code != "" {
				assertCode(t, err, tc.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := NewEvent{Stream: "approval-a1", Type: TypeApprovalConsumed, Data: ApprovalConsumed{
				ApprovalID: "a1", By: "IntegratePatch", Subject: subject, Use: 1, Remaining: 1, At: t0}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("consumption (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApproval_Status(t *testing.T) {
	l := newLedger(t)
	l.given(grant("a1", ActionStartup, "provider-x", 2))
	a := l.state("approval-a1").(Approval)
	if got := a.Status(t0); got != ApprovalStatusActive || a.Remaining() != 2 {
		t.Fatalf("status %s remaining %d, want active 2", got, a.Remaining())
	}
	if got := a.Status(t0.Add(31 * 24 * time.Hour)); got != ApprovalStatusExpired {
		t.Fatalf("status after expiry %s", got)
	}
	if got := (Approval{}).Status(t0); got != ApprovalStatusMissing {
		t.Fatalf("status of nothing %s", got)
	}
}
