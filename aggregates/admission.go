package aggregates

import (
	"slices"
	"time"
)

// Admission: the resource screens before an attempt that starts a runtime
// (seeds, Strata guide: "Require 6 GiB available host RAM before
// admission; … above 11,776 MiB GPU allocation, or on missing GPU
// diagnostics. … Another resident model blocks admission.").
//
// DecideAdmission reads a recorded, signed measurement no older than the
// policy's MeasurementFreshness and records AdmissionDecided, admitted or
// refused, with every screen's observed value and limit and the log
// position it was read at. A refused admission is a decision, recorded like
// an admitted one; StartAttempt then refuses with admission_refused. A
// missing, uncertain or stale measurement grounds no decision and is a
// refusal of the command itself.

// Admission decisions.
const (
	AdmissionAdmitted = "admitted"
	AdmissionRefused  = "refused"
)

// Screen names.
const (
	ScreenRAM            = "ram_available"
	ScreenGPU            = "gpu_allocation"
	ScreenResidentModels = "resident_models"
)

// Screen failure codes, recorded in AdmissionDecided.Screens[i].Code and
// listed in the details of an admission_refused refusal.
const (
	// CodeRAMBelowFloor: available host RAM is below the policy's floor.
	CodeRAMBelowFloor = "ram_below_floor"
	// CodeRAMUnknown: the measurement reports no available RAM.
	CodeRAMUnknown = "ram_unknown"
	// CodeGPUAllocationAboveCeiling: GPU memory in use is above the
	// policy's ceiling.
	CodeGPUAllocationAboveCeiling = "gpu_allocation_above_ceiling"
	// CodeGPUDiagnosticsMissing: the measurement reports no GPU reading.
	CodeGPUDiagnosticsMissing = "gpu_diagnostics_missing"
	// CodeResidentModelPresent: another model is resident.
	CodeResidentModelPresent = "resident_model_present"
	// CodeResidentModelsUnknown: the measurement did not observe resident
	// models.
	CodeResidentModelsUnknown = "resident_models_unknown"
)

// Admission refusal codes.
const (
	// CodeMeasurementMissing: the measurement named is not a recorded,
	// signed result (never requested, not yet recorded, uncertain, or a
	// late result beside an uncertain one).
	CodeMeasurementMissing = "measurement_missing"
	// CodeMeasurementStale: the measurement ended longer ago than the
	// policy's measurement freshness.
	CodeMeasurementStale = "measurement_stale"
	// CodeMeasurementRefusedByHost: the measurement is a signed refusal of
	// the executor's host policy (outcome refused_by_host): nothing was
	// measured, so there is nothing to screen (issue #20).
	CodeMeasurementRefusedByHost = "measurement_refused_by_host"
	// CodeAdmissionMissing: a mission that starts a runtime has no
	// admission for the attempt about to start.
	CodeAdmissionMissing = "admission_missing"
	// CodeAdmissionRefused: the newest admission for the attempt refused
	// it (details.screens lists the failed screens' codes).
	CodeAdmissionRefused = "admission_refused"
	// CodeAdmissionStale: the admission is older than the measurement
	// freshness when the attempt starts.
	CodeAdmissionStale = "admission_stale"
)

// Screen is one admission screen with its grounds. Byte values are in
// bytes; ObservedBytes is nil when the measurement did not report it.
type Screen struct {
	// Name is the screen's name (ram_available, gpu_allocation,
	// gpu_diagnostics, resident_models).
	Name string `json:"name"`
	// Passed says whether the screen passed.
	Passed bool `json:"passed"`
	// Code is the screen's failure code; empty when it passed.
	Code string `json:"code,omitempty"`
	// ObservedBytes is what the measurement observed, in bytes; absent when it
	// observed nothing.
	ObservedBytes *uint64 `json:"observed_bytes,omitempty"`
	// LimitBytes is the policy's limit, in bytes.
	LimitBytes uint64 `json:"limit_bytes,omitempty"`
	// ObservedModels are the resident models the measurement saw.
	ObservedModels []string `json:"observed_models,omitempty"`
}

// AdmissionDecided is the data of TypeAdmissionDecided.
type AdmissionDecided struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID string `json:"mission_id"`
	// Attempt is the attempt's number within the mission, from 1.
	Attempt int `json:"attempt"`
	// Provider is the provider's name (its stream is provider-<name>).
	Provider string `json:"provider"`
	// ModelTag is the exact model tag the provider serves (no alias).
	ModelTag string `json:"model_tag"`
	// Decision is the admission's decision: admitted or refused (by a screen).
	Decision string `json:"decision"`
	// Screens are the admission screens (RAM, GPU allocation, GPU diagnostics,
	// resident models), each with what it observed.
	Screens []Screen `json:"screens"`
	// MeasurementID is the measurement the screens read.
	MeasurementID string `json:"measurement_id"`
	// Measurement is the event of the measurement the screens read.
	Measurement EventRef `json:"measurement"`
	// Host is the host the measurement was taken on.
	Host string `json:"host"`
	// MeasuredAt is when the measurement ended (its freshness is judged from
	// it).
	MeasuredAt time.Time `json:"measured_at"`
	// ReadPosition is the log size the admission was decided at.
	ReadPosition uint64 `json:"read_position"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// DecideAdmission screens the next attempt of a routed mission against a
// measurement.
type DecideAdmission struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID ID `json:"measurement_id"`
}

// CommandName implements Command.
func (*DecideAdmission) CommandName() string { return "DecideAdmission" }

// Streams implements Command: the streams this command reads.
func (c *DecideAdmission) Streams(States) []string {
	return []string{MissionStream(c.MissionID), MeasurementStream(c.MeasurementID)}
}

// Decide implements Command: the gates.
func (c *DecideAdmission) Decide(in Inputs) ([]NewEvent, error) {
	m := missionOf(in, string(c.MissionID))
	if err := m.open(false); err != nil {
		return nil, err
	}
	if m.Route == nil {
		return nil, refuse(CodeRouteMissing, map[string]any{"mission_id": m.ID}, "mission %s has no route; decide one first", m.ID)
	}
	if a := m.activeAttempt(); a != nil {
		return nil, refuse(CodeAttemptInProgress, map[string]any{"mission_id": m.ID, "attempt": a.N}, "attempt %d of mission %s is running", a.N, m.ID)
	}
	meas := in.States.Measurement(string(c.MeasurementID))
	if st := meas.Status(); st != MeasurementStatusRecorded {
		return nil, refuse(CodeMeasurementMissing, map[string]any{"measurement_id": c.MeasurementID, "status": st},
			"measurement %s is %s, not a recorded signed result; admission is never decided on missing data", c.MeasurementID, st)
	}
	res := meas.Result
	if res.Outcome == ResultRefusedByHost {
		// Refused by name, not only through the readings it lacks: a
		// refusal is not a measurement of the host.
		return nil, refuse(CodeMeasurementRefusedByHost, map[string]any{"measurement_id": c.MeasurementID, "outcome": res.Outcome, "error": res.Error},
			"measurement %s was refused by its host's policy (%s): nothing was measured; request a measurement the host allows, or have an approver approve it", c.MeasurementID, res.Error)
	}
	if age := in.At.Sub(res.EndedAt); age > in.Policy.Admission.MeasurementFreshness.Duration {
		return nil, refuse(CodeMeasurementStale, map[string]any{"measurement_id": c.MeasurementID, "ended_at": res.EndedAt,
			"age": age.String(), "freshness": in.Policy.Admission.MeasurementFreshness.String()},
			"measurement %s ended %s ago; admission needs one younger than %s", c.MeasurementID, age, in.Policy.Admission.MeasurementFreshness)
	}
	screens := admissionScreens(res, m.Route.ModelTag, in.Policy.Admission)
	decision := AdmissionAdmitted
	for _, s := range screens {
		if !s.Passed {
			decision = AdmissionRefused
		}
	}
	return []NewEvent{{Stream: MissionStream(m.ID), Type: TypeAdmissionDecided, Data: AdmissionDecided{
		MissionID: m.ID, Attempt: m.Attempts + 1, Provider: m.Route.Selected, ModelTag: m.Route.ModelTag,
		Decision: decision, Screens: screens, MeasurementID: string(c.MeasurementID), Measurement: meas.ResultRef,
		Host: res.Host, MeasuredAt: res.EndedAt, ReadPosition: in.Position, At: in.At,
	}}}, nil
}

// admissionScreens evaluates the three screens; unknown is never a pass.
func admissionScreens(r MeasurementResult, modelTag string, pol AdmissionPolicy) []Screen {
	ram := Screen{Name: ScreenRAM, LimitBytes: pol.MinAvailableRAMBytes, ObservedBytes: r.RAMAvailableBytes}
	switch {
	case r.RAMAvailableBytes == nil:
		ram.Code = CodeRAMUnknown
	case *r.RAMAvailableBytes < pol.MinAvailableRAMBytes:
		ram.Code = CodeRAMBelowFloor
	default:
		ram.Passed = true
	}
	gpu := Screen{Name: ScreenGPU, LimitBytes: pol.MaxGPUAllocationBytes}
	switch {
	case r.GPU == nil:
		gpu.Code = CodeGPUDiagnosticsMissing
	default:
		used := r.GPU.MemoryUsedBytes
		gpu.ObservedBytes = &used
		if used > pol.MaxGPUAllocationBytes {
			gpu.Code = CodeGPUAllocationAboveCeiling
		} else {
			gpu.Passed = true
		}
	}
	res := Screen{Name: ScreenResidentModels, ObservedModels: r.ResidentModels}
	others := slices.DeleteFunc(slices.Clone(r.ResidentModels), func(s string) bool { return s == modelTag })
	switch {
	case !r.ResidentModelsObserved:
		res.Code = CodeResidentModelsUnknown
	case len(others) > 0:
		res.Code = CodeResidentModelPresent
	default:
		res.Passed = true
	}
	return []Screen{ram, gpu, res}
}

// admitted checks the admission for attempt n at the command's time.
func (m Mission) admitted(n int, in Inputs) error {
	a := m.Admission
	if a == nil || a.Attempt != n {
		return refuse(CodeAdmissionMissing, map[string]any{"mission_id": m.ID, "attempt": n},
			"mission %s starts a runtime and attempt %d has no admission; decide one on a fresh measurement", m.ID, n)
	}
	if a.Decision != AdmissionAdmitted {
		var failed []string
		for _, s := range a.Screens {
			if !s.Passed {
				failed = append(failed, s.Code)
			}
		}
		return refuse(CodeAdmissionRefused, map[string]any{"mission_id": m.ID, "attempt": n, "screens": failed, "admission": a.Ref},
			"the admission of attempt %d was refused by %v", n, failed)
	}
	if age := in.At.Sub(a.At); age > in.Policy.Admission.MeasurementFreshness.Duration {
		return refuse(CodeAdmissionStale, map[string]any{"mission_id": m.ID, "attempt": n, "admission": a.Ref, "age": age.String()},
			"the admission of attempt %d was decided %s ago; decide it again on a fresh measurement", n, age)
	}
	return nil
}
