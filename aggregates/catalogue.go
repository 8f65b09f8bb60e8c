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
//	evs, err := aggregates.Decide(cmd, aggregates.Inputs{At: now, Position: head.Size, Policy: policy, States: states})
//	// append evs with an exact expected version on every stream in states
func Catalogue() []CommandSpec {
	c := []CommandSpec{
		{"GrantApproval", "Approval", func() Command { return &GrantApproval{} }},
		{"RevokeApproval", "Approval", func() Command { return &RevokeApproval{} }},

		{"DeclareProvider", "Provider", func() Command { return &DeclareProvider{} }},
		{"DeclareProviderLimits", "Provider", func() Command { return &DeclareProviderLimits{} }},
		{"ActivateProvider", "Provider", func() Command { return &ActivateProvider{} }},
		{"MakeProviderDormant", "Provider", func() Command { return &MakeProviderDormant{} }},
		{"RecordProbe", "Provider", func() Command { return &RecordProbe{} }},
		{"ApproveProbeSchedule", "Provider", func() Command { return &ApproveProbeSchedule{} }},
		{"EndProbeSchedule", "Provider", func() Command { return &EndProbeSchedule{} }},
		{"RequestScheduledProbe", "Provider", func() Command { return &RequestScheduledProbe{} }},

		{"RecordArtifactHash", "ModelBinding", func() Command { return &RecordArtifactHash{} }},
		{"ProposeBinding", "ModelBinding", func() Command { return &ProposeBinding{} }},
		{"VerifyBinding", "ModelBinding", func() Command { return &VerifyBinding{} }},
		{"RejectBinding", "ModelBinding", func() Command { return &RejectBinding{} }},
		{"InvalidateBinding", "ModelBinding", func() Command { return &InvalidateBinding{} }},

		{"SubmitMission", "Mission", func() Command { return &SubmitMission{} }},
		{"DecideRoute", "Mission", func() Command { return &DecideRoute{} }},
		{"DecideAdmission", "Mission", func() Command { return &DecideAdmission{} }},
		{"StartAttempt", "Mission", func() Command { return &StartAttempt{} }},
		{"StopAttempt", "Mission", func() Command { return &StopAttempt{} }},
		{"ReserveInference", "Mission", func() Command { return &ReserveInference{} }},
		{"SettleInference", "Mission", func() Command { return &SettleInference{} }},
		{"ReconcileReservation", "Mission", func() Command { return &ReconcileReservation{} }},
		{"RecordCandidate", "Mission", func() Command { return &RecordCandidate{} }},
		{"RecordCheck", "Mission", func() Command { return &RecordCheck{} }},
		{"RecordReview", "Mission", func() Command { return &RecordReview{} }},
		{"RequestCorrection", "Mission", func() Command { return &RequestCorrection{} }},
		{"DeliverResult", "Mission", func() Command { return &DeliverResult{} }},
		{"IntegratePatch", "Mission", func() Command { return &IntegratePatch{} }},
		{"StopMission", "Mission", func() Command { return &StopMission{} }},

		{"RegisterExecutorKey", "Measurement", func() Command { return &RegisterExecutorKey{} }},
		{"RevokeExecutorKey", "Measurement", func() Command { return &RevokeExecutorKey{} }},
		{"RequestMeasurement", "Measurement", func() Command { return &RequestMeasurement{} }},
		{"ClaimMeasurement", "Measurement", func() Command { return &ClaimMeasurement{} }},
		{"RenewMeasurementLease", "Measurement", func() Command { return &RenewMeasurementLease{} }},
		{"RecordMeasurement", "Measurement", func() Command { return &RecordMeasurement{} }},
		{"MarkMeasurementUncertain", "Measurement", func() Command { return &MarkMeasurementUncertain{} }},

		{"ProposeClaim", "Claim", func() Command { return &ProposeClaim{} }},
		{"AcceptClaim", "Claim", func() Command { return &AcceptClaim{} }},
		{"RefuseClaim", "Claim", func() Command { return &RefuseClaim{} }},
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
// its shape, once: Decide does not validate again. Errors:
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
	if err := cmd.Validate(); err != nil {
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
