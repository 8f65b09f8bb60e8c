package projections

import (
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// The readiness matrix's part of the standing probe schedules (issue #16):
// the schedule facts readiness reads (aggregates.ProbeSchedule, folded as
// aggregates.Provider.Evolve folds them) and the row's summary of them.

// scheduleFacts mirrors aggregates.ProbeSchedule.
type scheduleFacts struct {
	Active            bool                `json:"active"`
	Host              string              `json:"host"`
	Kind              string              `json:"kind"`
	Interval          time.Duration       `json:"interval"`
	Timeout           time.Duration       `json:"timeout"`
	Endpoint          string              `json:"endpoint"`
	ModelTag          string              `json:"model_tag"`
	Approver          string              `json:"approver"`
	ApprovedAt        time.Time           `json:"approved_at"`
	EndReason         string              `json:"end_reason,omitempty"`
	Seq               int                 `json:"seq"`
	LastRequestAt     time.Time           `json:"last_request_at"`
	LastMeasurementID string              `json:"last_measurement_id"`
	LastRanAt         time.Time           `json:"last_ran_at"`
	Approval          aggregates.EventRef `json:"approval"`
	End               aggregates.EventRef `json:"end"`
	LastRequest       aggregates.EventRef `json:"last_request"`
	LastRan           aggregates.EventRef `json:"last_ran"`
}

var (
	scheduleApprovedKeys  = []string{"host", "kind", "interval", "timeout", "endpoint", "model_tag", "approver", "at"}
	scheduleRequestedKeys = []string{"seq", "at", "measurement_id"}
)

// schedule folds one schedule event of p's stream.
func (m *readiness) schedule(e *events.Event, p *providerFacts) {
	var s scheduleFacts
	if p.Schedule != nil {
		s = *p.Schedule
	}
	var v [8][]byte
	switch e.Type {
	case aggregates.TypeProbeScheduleApproved:
		fields(e.Data, scheduleApprovedKeys, v[:])
		s.Active, s.Host, s.Kind, s.Interval, s.Timeout = true, str(v[0]), str(v[1]), dur(v[2]), dur(v[3])
		s.Endpoint, s.ModelTag, s.Approver, s.ApprovedAt, s.EndReason = str(v[4]), str(v[5]), str(v[6]), tm(v[7]), ""
		s.Approval, s.End = m.ref(e), aggregates.EventRef{}
	case aggregates.TypeProbeScheduleEnded:
		fields(e.Data, reasonKeys, v[:])
		s.Active, s.EndReason, s.End = false, str(v[0]), m.ref(e)
	case aggregates.TypeScheduledProbeRequested:
		fields(e.Data, scheduleRequestedKeys, v[:])
		s.Seq, s.LastRequestAt, s.LastMeasurementID, s.LastRequest = int(i64(v[0])), tm(v[1]), str(v[2]), m.ref(e)
	}
	p.Schedule = &s
}

// dur decodes a duration as aggregates.Duration encodes it ("1m0s"); a
// value that does not decode is zero, as the other lenient decoders.
func dur(b []byte) time.Duration {
	d, err := time.ParseDuration(str(b))
	if err != nil {
		return 0
	}
	return d
}

// schedule returns the facts as the aggregate's state (nil for none).
func (f *scheduleFacts) schedule() *aggregates.ProbeSchedule {
	if f == nil {
		return nil
	}
	return &aggregates.ProbeSchedule{Active: f.Active, Host: f.Host, Kind: f.Kind, Interval: f.Interval, Timeout: f.Timeout,
		Endpoint: f.Endpoint, ModelTag: f.ModelTag, Approver: f.Approver, ApprovedAt: f.ApprovedAt, EndReason: f.EndReason,
		Seq: f.Seq, LastRequestAt: f.LastRequestAt, LastMeasurementID: f.LastMeasurementID, LastRanAt: f.LastRanAt,
		Approval: f.Approval, End: f.End, LastRequest: f.LastRequest, LastRan: f.LastRan}
}

// scheduleSummary is what a row shows of s at time at.
func scheduleSummary(s *aggregates.ProbeSchedule, at time.Time) *ScheduleSummary {
	if s == nil {
		return nil
	}
	out := &ScheduleSummary{Active: s.Active, Host: s.Host, Kind: s.Kind, Interval: aggregates.D(s.Interval), NextDue: s.NextDue().UTC(), EndReason: s.EndReason}
	if !s.LastRanAt.IsZero() {
		t := s.LastRanAt.UTC()
		out.LastRanAt = &t
	}
	if missed, since := s.Missed(at); missed {
		t := since.UTC()
		out.MissedSince = &t
	}
	return out
}
