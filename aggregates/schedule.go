package aggregates

import (
	"fmt"
	"time"

	"github.com/greffe/greffe/events"
)

// Standing probe schedules (issue #16): without one, a probe happens only
// when a writer requests it, and nothing keeps live_proven fresh. An
// approver approves once a schedule for a provider (ApproveProbeSchedule):
// a probe kind, an interval within the policy's bounds and the host whose
// executor runs it. The executor on that host asks for each due probe
// (RequestScheduledProbe): the node checks that it is due and that the
// executor is registered on the schedule's host, and appends the probe's
// MeasurementRequested in the same batch as a ScheduledProbeRequested, so
// one slot is requested once however many executors ask. The probe then
// runs as every probe measurement does (claim, run, signed result,
// ProbeRecorded). A schedule whose probes stop being recorded is "missed"
// (Missed), and readiness shows the provider stale with the reason
// "probe schedule missed since T".
//
// The schedule's events live on the provider's stream: they are facts
// about the provider, the readiness columns read them with its probes,
// and a redeclaration that changes the endpoint is seen by the same fold.

// Probe schedule event types (stream "provider-<name>").
const (
	TypeProbeScheduleApproved   = "ProbeScheduleApproved"
	TypeProbeScheduleEnded      = "ProbeScheduleEnded"
	TypeScheduledProbeRequested = "ScheduledProbeRequested"
)

// ProbeScheduleApproved is the data of TypeProbeScheduleApproved. Endpoint
// and ModelTag are the provider's when it was approved: the approval is of
// a probe of that endpoint (and, for smoke, that tag), nothing else.
type ProbeScheduleApproved struct {
	// Provider is the provider's name (its stream is provider-<name>).
	Provider string `json:"provider"`
	// Host is the host whose executor runs the probes.
	Host string `json:"host"`
	// Kind is the probe's kind: models or smoke.
	Kind string `json:"kind"`
	// Interval is the time between two probes of the schedule (a Go duration
	// such as "1m").
	Interval Duration `json:"interval"`
	// Timeout is the longest the work may run (a Go duration such as "30s").
	Timeout Duration `json:"timeout"`
	// Endpoint is the provider's endpoint at approval: what each probe probes.
	Endpoint string `json:"endpoint"`
	// ModelTag is the provider's model tag at approval: what a smoke probe
	// asks for.
	ModelTag string `json:"model_tag"`
	// Approver is who approved it, as the command stated it: the principal
	// itself (approver_mismatch refuses any other name), or, from a node
	// without tokens, what the anonymous principal stated.
	Approver string `json:"approver"`
	// Principal is the authenticated principal that approved it
	// ("anonymous" on a node without tokens); absent from approvals
	// recorded before issue #20.
	Principal string `json:"principal,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ProbeScheduleEnded is the data of TypeProbeScheduleEnded.
type ProbeScheduleEnded struct {
	// Provider is the provider's name (its stream is provider-<name>).
	Provider string `json:"provider"`
	// Reason says why the schedule ended.
	Reason string `json:"reason"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ScheduledProbeRequested is the data of TypeScheduledProbeRequested: slot
// Seq (1, 2, …) of the schedule, requested by ExecutorID as measurement
// MeasurementID.
type ScheduledProbeRequested struct {
	// Provider is the provider's name (its stream is provider-<name>).
	Provider string `json:"provider"`
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID string `json:"measurement_id"`
	// ExecutorID is the executor's id, as registered with its key.
	ExecutorID string `json:"executor_id"`
	// Host is the schedule's host.
	Host string `json:"host"`
	// Seq is the slot's number within the schedule, from 1.
	Seq int `json:"seq"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ProbeSchedule is a provider's standing probe schedule, folded from its
// stream (Provider.Schedule; nil when none was ever approved).
type ProbeSchedule struct {
	Active   bool
	Host     string
	Kind     string
	Interval time.Duration
	Timeout  time.Duration
	Endpoint string
	ModelTag string
	Approver string
	// ApprovedAt is the newest approval's time; EndReason says why it
	// ended, when it did.
	ApprovedAt time.Time
	EndReason  string
	// Seq counts the probes requested; LastRequestAt and
	// LastMeasurementID are the newest request's.
	Seq               int
	LastRequestAt     time.Time
	LastMeasurementID string
	// LastRanAt is when the newest probe of the schedule's own request
	// was observed (zero: none recorded yet).
	LastRanAt time.Time
	// Approval, End, LastRequest and LastRan prove each fact.
	Approval, End, LastRequest, LastRan EventRef
}

// NextDue returns when the next probe may be requested: at approval, then
// one interval after the newest request.
func (s *ProbeSchedule) NextDue() time.Time {
	if s.LastRequestAt.IsZero() || s.LastRequestAt.Before(s.ApprovedAt) {
		return s.ApprovedAt
	}
	return s.LastRequestAt.Add(s.Interval)
}

// Missed reports whether an active schedule has missed its probes at time
// at, and since when: the newest of its approval and its last recorded
// probe, plus one interval, is when a probe was due; the schedule is
// missed once a further interval plus the probe's timeout (time to claim,
// run and report it) has passed without a recorded probe. A nil or ended
// schedule misses nothing.
func (s *ProbeSchedule) Missed(at time.Time) (bool, time.Time) {
	if s == nil || !s.Active {
		return false, time.Time{}
	}
	base := s.ApprovedAt
	if s.LastRanAt.After(base) {
		base = s.LastRanAt
	}
	due := base.Add(s.Interval)
	return !at.Before(due.Add(s.Interval + s.Timeout)), due
}

// evolveSchedule folds the schedule's events into p (Provider.Evolve
// calls it for the three types above).
func (p Provider) evolveSchedule(e *events.Event) (Provider, error) {
	var s ProbeSchedule
	if p.Schedule != nil {
		s = *p.Schedule // a copy: the state p was copied from keeps its own
	}
	switch e.Type {
	case TypeProbeScheduleApproved:
		var d ProbeScheduleApproved
		if err := decodeData(e, &d); err != nil {
			return p, err
		}
		s.Active, s.Host, s.Kind, s.Interval, s.Timeout = true, d.Host, d.Kind, d.Interval.Duration, d.Timeout.Duration
		s.Endpoint, s.ModelTag, s.Approver, s.ApprovedAt, s.EndReason = d.Endpoint, d.ModelTag, d.Approver, d.At, ""
		s.Approval, s.End = RefOf(e), EventRef{}
	case TypeProbeScheduleEnded:
		var d ProbeScheduleEnded
		if err := decodeData(e, &d); err != nil {
			return p, err
		}
		s.Active, s.EndReason, s.End = false, d.Reason, RefOf(e)
	case TypeScheduledProbeRequested:
		var d ScheduledProbeRequested
		if err := decodeData(e, &d); err != nil {
			return p, err
		}
		s.Seq, s.LastRequestAt, s.LastMeasurementID, s.LastRequest = d.Seq, d.At, d.MeasurementID, RefOf(e)
	default:
		return p, foldError(e, ErrUnknownEventType)
	}
	p.Schedule = &s
	p.Events++
	return p, nil
}

// scheduledProbeRan notes pr, just folded, on the schedule when it is the
// result of the schedule's newest request: only the schedule's own probes
// keep it, so a probe a writer asked for does not hide a stopped executor.
func (p Provider) scheduledProbeRan(pr *Probe) Provider {
	if p.Schedule == nil || pr.MeasurementID == "" || pr.MeasurementID != p.Schedule.LastMeasurementID {
		return p
	}
	s := *p.Schedule
	s.LastRanAt, s.LastRan = pr.ObservedAt, pr.Ref
	p.Schedule = &s
	return p
}

// scheduleFact returns live unless p's schedule is missed at at: then the
// provider is stale (a failure state keeps its state; its reason gains
// the missed schedule), since nothing says it still serves.
func scheduleFact(p Provider, at time.Time, live Fact) Fact {
	missed, since := p.Schedule.Missed(at)
	if !missed {
		return live
	}
	note := fmt.Sprintf("probe schedule missed since %s (every %s on host %s)", since.UTC().Format(time.RFC3339), p.Schedule.Interval, p.Schedule.Host)
	if !live.Ready && live.State != StateStale {
		live.Reason += "; " + note
		return live
	}
	proof := live.Proof
	if r := refPtr(p.Schedule.LastRan); r != nil {
		proof = r
	} else if proof == nil {
		proof = refPtr(p.Schedule.Approval)
	}
	return Fact{State: StateStale, Reason: note, Proof: proof}
}

// Refusal codes of the probe schedule gates.
const (
	// CodeScheduleIntervalOutOfBounds: the interval is outside the policy's
	// probe_schedule bounds (or not longer than the probe's timeout).
	CodeScheduleIntervalOutOfBounds = "schedule_interval_out_of_bounds"
	// CodeScheduleUnknown: the provider has no active probe schedule.
	CodeScheduleUnknown = "schedule_unknown"
	// CodeScheduleHostMismatch: the executor is registered on another host
	// than the schedule's.
	CodeScheduleHostMismatch = "schedule_host_mismatch"
	// CodeProbeNotDue: the schedule's next probe is not due yet.
	CodeProbeNotDue = "probe_not_due"
)

// Default probe schedule bounds of the policy.
const (
	DefaultScheduleMinInterval = 10 * time.Second
	DefaultScheduleMaxInterval = 5 * time.Minute
	// scheduleOutputCap bounds a scheduled probe's excerpts: a /v1/models
	// answer needs no more, and it is within every valid policy that
	// allows at least this much.
	scheduleOutputCap = 4096
)

// ProbeSchedulePolicy bounds standing probe schedules.
type ProbeSchedulePolicy struct {
	// MinInterval is the shortest interval a schedule may have: a floor on
	// the load schedules put on runtimes. Default 10 s; must be positive.
	MinInterval Duration `json:"min_interval"`
	// MaxInterval is the longest. The gate also caps it at
	// probe_freshness, since a schedule kept to the letter would otherwise
	// still leave the provider stale between probes. Default 5 min.
	MaxInterval Duration `json:"max_interval"`
}

// maxInterval returns the longest interval allowed under a freshness
// window.
func (p ProbeSchedulePolicy) maxInterval(freshness time.Duration) time.Duration {
	return min(p.MaxInterval.Duration, freshness)
}

// validate adds p's problems to probs (Policy.Validate calls it).
func (p ProbeSchedulePolicy) validate(probs []string) []string {
	if p.MinInterval.Duration <= 0 {
		probs = append(probs, fmt.Sprintf("probe_schedule.min_interval is %s; must be positive", p.MinInterval))
	}
	if p.MaxInterval.Duration < p.MinInterval.Duration {
		probs = append(probs, fmt.Sprintf("probe_schedule.max_interval is %s; must be at least min_interval (%s)", p.MaxInterval, p.MinInterval))
	}
	return probs
}

// ApproveProbeSchedule is an approver's approval of a standing probe
// schedule for a provider (sent by an approver or the admin, in its own
// name, as GrantApproval is): every Interval, the executor on Host probes the
// provider's endpoint (kind "models": GET /v1/models; "smoke": also a
// bounded completion of the exact tag), each probe within Timeout.
// Approving the same schedule again appends nothing; approving another
// replaces it (and restarts it if it had ended).
type ApproveProbeSchedule struct {
	// Provider is the provider's name (its stream is provider-<name>).
	Provider ID `json:"provider"`
	// Host is the host whose executor runs the probes.
	Host ID `json:"host"`
	// Kind is the probe's kind: models (GET /v1/models) or smoke (also a
	// bounded completion of the exact tag).
	Kind LiveProbeKind `json:"kind"`
	// Interval is the time between two probes of the schedule (a Go duration
	// such as "1m").
	Interval PositiveDuration `json:"interval"`
	// Timeout is the longest the work may run (a Go duration such as "30s").
	Timeout PositiveDuration `json:"timeout"`
	// Approver is who approves it: the sending principal's own name.
	Approver ShortText `json:"approver"`
}

// CommandName implements Command.
func (*ApproveProbeSchedule) CommandName() string { return "ApproveProbeSchedule" }

// Validate implements crossFieldRules: each probe ends before the next is due.
func (c *ApproveProbeSchedule) Validate() error {
	if c.Timeout.Duration >= c.Interval.Duration {
		return invalid("timeout", "is %s; must be positive and shorter than the interval (%s)", c.Timeout, c.Interval)
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *ApproveProbeSchedule) Streams(States) []string { return []string{ProviderStream(c.Provider)} }

// Decide implements Command: the gates.
func (c *ApproveProbeSchedule) Decide(in Inputs) ([]NewEvent, error) {
	if err := checkApprover(in.Principal, string(c.Approver)); err != nil {
		return nil, err
	}
	p := in.States.Provider(string(c.Provider))
	if !p.Declared {
		return nil, providerUnknown(string(c.Provider))
	}
	if p.Endpoint == "" || c.Kind == ProbeSmoke && p.ModelTag == "" {
		return nil, refuse(CodeNotConfigured, map[string]any{"provider": p.Name, "endpoint": p.Endpoint, "model_tag": p.ModelTag},
			"provider %s has no endpoint (or, for a smoke probe, no exact model tag) to probe; declare it first", p.Name)
	}
	sp := in.Policy.ProbeSchedule
	if hi := sp.maxInterval(in.Policy.ProbeFreshness.Duration); c.Interval.Duration < sp.MinInterval.Duration || c.Interval.Duration > hi {
		return nil, refuse(CodeScheduleIntervalOutOfBounds, map[string]any{"interval": c.Interval.String(),
			"min_interval": sp.MinInterval.String(), "max_interval": D(hi).String()},
			"the interval %s is outside the node's probe_schedule bounds [%s, %s] (the maximum is at most probe_freshness)", c.Interval, sp.MinInterval, D(hi))
	}
	if mp := in.Policy.Measurement; c.Timeout.Duration > mp.MaxTimeout.Duration || scheduleOutputCap > mp.MaxOutputBytes {
		return nil, refuse(CodeMeasurementBoundsExceeded, map[string]any{"timeout": c.Timeout.String(), "max_timeout": mp.MaxTimeout.String(),
			"output_cap_bytes": scheduleOutputCap, "max_output_bytes": mp.MaxOutputBytes},
			"each scheduled probe must fit the node's measurement bounds; shorten the timeout")
	}
	d := ProbeScheduleApproved{Provider: p.Name, Host: string(c.Host), Kind: string(c.Kind), Interval: Duration(c.Interval), Timeout: Duration(c.Timeout),
		Endpoint: p.Endpoint, ModelTag: p.ModelTag, Approver: string(c.Approver), Principal: in.Principal.Name, At: in.At}
	if s := p.Schedule; s != nil && s.Active && s.Host == d.Host && s.Kind == d.Kind && s.Interval == d.Interval.Duration &&
		s.Timeout == d.Timeout.Duration && s.Endpoint == d.Endpoint && s.ModelTag == d.ModelTag && s.Approver == d.Approver {
		return nil, nil
	}
	return []NewEvent{{Stream: ProviderStream(p.Name), Type: TypeProbeScheduleApproved, Data: d}}, nil
}

// EndProbeSchedule ends a provider's probe schedule; ending an ended one
// appends nothing.
type EndProbeSchedule struct {
	// Provider is the provider's name (its stream is provider-<name>).
	Provider ID `json:"provider"`
	// Reason says why the schedule ends.
	Reason LongText `json:"reason"`
}

// CommandName implements Command.
func (*EndProbeSchedule) CommandName() string { return "EndProbeSchedule" }

// Streams implements Command: the streams this command reads.
func (c *EndProbeSchedule) Streams(States) []string { return []string{ProviderStream(c.Provider)} }

// Decide implements Command: the gates.
func (c *EndProbeSchedule) Decide(in Inputs) ([]NewEvent, error) {
	p := in.States.Provider(string(c.Provider))
	if !p.Declared {
		return nil, providerUnknown(string(c.Provider))
	}
	if p.Schedule == nil {
		return nil, scheduleUnknown(p.Name)
	}
	if !p.Schedule.Active {
		return nil, nil
	}
	return []NewEvent{{Stream: ProviderStream(p.Name), Type: TypeProbeScheduleEnded, Data: ProbeScheduleEnded{
		Provider: p.Name, Reason: string(c.Reason), At: in.At}}}, nil
}

func scheduleUnknown(provider string) *Refusal {
	return refuse(CodeScheduleUnknown, map[string]any{"provider": provider},
		"provider %s has no active probe schedule; an operator approves one with ApproveProbeSchedule", provider)
}

// RequestScheduledProbe is an executor's request for its schedule's due
// probe: measurement MeasurementID (chosen by the executor, new) probes
// the provider as the schedule says, on the schedule's host.
type RequestScheduledProbe struct {
	// Provider is the provider's name (its stream is provider-<name>).
	Provider ID `json:"provider"`
	// ExecutorID is the executor asking; it must be registered on the
	// schedule's host.
	ExecutorID ID `json:"executor_id"`
	// MeasurementID is the new measurement's id, chosen by the executor.
	MeasurementID ID `json:"measurement_id"`
}

// CommandName implements Command.
func (*RequestScheduledProbe) CommandName() string { return "RequestScheduledProbe" }

// Streams implements Command: the streams this command reads.
func (c *RequestScheduledProbe) Streams(States) []string {
	return []string{ProviderStream(c.Provider), ExecutorStream(c.ExecutorID), MeasurementStream(c.MeasurementID)}
}

// Decide implements Command: the gates.
func (c *RequestScheduledProbe) Decide(in Inputs) ([]NewEvent, error) {
	if err := actsFor(in.Principal, string(c.ExecutorID)); err != nil {
		return nil, err
	}
	p := in.States.Provider(string(c.Provider))
	if !p.Declared {
		return nil, providerUnknown(string(c.Provider))
	}
	s := p.Schedule
	if s == nil || !s.Active {
		return nil, scheduleUnknown(p.Name)
	}
	x := in.States.Executor(string(c.ExecutorID))
	if len(x.ActiveKeys(KeyRoleExecutor)) == 0 {
		return nil, refuse(CodeExecutorKeyUnknown, map[string]any{"executor_id": c.ExecutorID},
			"executor %s has no registered, unrevoked key", c.ExecutorID)
	}
	if x.Host != s.Host {
		return nil, refuse(CodeScheduleHostMismatch, map[string]any{"provider": p.Name, "executor_id": c.ExecutorID,
			"executor_host": x.Host, "schedule_host": s.Host},
			"the probe schedule of %s runs on host %s; executor %s is registered on %s", p.Name, s.Host, c.ExecutorID, x.Host)
	}
	if p.Endpoint != s.Endpoint || s.Kind == ProbeSmoke && p.ModelTag != s.ModelTag {
		return nil, refuse(CodeProbeTargetMismatch, map[string]any{"provider": p.Name, "endpoint": s.Endpoint, "provider_endpoint": p.Endpoint,
			"model_tag": s.ModelTag, "provider_model_tag": p.ModelTag},
			"provider %s was redeclared since its schedule was approved (endpoint %s, tag %s); approve the schedule again", p.Name, p.Endpoint, p.ModelTag)
	}
	if due := s.NextDue(); in.At.Before(due) {
		return nil, refuse(CodeProbeNotDue, map[string]any{"provider": p.Name, "next_due": due, "at": in.At},
			"the next probe of %s is due at %s", p.Name, due.UTC().Format(time.RFC3339Nano))
	}
	if in.States.Measurement(string(c.MeasurementID)).Requested {
		return nil, refuse(CodeMeasurementExists, map[string]any{"measurement_id": c.MeasurementID}, "measurement %s was already requested", c.MeasurementID)
	}
	argv := []string{ProbeModels, s.Endpoint}
	if s.Kind == ProbeSmoke {
		argv = []string{ProbeSmoke, s.Endpoint, s.ModelTag}
	}
	seq := s.Seq + 1
	return []NewEvent{
		{Stream: ProviderStream(p.Name), Type: TypeScheduledProbeRequested, Data: ScheduledProbeRequested{
			Provider: p.Name, MeasurementID: string(c.MeasurementID), ExecutorID: string(c.ExecutorID), Host: s.Host, Seq: seq, At: in.At}},
		{Stream: MeasurementStream(c.MeasurementID), Type: TypeMeasurementRequested, Data: MeasurementRequested{
			MeasurementID: string(c.MeasurementID), Host: s.Host, Argv: argv, Kind: MeasurementProbe, Timeout: D(s.Timeout),
			OutputCapBytes: scheduleOutputCap, Purpose: fmt.Sprintf("probe schedule of %s, slot %d", p.Name, seq),
			Provider: p.Name, At: in.At}},
	}, nil
}
