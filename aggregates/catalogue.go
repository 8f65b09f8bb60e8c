package aggregates

import (
	"errors"
	"slices"
	"sync"
)

// CommandSpec is one entry of the catalogue.
type CommandSpec struct {
	// Name is the command's name in the API ("GrantApproval").
	Name string
	// Aggregate names the aggregate whose gates decide it.
	Aggregate string
	// Roles are the principal roles that may send it besides admin
	// (principal.go): the one rule the api and Decide apply.
	Roles []string
	// New returns a zero command, ready to decode into.
	New func() Command
}

// Catalogue returns every command, sorted by name. The slice is new on each
// call (no package-level mutable state).
//
// The path of a command through the commands layer is uniform:
//
//	cmd, err := aggregates.DecodeCommand(name, data) // 400 on error
//	states, err := aggregates.LoadStates(cmd, aggregates.Folding(readStream))
//	// for an aggregates.EvidenceCommand, resolve its EvidenceRefs
//	evs, err := aggregates.Decide(cmd, aggregates.Inputs{At: now, Position: head.Size, Policy: policy, States: states, Principal: p})
//	// append evs with an exact expected version on every stream in states
func Catalogue() []CommandSpec {
	c := []CommandSpec{
		{"GrantApproval", "Approval", approverRoles(), func() Command { return &GrantApproval{} }},
		{"RevokeApproval", "Approval", approverRoles(), func() Command { return &RevokeApproval{} }},

		{"DeclareProvider", "Provider", writerRoles(), func() Command { return &DeclareProvider{} }},
		{"DeclareProviderLimits", "Provider", writerRoles(), func() Command { return &DeclareProviderLimits{} }},
		{"ActivateProvider", "Provider", writerRoles(), func() Command { return &ActivateProvider{} }},
		{"MakeProviderDormant", "Provider", writerRoles(), func() Command { return &MakeProviderDormant{} }},
		{"RecordProbe", "Provider", writerRoles(), func() Command { return &RecordProbe{} }},
		{"ApproveProbeSchedule", "Provider", approverRoles(), func() Command { return &ApproveProbeSchedule{} }},
		{"EndProbeSchedule", "Provider", approverRoles(), func() Command { return &EndProbeSchedule{} }},
		{"RequestScheduledProbe", "Provider", executorRoles(), func() Command { return &RequestScheduledProbe{} }},

		{"RecordArtifactHash", "ModelBinding", writerRoles(), func() Command { return &RecordArtifactHash{} }},
		{"ProposeBinding", "ModelBinding", writerRoles(), func() Command { return &ProposeBinding{} }},
		{"VerifyBinding", "ModelBinding", writerRoles(), func() Command { return &VerifyBinding{} }},
		{"RejectBinding", "ModelBinding", writerRoles(), func() Command { return &RejectBinding{} }},
		{"InvalidateBinding", "ModelBinding", writerRoles(), func() Command { return &InvalidateBinding{} }},

		{"SubmitMission", "Mission", writerRoles(), func() Command { return &SubmitMission{} }},
		{"DecideRoute", "Mission", writerRoles(), func() Command { return &DecideRoute{} }},
		{"DecideAdmission", "Mission", writerRoles(), func() Command { return &DecideAdmission{} }},
		{"StartAttempt", "Mission", writerRoles(), func() Command { return &StartAttempt{} }},
		{"StopAttempt", "Mission", writerRoles(), func() Command { return &StopAttempt{} }},
		{"ReserveInference", "Mission", writerRoles(), func() Command { return &ReserveInference{} }},
		{"SettleInference", "Mission", writerRoles(), func() Command { return &SettleInference{} }},
		{"ReconcileReservation", "Mission", writerRoles(), func() Command { return &ReconcileReservation{} }},
		{"RecordCandidate", "Mission", writerRoles(), func() Command { return &RecordCandidate{} }},
		{"RecordCheck", "Mission", writerRoles(), func() Command { return &RecordCheck{} }},
		{"RecordSignedCheck", "Mission", writerRoles(), func() Command { return &RecordSignedCheck{} }},
		{"RecordReview", "Mission", writerRoles(), func() Command { return &RecordReview{} }},
		{"RequestCorrection", "Mission", writerRoles(), func() Command { return &RequestCorrection{} }},
		{"DeliverResult", "Mission", writerRoles(), func() Command { return &DeliverResult{} }},
		{"IntegratePatch", "Mission", writerRoles(), func() Command { return &IntegratePatch{} }},
		{"StopMission", "Mission", writerRoles(), func() Command { return &StopMission{} }},

		{"RegisterExecutorKey", "Measurement", writerRoles(), func() Command { return &RegisterExecutorKey{} }},
		{"RevokeExecutorKey", "Measurement", approverRoles(), func() Command { return &RevokeExecutorKey{} }},
		{"RequestMeasurement", "Measurement", writerRoles(), func() Command { return &RequestMeasurement{} }},
		{"ClaimMeasurement", "Measurement", executorRoles(), func() Command { return &ClaimMeasurement{} }},
		{"RenewMeasurementLease", "Measurement", executorRoles(), func() Command { return &RenewMeasurementLease{} }},
		{"RecordMeasurement", "Measurement", executorRoles(), func() Command { return &RecordMeasurement{} }},
		{"ApproveMeasurement", "Measurement", approverRoles(), func() Command { return &ApproveMeasurement{} }},
		{"MarkMeasurementUncertain", "Measurement", writerRoles(), func() Command { return &MarkMeasurementUncertain{} }},

		{"ProposeClaim", "Claim", writerRoles(), func() Command { return &ProposeClaim{} }},
		{"AcceptClaim", "Claim", writerRoles(), func() Command { return &AcceptClaim{} }},
		{"RefuseClaim", "Claim", writerRoles(), func() Command { return &RefuseClaim{} }},
	}
	slices.SortFunc(c, func(a, b CommandSpec) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return c
}

// CommandNames returns the catalogue's names, sorted.
func CommandNames() []string {
	var out []string
	for _, s := range Catalogue() {
		out = append(out, s.Name)
	}
	return out
}

// NewCommand returns a zero command for name.
func NewCommand(name string) (Command, bool) {
	spec, ok := catalogueIndex()[name]
	if !ok {
		return nil, false
	}
	return spec.New(), true
}

// catalogueIndex is the catalogue by name, built once: NewCommand runs for
// every command, and building and sorting the catalogue each time was a
// fifth of decoding a small command. Never written after it is built.
var catalogueIndex = sync.OnceValue(func() map[string]CommandSpec {
	m := map[string]CommandSpec{}
	for _, s := range Catalogue() {
		m[s.Name] = s
	}
	return m
})

// DecodeCommand decodes a command's JSON data strictly (unknown and
// duplicate fields refused, exact key case, types checked) and validates
// its shape (Validate: each field by its type, then the rules between
// fields), once: Decide does not validate again. Errors:
// *UnknownCommandError for a name not in the catalogue,
// *InvalidCommandError (with the JSON path, from "data") otherwise; both
// are refusals of a malformed command. Absent or empty data decodes as {}.
func DecodeCommand(name string, data []byte) (Command, error) {
	cmd, ok := NewCommand(name)
	if !ok {
		return nil, &UnknownCommandError{Name: name}
	}
	if err := decodeStrict(data, cmd); err != nil {
		return nil, withCommand(name, err)
	}
	if err := Validate(cmd); err != nil {
		return nil, withCommand(name, err)
	}
	return cmd, nil
}

func withCommand(name string, err error) error {
	var ie *InvalidCommandError
	if errors.As(err, &ie) {
		ie.Command = name
	}
	return err
}
