package aggregates

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Policy is the node's policy: the ceilings every mission inherits, the
// freshness windows readiness and admission are judged by, and the
// admission screens. The node passes it to every decision in Inputs.Policy;
// a fixture can run "under a policy that allows two corrections" by passing
// another one. Decisions that depend on it record the values they used
// (MissionSubmitted records the mission's effective budgets), so a replay
// under a later policy decides nothing differently for past events.
//
// The zero Policy is not usable; start from DefaultPolicy. Values are
// copied, never shared: a Policy is safe for concurrent use once built.
type Policy struct {
	// Budgets are the ceilings of a mission. A submission may only narrow
	// them (CodeBudgetWidened).
	Budgets Budgets `json:"budgets"`
	// ProbeFreshness is how long an ok models/smoke probe keeps a provider
	// live-proven. Default 10 minutes; must be positive.
	ProbeFreshness Duration `json:"probe_freshness"`
	// BindingRequiredProfiles are the provider profiles whose activation
	// readiness needs a verified model binding (their serving process is
	// not identified by the runtime itself). Default: local_vllm,
	// local_llama_cpp, local_dgx_gb10_llama_server, remote_ssh_llama_server,
	// local_strata.
	BindingRequiredProfiles []string `json:"binding_required_profiles"`
	// Admission holds the screens checked before an attempt that starts a
	// runtime.
	Admission AdmissionPolicy `json:"admission"`
	// Measurement bounds what an executor may be asked to run.
	Measurement MeasurementPolicy `json:"measurement"`
	// ProbeSchedule bounds standing probe schedules (schedule.go).
	ProbeSchedule ProbeSchedulePolicy `json:"probe_schedule"`
}

// Budgets are the ceilings of one mission (DOMAIN.md "Budgets"). Counts are
// totals over the mission's life; 0 means none allowed, never "unlimited".
type Budgets struct {
	// InferenceRequests is the most inference reservations. Default 8.
	InferenceRequests int `json:"inference_requests"`
	// ErrorRecoveryCycles is how many times work may resume after an
	// inference that errored or was rejected before generation. Default 2.
	ErrorRecoveryCycles int `json:"error_recovery_cycles"`
	// Attempts is the most supervisor-authorized attempts. Default 2.
	Attempts int `json:"attempts"`
	// Corrections is the most corrections requested. Default 1.
	Corrections int `json:"corrections"`
	// CommandTimeout is the longest one command (a check) may run.
	// Default 15 s.
	CommandTimeout Duration `json:"command_timeout"`
	// AttemptTimeout is the longest one attempt may run. Default 30 min.
	AttemptTimeout Duration `json:"attempt_timeout"`
	// OutputBytesPerCommand is the most output one command may keep, in
	// bytes. Default 16 KiB.
	OutputBytesPerCommand int64 `json:"output_bytes_per_command"`
}

// AdmissionPolicy holds the admission screens (from the Strata guide in the
// seeds: "Require 6 GiB available host RAM before admission; … above
// 11,776 MiB GPU allocation, or on missing GPU diagnostics. Another resident
// model blocks admission.").
type AdmissionPolicy struct {
	// MinAvailableRAMBytes is the host RAM that must be available. Default
	// 6 GiB.
	MinAvailableRAMBytes uint64 `json:"min_available_ram_bytes"`
	// MaxGPUAllocationBytes is the ceiling on GPU memory already allocated.
	// Default 11,776 MiB.
	MaxGPUAllocationBytes uint64 `json:"max_gpu_allocation_bytes"`
	// MeasurementFreshness is the oldest a measurement may be to ground an
	// admission, and the oldest an admission may be when the attempt
	// starts. Default 5 minutes.
	MeasurementFreshness Duration `json:"measurement_freshness"`
}

// MeasurementPolicy bounds measurement requests.
type MeasurementPolicy struct {
	// MaxTimeout is the longest a requested command may run. Default 30 min
	// (the attempt ceiling: a runtime start is one step of an attempt).
	MaxTimeout Duration `json:"max_timeout"`
	// MaxOutputBytes is the most output a request may ask to keep. Default
	// 16 KiB, the per-command ceiling.
	MaxOutputBytes int64 `json:"max_output_bytes"`
	// LeaseGrace is how far past the request's timeout a claim's lease may
	// run, for reporting. Default 1 minute.
	LeaseGrace Duration `json:"lease_grace"`
}

// Default policy values.
const (
	DefaultInferenceRequests     = 8
	DefaultErrorRecoveryCycles   = 2
	DefaultAttempts              = 2
	DefaultCorrections           = 1
	DefaultCommandTimeout        = 15 * time.Second
	DefaultAttemptTimeout        = 30 * time.Minute
	DefaultOutputBytesPerCommand = 16 << 10
	DefaultProbeFreshness        = 10 * time.Minute
	DefaultMinAvailableRAM       = 6 << 30
	DefaultMaxGPUAllocation      = 11776 << 20
	DefaultMeasurementFreshness  = 5 * time.Minute
	DefaultLeaseGrace            = time.Minute
)

// DefaultPolicy returns the policy of DOMAIN.md and the seeds.
func DefaultPolicy() Policy {
	return Policy{
		Budgets: Budgets{
			InferenceRequests:     DefaultInferenceRequests,
			ErrorRecoveryCycles:   DefaultErrorRecoveryCycles,
			Attempts:              DefaultAttempts,
			Corrections:           DefaultCorrections,
			CommandTimeout:        D(DefaultCommandTimeout),
			AttemptTimeout:        D(DefaultAttemptTimeout),
			OutputBytesPerCommand: DefaultOutputBytesPerCommand,
		},
		ProbeFreshness:          D(DefaultProbeFreshness),
		BindingRequiredProfiles: []string{"local_vllm", "local_llama_cpp", "local_dgx_gb10_llama_server", "remote_ssh_llama_server", "local_strata"},
		Admission: AdmissionPolicy{
			MinAvailableRAMBytes:  DefaultMinAvailableRAM,
			MaxGPUAllocationBytes: DefaultMaxGPUAllocation,
			MeasurementFreshness:  D(DefaultMeasurementFreshness),
		},
		Measurement: MeasurementPolicy{
			MaxTimeout:     D(DefaultAttemptTimeout),
			MaxOutputBytes: DefaultOutputBytesPerCommand,
			LeaseGrace:     D(DefaultLeaseGrace),
		},
		ProbeSchedule: ProbeSchedulePolicy{MinInterval: D(DefaultScheduleMinInterval), MaxInterval: D(DefaultScheduleMaxInterval)},
	}
}

// ParsePolicy reads a policy file: a JSON object whose fields override those
// of DefaultPolicy (an absent field keeps its default; an empty file is the
// default policy). It is decoded as strictly as command data: unknown,
// duplicate or wrongly cased keys and wrong types are refused with their
// JSON path under "policy" (e.g. "policy.budgets.corrections"). The result
// is then validated. Errors wrap ErrInvalidPolicy.
func ParsePolicy(data []byte) (Policy, error) {
	p := DefaultPolicy()
	if err := decodeStrict(data, &p); err != nil {
		var ie *InvalidCommandError
		if errors.As(err, &ie) {
			return p, fmt.Errorf("%w: %s: %s", ErrInvalidPolicy, "policy"+strings.TrimPrefix(ie.Path, "data"), ie.Reason)
		}
		return p, fmt.Errorf("%w: %v", ErrInvalidPolicy, err)
	}
	return p, p.Validate()
}

// ErrInvalidPolicy is wrapped by Policy.Validate's error.
var ErrInvalidPolicy = errors.New("invalid policy")

// Validate reports every problem of p at once, each with its field and
// value, wrapping ErrInvalidPolicy. A node refuses to start with an invalid
// policy.
func (p Policy) Validate() error {
	var probs []string
	neg := func(field string, v int64) {
		if v < 0 {
			probs = append(probs, fmt.Sprintf("%s is %d; must be >= 0", field, v))
		}
	}
	pos := func(field string, d time.Duration) {
		if d <= 0 {
			probs = append(probs, fmt.Sprintf("%s is %s; must be positive", field, d))
		}
	}
	b := p.Budgets
	neg("budgets.inference_requests", int64(b.InferenceRequests))
	neg("budgets.error_recovery_cycles", int64(b.ErrorRecoveryCycles))
	neg("budgets.attempts", int64(b.Attempts))
	neg("budgets.corrections", int64(b.Corrections))
	pos("budgets.command_timeout", b.CommandTimeout.Duration)
	pos("budgets.attempt_timeout", b.AttemptTimeout.Duration)
	if b.OutputBytesPerCommand <= 0 {
		probs = append(probs, fmt.Sprintf("budgets.output_bytes_per_command is %d; must be positive", b.OutputBytesPerCommand))
	}
	pos("probe_freshness", p.ProbeFreshness.Duration)
	pos("admission.measurement_freshness", p.Admission.MeasurementFreshness.Duration)
	if p.Admission.MinAvailableRAMBytes == 0 {
		probs = append(probs, "admission.min_available_ram_bytes is 0; a RAM screen that admits anything is not a screen")
	}
	if p.Admission.MaxGPUAllocationBytes == 0 {
		probs = append(probs, "admission.max_gpu_allocation_bytes is 0; no GPU would ever be admitted")
	}
	pos("measurement.max_timeout", p.Measurement.MaxTimeout.Duration)
	if p.Measurement.MaxOutputBytes <= 0 {
		probs = append(probs, fmt.Sprintf("measurement.max_output_bytes is %d; must be positive", p.Measurement.MaxOutputBytes))
	}
	if p.Measurement.LeaseGrace.Duration < 0 {
		probs = append(probs, fmt.Sprintf("measurement.lease_grace is %s; must be >= 0", p.Measurement.LeaseGrace))
	}
	probs = p.ProbeSchedule.validate(probs)
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidPolicy, strings.Join(probs, "; "))
	}
	return nil
}

// BindingRequired reports whether a provider of profile needs a verified
// binding to be activation-ready.
func (p Policy) BindingRequired(profile string) bool {
	return slices.Contains(p.BindingRequiredProfiles, profile)
}

// BudgetRequest is what a submission asks for: each field, when set, must
// not exceed the policy's ceiling. Unset fields inherit the policy.
type BudgetRequest struct {
	// InferenceRequests asks for at most this many inference requests; absent
	// keeps the policy's.
	InferenceRequests *Count `json:"inference_requests,omitempty"`
	// ErrorRecoveryCycles asks for at most this many error recovery cycles;
	// absent keeps the policy's.
	ErrorRecoveryCycles *Count `json:"error_recovery_cycles,omitempty"`
	// Attempts asks for at most this many attempts; absent keeps the policy's.
	Attempts *Count `json:"attempts,omitempty"`
	// Corrections asks for at most this many corrections per attempt; absent
	// keeps the policy's.
	Corrections *Count `json:"corrections,omitempty"`
	// CommandTimeout asks for a shorter time limit per command; absent keeps
	// the policy's.
	CommandTimeout *PositiveDuration `json:"command_timeout,omitempty"`
	// AttemptTimeout asks for a shorter time limit per attempt; absent keeps
	// the policy's.
	AttemptTimeout *PositiveDuration `json:"attempt_timeout,omitempty"`
	// OutputBytesPerCommand asks for less kept output per command, in bytes;
	// absent keeps the policy's.
	OutputBytesPerCommand *PositiveSize `json:"output_bytes_per_command,omitempty"`
}

// CodeBudgetWidened: a submission asked for more than the policy allows.
// Ceilings may only narrow (DOMAIN.md principle 5).
const CodeBudgetWidened = "budget_widened"

// Narrow returns the budgets r asks for within b, or a Refusal
// (CodeBudgetWidened) listing every field that would widen b.
func (b Budgets) Narrow(r BudgetRequest) (Budgets, error) {
	out := b
	widened := map[string]any{}
	narrowInt := func(name string, req *int, dst *int) {
		if req == nil {
			return
		}
		if *req > *dst {
			widened[name] = map[string]any{"requested": *req, "ceiling": *dst}
			return
		}
		*dst = *req
	}
	narrowDur := func(name string, req *Duration, dst *Duration) {
		if req == nil {
			return
		}
		if req.Duration > dst.Duration {
			widened[name] = map[string]any{"requested": req.String(), "ceiling": dst.String()}
			return
		}
		*dst = *req
	}
	narrowInt("inference_requests", (*int)(r.InferenceRequests), &out.InferenceRequests)
	narrowInt("error_recovery_cycles", (*int)(r.ErrorRecoveryCycles), &out.ErrorRecoveryCycles)
	narrowInt("attempts", (*int)(r.Attempts), &out.Attempts)
	narrowInt("corrections", (*int)(r.Corrections), &out.Corrections)
	narrowDur("command_timeout", (*Duration)(r.CommandTimeout), &out.CommandTimeout)
	narrowDur("attempt_timeout", (*Duration)(r.AttemptTimeout), &out.AttemptTimeout)
	if r.OutputBytesPerCommand != nil {
		if int64(*r.OutputBytesPerCommand) > out.OutputBytesPerCommand {
			widened["output_bytes_per_command"] = map[string]any{"requested": *r.OutputBytesPerCommand, "ceiling": out.OutputBytesPerCommand}
		} else {
			out.OutputBytesPerCommand = int64(*r.OutputBytesPerCommand)
		}
	}
	if len(widened) > 0 {
		return Budgets{}, refuse(CodeBudgetWidened, widened,
			"the submission asks for more than the node's policy allows (%s); budgets may only narrow", strings.Join(sortedKeys(widened), ", "))
	}
	return out, nil
}
