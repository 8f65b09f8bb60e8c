package aggregates

import (
	"slices"
)

// Principals (issue #20): who sent a command, as the node authenticated
// it, never as the command says. The api turns a bearer token into a
// Principal (its name and role; api/auth.go), the commands layer passes it
// in Inputs.Principal, and the deciders judge it:
//
//   - which roles may send which command is one rule, the catalogue's
//     (CommandSpec.Roles, MaySend); Decide refuses any other role with
//     role_not_allowed before a gate runs, and the refusal is recorded;
//   - an approval's stated approver must be the principal (approver_mismatch):
//     ApprovalGranted and ProbeScheduleApproved record both;
//   - an executor principal acts only for the executor id equal to its name
//     (executor_principal_mismatch).
//
// Anonymous is the principal of a node without tokens (loopback
// development, greffe demo, the fixtures): it has the admin role, and what
// a command states (an approver, an observer) is recorded as stated, beside
// the principal "anonymous", so that nothing that worked on loopback stops
// working and the ledger still says no one authenticated it.

// Principal is the authenticated sender of a command.
type Principal struct {
	// Name is the token's name (the actor of every event it writes).
	Name string
	// Role is the token's role: one of the Role… constants.
	Role string
}

// Roles a principal may have. The api's token roles are these strings
// (api.Role); reader and operator send no command.
const (
	RoleReader   = "reader"
	RoleWriter   = "writer"
	RoleApprover = "approver"
	RoleOperator = "operator"
	RoleExecutor = "executor"
	RoleAdmin    = "admin"
)

// AnonymousName is the name of the principal of a node without tokens;
// the api refuses a token under that name.
const AnonymousName = "anonymous"

// Anonymous is the principal of every command a node without tokens
// receives.
var Anonymous = Principal{Name: AnonymousName, Role: RoleAdmin}

// IsAnonymous reports whether p is the principal of a node without tokens.
func (p Principal) IsAnonymous() bool { return p == Anonymous }

// Refusal codes of the principal gates.
const (
	// CodeRoleNotAllowed: the principal's role may not send this command
	// (the catalogue's rule, CommandSpec.Roles); an approval needs the
	// approver role, an executor's command the executor role.
	CodeRoleNotAllowed = "role_not_allowed"
	// CodeApproverMismatch: the approver the command states is not the
	// authenticated principal; an approval is recorded in its sender's
	// name only.
	CodeApproverMismatch = "approver_mismatch"
	// CodeExecutorPrincipalMismatch: an executor principal sent a command
	// for another executor id than its own name.
	CodeExecutorPrincipalMismatch = "executor_principal_mismatch"
)

// Which roles send which commands: the approvals (GrantApproval,
// RevokeApproval, ApproveProbeSchedule, EndProbeSchedule,
// ApproveMeasurement) and RevokeExecutorKey are an approver's (a
// revocation disables an executor, or every check a runner signs: a
// writer could otherwise stop every GPU host at once); what an executor
// does for a request (claim, renew, record, ask for a scheduled probe) an
// executor's; every other command a writer's. The admin sends every command. (Each
// call returns a new slice: no package-level mutable state.)
func approverRoles() []string { return []string{RoleApprover} }
func executorRoles() []string { return []string{RoleExecutor} }
func writerRoles() []string   { return []string{RoleWriter} }

// MaySend reports whether a principal of role may send the command name:
// admin always, the roles of its catalogue entry otherwise. An unknown
// command is sent by no role.
func MaySend(role, name string) bool {
	spec, ok := catalogueIndex()[name]
	return ok && (role == RoleAdmin || slices.Contains(spec.Roles, role))
}

// CommandRoles returns the roles that may send name, admin first; nil for
// an unknown command.
func CommandRoles(name string) []string {
	spec, ok := catalogueIndex()[name]
	if !ok {
		return nil
	}
	return append([]string{RoleAdmin}, spec.Roles...)
}

// SenderRoles returns every role that sends at least one command, admin
// first: the roles POST /v1/commands admits.
func SenderRoles() []string {
	out := []string{RoleAdmin}
	for _, s := range Catalogue() {
		for _, r := range s.Roles {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// roleRefusal refuses p sending name unless its role may.
func roleRefusal(p Principal, name string) error {
	if MaySend(p.Role, name) {
		return nil
	}
	return refuse(CodeRoleNotAllowed, map[string]any{"command": name, "principal": p.Name, "role": p.Role, "roles": CommandRoles(name)},
		"%s may be sent by the roles %v; principal %q has the role %q", name, CommandRoles(name), p.Name, p.Role)
}

// checkApprover refuses a stated approver that is not the principal; the
// anonymous principal of a node without tokens records what it states.
func checkApprover(p Principal, stated string) error {
	if p.IsAnonymous() || stated == p.Name {
		return nil
	}
	return refuse(CodeApproverMismatch, map[string]any{"approver": stated, "principal": p.Name},
		"the approval states the approver %q but was sent by %q: an approval is recorded in its sender's name; state \"approver\": %q", stated, p.Name, p.Name)
}

// actsFor refuses an executor principal acting for another executor id.
func actsFor(p Principal, executorID string) error {
	if p.Role != RoleExecutor || p.Name == executorID {
		return nil
	}
	return refuse(CodeExecutorPrincipalMismatch, map[string]any{"executor_id": executorID, "principal": p.Name},
		"the executor %q may act only for its own executor id, not %q", p.Name, executorID)
}
