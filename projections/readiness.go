package projections

import (
	"strings"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// The readiness matrix: one row per declared provider, the four readiness
// columns of DOMAIN.md, each with its state, reason and proving event.
//
// Readiness depends on time (a probe is fresh for the policy's window), so
// the model stores what the gates fold (the provider's and its bindings'
// facts) and computes the columns at render time with
// aggregates.ProviderReadiness, the function the routing gate itself uses:
// the matrix can never say ready where a route would refuse. not_probed
// (no probe yet) stays distinct from failed; a dormant provider's row is
// shown and marked dormant.

// providerFacts mirrors the fields of aggregates.Provider that readiness
// reads, folded exactly as aggregates.Provider.Evolve folds them (checked
// against it by TestReadModels_MatchTheGates).
//
// A mirror, measured (issue #21): folding the provider and binding streams
// with the aggregates' own Evolve and keeping their states as the rows
// made BenchmarkRebuild (1,000,000 events, all models) slower: 3.86, 3.86,
// 4.79 CPU-s per rebuild with the mirrors against 4.81, 5.24, 6.66 with
// Evolve (encoding/json decoding every event in full, the binding's maps
// cloned per event), runs alternated on the 2-core reference machine;
// with Evolve on json/v2 still 4.39, 4.43 against 3.44, 3.57. The mirror
// stays until event data has one decoder as fast as the scanner
// (fields.go).
//
//	GREFFE_BENCH_DIR=/tmp/benchlog go test ./projections -run '^$' -bench Rebuild -benchtime 2x
type providerFacts struct {
	Name            string                     `json:"name"`
	Declared        bool                       `json:"declared"`
	Kind            string                     `json:"kind"`
	Profile         string                     `json:"profile"`
	Endpoint        string                     `json:"endpoint"`
	ModelTag        string                     `json:"model_tag"`
	TaskClasses     []string                   `json:"task_classes"`
	Scope           string                     `json:"scope"`
	BindingRequired bool                       `json:"binding_required"`
	Limits          *aggregates.ProviderLimits `json:"limits"`
	Activated       bool                       `json:"activated"`
	BindingID       string                     `json:"binding_id"`
	BindingIdentity string                     `json:"binding_identity"`
	Dormant         bool                       `json:"dormant"`
	DormantReason   string                     `json:"dormant_reason"`
	LastProbe       *probeFacts                `json:"last_probe"`
	// LastStatedProbe is the newest probe a writer stated (issue #20):
	// shown in the reason, never proof.
	LastStatedProbe *probeFacts         `json:"last_stated_probe,omitempty"`
	Schedule        *scheduleFacts      `json:"schedule,omitempty"`
	Declaration     aggregates.EventRef `json:"declaration"`
	LimitsDeclared  aggregates.EventRef `json:"limits_declared"`
	Activation      aggregates.EventRef `json:"activation"`
	Dormancy        aggregates.EventRef `json:"dormancy"`
}

type probeFacts struct {
	Kind          string              `json:"kind"`
	Outcome       string              `json:"outcome"`
	Models        []string            `json:"models"`
	ObservedBy    string              `json:"observed_by"`
	ObservedAt    time.Time           `json:"observed_at"`
	MeasurementID string              `json:"measurement_id,omitempty"`
	Ref           aggregates.EventRef `json:"ref"`
}

// bindingFacts mirrors the fields of aggregates.Binding readiness reads.
type bindingFacts struct {
	ID            string              `json:"id"`
	Proposed      bool                `json:"proposed"`
	Provider      string              `json:"provider"`
	ModelTag      string              `json:"model_tag"`
	Verified      bool                `json:"verified"`
	Identity      string              `json:"identity"`
	Rejected      bool                `json:"rejected"`
	Invalidated   bool                `json:"invalidated"`
	InvalidReason string              `json:"invalid_reason"`
	Proposal      aggregates.EventRef `json:"proposal"`
	Verification  aggregates.EventRef `json:"verification"`
	Rejection     aggregates.EventRef `json:"rejection"`
	Invalidation  aggregates.EventRef `json:"invalidation"`
}

type readiness struct {
	interner
	env       Env
	providers *table[providerFacts]
	bindings  *table[bindingFacts]
}

func newReadiness(env Env) Model {
	return &readiness{env: env, providers: newTable[providerFacts]("p/"), bindings: newTable[bindingFacts]("b/")}
}

var (
	declaredKeys = []string{"name", "kind", "profile", "endpoint", "model_tag", "task_classes", "scope", "binding_required"}
	limitsKeys   = []string{"context_tokens", "output_tokens"}
	activateKeys = []string{"binding_id", "binding_identity"}
	reasonKeys   = []string{"reason"}
	probeKeys    = []string{"kind", "outcome", "models", "observed_by", "observed_at", "measurement_id"}
	proposedKeys = []string{"provider", "model_tag"}
	identityKeys = []string{"identity"}
)

func (m *readiness) Apply(e *events.Event) error {
	switch {
	case strings.HasPrefix(e.Stream, aggregates.ProviderPrefix):
		return m.provider(e)
	case strings.HasPrefix(e.Stream, aggregates.BindingPrefix):
		return m.binding(e)
	}
	return nil
}

func (m *readiness) provider(e *events.Event) error {
	var v [8][]byte
	switch e.Type {
	case aggregates.TypeProviderDeclared:
		fields(e.Data, declaredKeys, v[:])
		p := m.providers.upsert(strings.TrimPrefix(e.Stream, aggregates.ProviderPrefix))
		kind, profile, endpoint, tag := str(v[1]), str(v[2]), str(v[3]), str(v[4])
		if p.Declared && (p.Kind != kind || p.Profile != profile || p.Endpoint != endpoint || p.ModelTag != tag) {
			p.Activated, p.BindingID, p.BindingIdentity, p.Activation = false, "", "", aggregates.EventRef{}
		}
		p.Name, p.Declared, p.Kind, p.Profile, p.Endpoint, p.ModelTag = str(v[0]), true, kind, profile, endpoint, tag
		p.TaskClasses, p.Scope, p.BindingRequired = strs(v[5]), str(v[6]), boolean(v[7])
		p.Declaration = m.ref(e)
	case aggregates.TypeProviderLimitsDeclared:
		fields(e.Data, limitsKeys, v[:])
		p := m.providers.upsert(strings.TrimPrefix(e.Stream, aggregates.ProviderPrefix))
		p.Limits = &aggregates.ProviderLimits{ContextTokens: int(i64(v[0])), OutputTokens: int(i64(v[1]))}
		p.LimitsDeclared = m.ref(e)
	case aggregates.TypeProviderActivated:
		fields(e.Data, activateKeys, v[:])
		p := m.providers.upsert(strings.TrimPrefix(e.Stream, aggregates.ProviderPrefix))
		p.Activated, p.Dormant, p.DormantReason, p.Dormancy = true, false, "", aggregates.EventRef{}
		p.BindingID, p.BindingIdentity = str(v[0]), str(v[1])
		p.Activation = m.ref(e)
	case aggregates.TypeProviderMadeDormant:
		fields(e.Data, reasonKeys, v[:])
		p := m.providers.upsert(strings.TrimPrefix(e.Stream, aggregates.ProviderPrefix))
		p.Dormant, p.DormantReason, p.Activated = true, str(v[0]), false
		p.Dormancy = m.ref(e)
	case aggregates.TypeProbeRecorded:
		fields(e.Data, probeKeys, v[:])
		kind := str(v[0])
		if kind == aggregates.ProbeDoctor {
			return nil // a doctor probe proves nothing about liveness
		}
		p := m.providers.upsert(strings.TrimPrefix(e.Stream, aggregates.ProviderPrefix))
		pr := &probeFacts{Kind: kind, Outcome: str(v[1]), Models: strs(v[2]), ObservedBy: str(v[3]), ObservedAt: tm(v[4]),
			MeasurementID: str(v[5]), Ref: m.ref(e)}
		if pr.MeasurementID == "" {
			// Stated by a writer (aggregates.ProbeRecorded.Signed): kept
			// apart, as the provider's fold keeps it.
			p.LastStatedProbe = pr
			return nil
		}
		p.LastProbe = pr
		if sc := p.Schedule; sc != nil && p.LastProbe.MeasurementID == sc.LastMeasurementID {
			sc.LastRanAt, sc.LastRan = p.LastProbe.ObservedAt, p.LastProbe.Ref
		}
	case aggregates.TypeProbeScheduleApproved, aggregates.TypeProbeScheduleEnded, aggregates.TypeScheduledProbeRequested:
		m.schedule(e, m.providers.upsert(strings.TrimPrefix(e.Stream, aggregates.ProviderPrefix)))
	default:
		// A type this model does not read (one a later decider added):
		// nothing it shows depends on it.
		return nil
	}
	return nil
}

func (m *readiness) binding(e *events.Event) error {
	id := strings.TrimPrefix(e.Stream, aggregates.BindingPrefix)
	var v [2][]byte
	switch e.Type {
	case aggregates.TypeArtifactHashed:
		b := m.bindings.upsert(id)
		b.ID = id
	case aggregates.TypeBindingProposed:
		fields(e.Data, proposedKeys, v[:])
		b := m.bindings.upsert(id)
		b.ID, b.Proposed, b.Provider, b.ModelTag, b.Proposal = id, true, str(v[0]), str(v[1]), m.ref(e)
	case aggregates.TypeBindingVerified:
		fields(e.Data, identityKeys, v[:])
		b := m.bindings.upsert(id)
		b.ID, b.Verified, b.Identity, b.Verification = id, true, str(v[0]), m.ref(e)
	case aggregates.TypeBindingRejected:
		b := m.bindings.upsert(id)
		b.ID, b.Rejected, b.Rejection = id, true, m.ref(e)
	case aggregates.TypeBindingInvalidated:
		fields(e.Data, reasonKeys, v[:])
		b := m.bindings.upsert(id)
		b.ID, b.Invalidated, b.InvalidReason, b.Invalidation = id, true, str(v[0]), m.ref(e)
	default:
		// A type this model does not read (one a later decider added):
		// nothing it shows depends on it.
		return nil
	}
	return nil
}

func (m *readiness) Flush(put func(string, []byte) error) error {
	if err := m.providers.flush(put); err != nil {
		return err
	}
	return m.bindings.flush(put)
}

func (m *readiness) Load(key string, value []byte) error {
	return loadTables(key, value, m.providers.load, m.bindings.load)
}

// ReadinessRow is one row of the readiness matrix.
type ReadinessRow struct {
	Key string `json:"key"`
	aggregates.Readiness
	Profile     string   `json:"profile"`
	Endpoint    string   `json:"endpoint"`
	ModelTag    string   `json:"model_tag"`
	Scope       string   `json:"scope,omitempty"`
	TaskClasses []string `json:"task_classes"`
	BindingID   string   `json:"binding_id,omitempty"`
	// Schedule is the provider's standing probe schedule; absent when
	// none was ever approved (the row's probes are then only those
	// writers recorded: history, nothing keeps it fresh).
	Schedule *ScheduleSummary `json:"schedule,omitempty"`
}

// ScheduleSummary is a row's probe schedule as of the matrix's time.
type ScheduleSummary struct {
	Active   bool                `json:"active"`
	Host     string              `json:"host"`
	Kind     string              `json:"kind"`
	Interval aggregates.Duration `json:"interval"`
	// NextDue is when the next probe may be requested; LastRanAt when the
	// schedule's newest probe was observed (absent before the first).
	NextDue   time.Time  `json:"next_due"`
	LastRanAt *time.Time `json:"last_ran_at,omitempty"`
	// MissedSince is set when the schedule is missed: when a probe was due
	// and none was recorded.
	MissedSince *time.Time `json:"missed_since,omitempty"`
	EndReason   string     `json:"end_reason,omitempty"`
}

func (m *readiness) View(q Query) any {
	rows := []ReadinessRow{}
	for _, k := range m.providers.keys() {
		if q.Key != "" && k != q.Key {
			continue
		}
		p := m.providers.get(k).provider()
		var b aggregates.Binding
		if p.BindingID != "" {
			if f := m.bindings.get(p.BindingID); f != nil {
				b = f.binding()
			}
		}
		r := aggregates.ProviderReadiness(p, b, q.Time.UTC(), m.env.Policy)
		rows = append(rows, ReadinessRow{Key: k, Readiness: r, Profile: p.Profile, Endpoint: p.Endpoint, ModelTag: p.ModelTag,
			Scope: p.Scope, TaskClasses: p.TaskClasses, BindingID: p.BindingID, Schedule: scheduleSummary(p.Schedule, q.Time.UTC())})
	}
	return rows
}

// provider returns the facts as the aggregate's state.
func (f *providerFacts) provider() aggregates.Provider {
	p := aggregates.Provider{Name: f.Name, Declared: f.Declared, Kind: f.Kind, Profile: f.Profile, Endpoint: f.Endpoint, ModelTag: f.ModelTag,
		TaskClasses: f.TaskClasses, Scope: f.Scope, BindingRequired: f.BindingRequired, Limits: f.Limits, Activated: f.Activated,
		BindingID: f.BindingID, BindingIdentity: f.BindingIdentity, Dormant: f.Dormant, DormantReason: f.DormantReason,
		Declaration: f.Declaration, LimitsDeclared: f.LimitsDeclared, Activation: f.Activation, Dormancy: f.Dormancy}
	p.LastProbe, p.LastStatedProbe = f.LastProbe.probe(f.Name), f.LastStatedProbe.probe(f.Name)
	p.Schedule = f.Schedule.schedule()
	return p
}

// probe returns the facts as the aggregate's probe; nil for none.
func (lp *probeFacts) probe(provider string) *aggregates.Probe {
	if lp == nil {
		return nil
	}
	return &aggregates.Probe{ProbeRecorded: aggregates.ProbeRecorded{Provider: provider, Kind: lp.Kind, Outcome: lp.Outcome,
		Models: lp.Models, ObservedBy: lp.ObservedBy, ObservedAt: lp.ObservedAt, MeasurementID: lp.MeasurementID}, Ref: lp.Ref}
}

// binding returns the facts as the aggregate's state.
func (f *bindingFacts) binding() aggregates.Binding {
	return aggregates.Binding{ID: f.ID, Proposed: f.Proposed, Provider: f.Provider, ModelTag: f.ModelTag, Verified: f.Verified,
		Identity: f.Identity, Rejected: f.Rejected, Invalidated: f.Invalidated, InvalidReason: f.InvalidReason,
		Proposal: f.Proposal, Verification: f.Verification, Rejection: f.Rejection, Invalidation: f.Invalidation}
}
