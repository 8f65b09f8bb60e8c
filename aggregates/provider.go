package aggregates

import (
	"slices"
	"strings"
	"time"

	"github.com/greffe/greffe/events"
)

// Provider is the state of one runtime endpoint or agent client (stream
// "provider-<name>"). Its readiness is not stored: ProviderReadiness
// computes the four columns as of a given time from this state and the
// state of its binding.
type Provider struct {
	Name         string
	Declared     bool
	Kind         string // KindLocal or KindConnected
	Profile      string
	Endpoint     string
	ModelTag     string
	Capabilities []string
	TaskClasses  []string
	Scope        string
	// BindingRequired is set by the declaration; the policy's
	// BindingRequiredProfiles can also require one.
	BindingRequired bool
	// Limits is nil until declared: unknown limits are never defaulted.
	Limits *ProviderLimits
	// Activated is true after ProviderActivated and until a redeclaration
	// changes what it serves or ProviderMadeDormant.
	Activated bool
	// BindingID and BindingIdentity are the binding named at activation.
	BindingID       string
	BindingIdentity string
	Dormant         bool
	DormantReason   string
	// Schedule is the standing probe schedule (schedule.go); nil when none
	// was ever approved.
	Schedule *ProbeSchedule
	// LastProbe is the newest signed models or smoke probe (the only kinds
	// that prove liveness): one an executor's signed probe measurement
	// derived (MeasurementID set). LastStatedProbe is the newest models or
	// smoke probe a writer stated (RecordProbe): shown, never proof.
	// LastDoctor is the newest doctor probe.
	LastProbe       *Probe
	LastStatedProbe *Probe
	LastDoctor      *Probe
	// Declaration, LimitsDeclared, Activation and Dormancy are the events
	// that prove each fact.
	Declaration, LimitsDeclared, Activation, Dormancy EventRef
	// Events is the number of events folded.
	Events int
}

// ProviderLimits are a provider's declared token limits.
type ProviderLimits struct {
	ContextTokens int `json:"context_tokens"`
	OutputTokens  int `json:"output_tokens"`
}

// Probe is one folded ProbeRecorded.
type Probe struct {
	ProbeRecorded
	Ref EventRef
}

// Provider kinds.
const (
	KindLocal     = "local"
	KindConnected = "connected"
)

// ProviderKind is a provider's kind: KindLocal or KindConnected.
type ProviderKind string

// Values lists the provider kinds.
func (ProviderKind) Values() []string { return []string{KindLocal, KindConnected} }

// ScopeDirectReplyOnly is the scope under which a configured chat endpoint
// is eligible for an attempt without being activation-ready.
const ScopeDirectReplyOnly = "direct_reply_only"

// Probe kinds and outcomes.
const (
	ProbeDoctor = "doctor"
	ProbeModels = "models"
	ProbeSmoke  = "smoke"

	ProbeOK          = "ok"
	ProbeFailed      = "failed"
	ProbeUnreachable = "unreachable"
	ProbeTimeout     = "timeout"
	// ProbeRefused: the executor's host policy refused the probe (issue
	// #20): nothing was dialled, so nothing is known of the runtime. Only
	// in a signed result whose outcome is refused_by_host, and in the
	// ProbeRecorded derived from it; readiness shows probe_refused, apart
	// from a runtime's failure. A writer states no refused probe.
	ProbeRefused = "refused"
)

// ProbeKind is the kind of a probe a writer records: doctor, models or
// smoke.
type ProbeKind string

// Values lists the probe kinds.
func (ProbeKind) Values() []string { return []string{ProbeDoctor, ProbeModels, ProbeSmoke} }

// LiveProbeKind is the kind of a probe that can prove liveness, the only
// kinds an executor runs: models or smoke.
type LiveProbeKind string

// Values lists the live probe kinds.
func (LiveProbeKind) Values() []string { return []string{ProbeModels, ProbeSmoke} }

// ProbeOutcome is how a probe a writer states ended: ok, failed,
// unreachable or timeout (never refused: only an executor's host policy
// refuses a probe).
type ProbeOutcome string

// Values lists the outcomes a writer may state.
func (ProbeOutcome) Values() []string {
	return []string{ProbeOK, ProbeFailed, ProbeUnreachable, ProbeTimeout}
}

// ReadingOutcome is how an executor's probe ended: a ProbeOutcome, or
// refused by its host policy.
type ReadingOutcome string

// Values lists the outcomes of an executor's probe.
func (ReadingOutcome) Values() []string {
	return []string{ProbeOK, ProbeFailed, ProbeUnreachable, ProbeTimeout, ProbeRefused}
}

// Provider event types.
const (
	TypeProviderDeclared       = "ProviderDeclared"
	TypeProviderLimitsDeclared = "ProviderLimitsDeclared"
	TypeProviderActivated      = "ProviderActivated"
	TypeProviderMadeDormant    = "ProviderMadeDormant"
	TypeProbeRecorded          = "ProbeRecorded"
)

// ProviderDeclared is the data of TypeProviderDeclared.
type ProviderDeclared struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name string `json:"name"`
	// Kind is local (a runtime on a host of this deployment) or connected
	// (a remote service or agent client).
	Kind string `json:"kind"`
	// Profile is the provider's profile (e.g. a local server or a connected
	// API), which decides what its activation requires.
	Profile string `json:"profile"`
	// Endpoint is the provider's base URL (probes GET <endpoint>/v1/models).
	Endpoint string `json:"endpoint"`
	// ModelTag is the exact model tag the provider serves (no alias).
	ModelTag string `json:"model_tag"`
	// Capabilities are what the provider can do (e.g. "code", "tools"),
	// matched by routing.
	Capabilities []string `json:"capabilities"`
	// TaskClasses are the task classes the provider serves.
	TaskClasses []string `json:"task_classes"`
	// Scope is where the provider runs: local or connected (remote).
	Scope string `json:"scope,omitempty"`
	// BindingRequired says the provider serves only under a verified binding
	// (a local model server's exact files).
	BindingRequired bool `json:"binding_required,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ProviderLimitsDeclared is the data of TypeProviderLimitsDeclared.
type ProviderLimitsDeclared struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name string `json:"name"`
	// ContextTokens is the model's context window, in tokens.
	ContextTokens int `json:"context_tokens"`
	// OutputTokens is the most tokens one generation may produce.
	OutputTokens int `json:"output_tokens"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ProviderActivated is the data of TypeProviderActivated.
type ProviderActivated struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name string `json:"name"`
	// ApprovalID is the activation approval spent.
	ApprovalID string `json:"approval_id"`
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID string `json:"binding_id,omitempty"`
	// BindingIdentity is the verified binding's identity ("sha256:" and 64
	// hex); empty when the provider needs no binding.
	BindingIdentity string `json:"binding_identity,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ProviderMadeDormant is the data of TypeProviderMadeDormant.
type ProviderMadeDormant struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name string `json:"name"`
	// Reason says why the provider was made dormant.
	Reason string `json:"reason"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// ProbeRecorded is the data of TypeProbeRecorded. ExpectedTag is the
// provider's configured model tag when the probe was recorded and
// ExactTagListed whether Models lists it exactly; both are grounds written
// by the decider, so evidence resolution needs no other state.
type ProbeRecorded struct {
	// Provider is the provider's name (its stream is provider-<name>).
	Provider string `json:"provider"`
	// Kind is the probe's kind: doctor, models or smoke.
	Kind string `json:"kind"`
	// Outcome is how the probe ended: ok, failed, unreachable or timeout,
	// or refused when the executor's host policy refused it (nothing was
	// dialled).
	Outcome string `json:"outcome"`
	// Models are the model tags the endpoint listed.
	Models []string `json:"models,omitempty"`
	// Latency is how long the probe's answer took (a Go duration).
	Latency Duration `json:"latency"`
	// ObservedBy is who observed it, as stated: a person, or the executor
	// that ran the probe (then checked: an executor principal acts only
	// for its own id).
	ObservedBy string `json:"observed_by"`
	// Principal is the authenticated principal that sent the command this
	// probe was recorded by ("anonymous" on a node without tokens): who
	// vouches for ObservedBy. Absent from probes recorded before issue #20.
	Principal string `json:"principal,omitempty"`
	// ObservedAt is when the probe was observed (RFC 3339).
	ObservedAt time.Time `json:"observed_at"`
	// ExpectedTag is the provider's declared model tag when the probe was
	// recorded.
	ExpectedTag string `json:"expected_tag"`
	// ExactTagListed says whether the endpoint listed exactly the expected tag
	// (no alias).
	ExactTagListed bool `json:"exact_tag_listed"`
	// MeasurementID names the signed probe measurement this probe was read
	// from, when an executor ran it (ObservedBy is then the executor). Only
	// such a probe proves anything (Signed).
	MeasurementID string `json:"measurement_id,omitempty"`
	// Stated marks a probe a writer stated (RecordProbe): recorded as
	// stated, it never makes a provider live nor counts as evidence.
	// (Probes stated before issue #20 carry neither this nor a
	// measurement_id, and prove nothing either.)
	Stated bool `json:"stated,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// Signed reports whether the probe was derived from an executor's signed
// probe measurement, in the same append that recorded the measurement
// after its signature verified: the only probes that prove liveness.
func (d *ProbeRecorded) Signed() bool { return d.MeasurementID != "" }

// Exists reports whether the provider stream has events.
func (p Provider) Exists() bool { return p.Events > 0 }

// Evolve folds one event of the provider stream.
func (p Provider) Evolve(e *events.Event) (Provider, error) {
	switch e.Type {
	case TypeProviderDeclared:
		var d ProviderDeclared
		if err := decodeData(e, &d); err != nil {
			return p, err
		}
		// A redeclaration that changes what is served (kind, profile,
		// endpoint, tag) ends the activation: the owner approved the old one.
		if p.Declared && (p.Kind != d.Kind || p.Profile != d.Profile || p.Endpoint != d.Endpoint || p.ModelTag != d.ModelTag) {
			p.Activated, p.BindingID, p.BindingIdentity, p.Activation = false, "", "", EventRef{}
		}
		p.Name, p.Declared, p.Kind, p.Profile, p.Endpoint, p.ModelTag = d.Name, true, d.Kind, d.Profile, d.Endpoint, d.ModelTag
		p.Capabilities, p.TaskClasses, p.Scope, p.BindingRequired = d.Capabilities, d.TaskClasses, d.Scope, d.BindingRequired
		p.Declaration = RefOf(e)
	case TypeProviderLimitsDeclared:
		var d ProviderLimitsDeclared
		if err := decodeData(e, &d); err != nil {
			return p, err
		}
		p.Limits = &ProviderLimits{ContextTokens: d.ContextTokens, OutputTokens: d.OutputTokens}
		p.LimitsDeclared = RefOf(e)
	case TypeProviderActivated:
		var d ProviderActivated
		if err := decodeData(e, &d); err != nil {
			return p, err
		}
		p.Activated, p.Dormant, p.DormantReason, p.Dormancy = true, false, "", EventRef{}
		p.BindingID, p.BindingIdentity = d.BindingID, d.BindingIdentity
		p.Activation = RefOf(e)
	case TypeProviderMadeDormant:
		var d ProviderMadeDormant
		if err := decodeData(e, &d); err != nil {
			return p, err
		}
		p.Dormant, p.DormantReason, p.Activated = true, d.Reason, false
		p.Dormancy = RefOf(e)
	case TypeProbeRecorded:
		var d ProbeRecorded
		if err := decodeData(e, &d); err != nil {
			return p, err
		}
		pr := &Probe{ProbeRecorded: d, Ref: RefOf(e)}
		switch {
		case d.Kind == ProbeDoctor:
			p.LastDoctor = pr
		case !d.Signed():
			p.LastStatedProbe = pr
		default:
			p.LastProbe = pr
			p = p.scheduledProbeRan(pr)
		}
	case TypeProbeScheduleApproved, TypeProbeScheduleEnded, TypeScheduledProbeRequested:
		return p.evolveSchedule(e)
	default:
		return p, foldError(e, ErrUnknownEventType)
	}
	p.Events++
	return p, nil
}

// Refusal codes of the Provider gates (readiness gates are in
// readiness.go).
const (
	// CodeProviderUnknown: no provider is declared under this name.
	CodeProviderUnknown = "provider_unknown"
	// CodeProbeTimeInvalid: a probe observed after the time it is recorded.
	CodeProbeTimeInvalid = "probe_time_invalid"
	// CodeBindingRequired: the provider's profile needs a verified binding
	// and activation named none.
	CodeBindingRequired = "binding_required"
	// CodeBindingNotVerified: the binding named is not verified.
	CodeBindingNotVerified = "binding_not_verified"
	// CodeBindingProviderMismatch: the binding was proposed for another
	// provider.
	CodeBindingProviderMismatch = "binding_provider_mismatch"
	// CodeBindingModelMismatch: the binding identifies another model tag;
	// an override never inherits another model's identity.
	CodeBindingModelMismatch = "binding_model_mismatch"
)

// DeclareProvider declares (or redeclares) a provider. Redeclaring the same
// configuration appends nothing; changing what is served ends activation.
type DeclareProvider struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name ID `json:"name"`
	// Kind is local (a runtime on a host of this deployment) or connected
	// (a remote service or agent client).
	Kind ProviderKind `json:"kind"`
	// Profile is the provider's profile (e.g. a local server or a connected
	// API), which decides what its activation requires.
	Profile ShortText `json:"profile"`
	// Endpoint is the provider's base URL (probes GET <endpoint>/v1/models).
	Endpoint OptionalLongText `json:"endpoint"`
	// ModelTag is the exact model tag the provider serves (no alias).
	ModelTag OptionalShortText `json:"model_tag"`
	// Capabilities are what the provider can do (e.g. "code", "tools"),
	// matched by routing.
	Capabilities ShortTexts `json:"capabilities"`
	// TaskClasses are the task classes the provider serves.
	TaskClasses ShortTexts `json:"task_classes"`
	// Scope is where the provider runs: local or connected (remote).
	Scope OptionalShortText `json:"scope"`
	// BindingRequired says the provider serves only under a verified binding
	// (a local model server's exact files).
	BindingRequired bool `json:"binding_required" jsonschema:"optional"`
}

// CommandName implements Command.
func (*DeclareProvider) CommandName() string { return "DeclareProvider" }

// Streams implements Command: the streams this command reads.
func (c *DeclareProvider) Streams(States) []string { return []string{ProviderStream(c.Name)} }

// Decide implements Command: the gates.
func (c *DeclareProvider) Decide(in Inputs) ([]NewEvent, error) {
	p := in.States.Provider(string(c.Name))
	d := ProviderDeclared{Name: string(c.Name), Kind: string(c.Kind), Profile: string(c.Profile), Endpoint: string(c.Endpoint),
		ModelTag: string(c.ModelTag), Capabilities: c.Capabilities, TaskClasses: c.TaskClasses, Scope: string(c.Scope),
		BindingRequired: c.BindingRequired, At: in.At}
	if p.Declared && p.Kind == d.Kind && p.Profile == d.Profile && p.Endpoint == d.Endpoint && p.ModelTag == d.ModelTag &&
		slices.Equal(p.Capabilities, d.Capabilities) && slices.Equal(p.TaskClasses, d.TaskClasses) &&
		p.Scope == d.Scope && p.BindingRequired == d.BindingRequired {
		return nil, nil
	}
	return []NewEvent{{Stream: ProviderStream(c.Name), Type: TypeProviderDeclared, Data: d}}, nil
}

// DeclareProviderLimits declares a provider's token limits. Declaring the
// same limits again appends nothing.
type DeclareProviderLimits struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name ID `json:"name"`
	// ContextTokens is the model's context window, in tokens.
	ContextTokens TokenLimit `json:"context_tokens"`
	// OutputTokens is the most tokens one generation may produce.
	OutputTokens TokenLimit `json:"output_tokens"`
}

// CommandName implements Command.
func (*DeclareProviderLimits) CommandName() string { return "DeclareProviderLimits" }

// Validate implements crossFieldRules: the output fits the context.
func (c *DeclareProviderLimits) Validate() error {
	if c.OutputTokens > c.ContextTokens {
		return invalid("output_tokens", "is %d; must be positive and at most context_tokens (%d)", c.OutputTokens, c.ContextTokens)
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *DeclareProviderLimits) Streams(States) []string { return []string{ProviderStream(c.Name)} }

// Decide implements Command: the gates.
func (c *DeclareProviderLimits) Decide(in Inputs) ([]NewEvent, error) {
	p := in.States.Provider(string(c.Name))
	if !p.Declared {
		return nil, providerUnknown(string(c.Name))
	}
	if p.Limits != nil && *p.Limits == (ProviderLimits{ContextTokens: int(c.ContextTokens), OutputTokens: int(c.OutputTokens)}) {
		return nil, nil
	}
	return []NewEvent{{Stream: ProviderStream(c.Name), Type: TypeProviderLimitsDeclared, Data: ProviderLimitsDeclared{
		Name: string(c.Name), ContextTokens: int(c.ContextTokens), OutputTokens: int(c.OutputTokens), At: in.At,
	}}}, nil
}

func providerUnknown(name string) *Refusal {
	return refuse(CodeProviderUnknown, map[string]any{"provider": name}, "no provider is declared under the name %q", name)
}

// ActivateProvider activates a configured provider under an "activation"
// approval for subject "provider-<name>", naming the verified binding when
// its profile requires one. Activating an active provider with the same
// binding appends nothing and spends no approval.
type ActivateProvider struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name ID `json:"name"`
	// ApprovalID is the activation approval to spend (action activation,
	// subject provider-<name>); a gate refuses when it is missing.
	ApprovalID OptionalID `json:"approval_id"`
	// BindingID is the verified binding the provider serves under; required
	// when its profile requires a binding.
	BindingID OptionalID `json:"binding_id"`
}

// CommandName implements Command.
func (*ActivateProvider) CommandName() string { return "ActivateProvider" }

// Streams implements Command: the streams this command reads.
func (c *ActivateProvider) Streams(States) []string {
	s := []string{ProviderStream(c.Name)}
	if c.ApprovalID != "" {
		s = append(s, ApprovalStream(c.ApprovalID))
	}
	if c.BindingID != "" {
		s = append(s, BindingStream(c.BindingID))
	}
	return s
}

// Decide implements Command: the gates.
func (c *ActivateProvider) Decide(in Inputs) ([]NewEvent, error) {
	p := in.States.Provider(string(c.Name))
	if !p.Declared {
		return nil, providerUnknown(string(c.Name))
	}
	if p.Activated && !p.Dormant && p.BindingID == string(c.BindingID) {
		return nil, nil
	}
	if f := configurationFact(p); !f.Ready {
		return nil, factRefusal(p.Name, "configuration_ready", f)
	}
	var identity string
	if c.BindingID == "" {
		if p.BindingRequired || in.Policy.BindingRequired(p.Profile) {
			return nil, refuse(CodeBindingRequired, map[string]any{"provider": p.Name, "profile": p.Profile},
				"provider %s (profile %s) needs a verified model binding to be activated", p.Name, p.Profile)
		}
	} else {
		b := in.States.Binding(string(c.BindingID))
		if f := bindingFact(p, b); !f.Ready {
			return nil, factRefusal(p.Name, "binding", f)
		}
		identity = b.Identity
	}
	consume, err := in.States.Approval(string(c.ApprovalID)).Authorize(ActionActivation, ProviderStream(c.Name), c.CommandName(), in.At)
	if err != nil {
		return nil, err
	}
	return []NewEvent{
		{Stream: ProviderStream(c.Name), Type: TypeProviderActivated, Data: ProviderActivated{
			Name: string(c.Name), ApprovalID: string(c.ApprovalID), BindingID: string(c.BindingID), BindingIdentity: identity, At: in.At,
		}},
		consume,
	}, nil
}

// MakeProviderDormant makes a provider dormant: readable by name, never
// selected by routing. Making a dormant provider dormant appends nothing.
type MakeProviderDormant struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name ID `json:"name"`
	// Reason says why the provider is made dormant.
	Reason LongText `json:"reason"`
}

// CommandName implements Command.
func (*MakeProviderDormant) CommandName() string { return "MakeProviderDormant" }

// Streams implements Command: the streams this command reads.
func (c *MakeProviderDormant) Streams(States) []string { return []string{ProviderStream(c.Name)} }

// Decide implements Command: the gates.
func (c *MakeProviderDormant) Decide(in Inputs) ([]NewEvent, error) {
	p := in.States.Provider(string(c.Name))
	if !p.Declared {
		return nil, providerUnknown(string(c.Name))
	}
	if p.Dormant {
		return nil, nil
	}
	return []NewEvent{{Stream: ProviderStream(c.Name), Type: TypeProviderMadeDormant, Data: ProviderMadeDormant{
		Name: string(c.Name), Reason: string(c.Reason), At: in.At,
	}}}, nil
}

// RecordProbe records a doctor, models or smoke probe of a provider as a
// writer states it: the ProbeRecorded is marked stated and proves nothing
// (issue #20): a provider is live only by an executor's signed probe
// measurement (RequestMeasurement of kind probe, or a probe schedule).
// ObservedAt defaults to the command's time and may not be after it.
type RecordProbe struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name ID `json:"name"`
	// Kind is the probe's kind: doctor, models or smoke.
	Kind ProbeKind `json:"kind"`
	// Outcome is how the probe ended: ok, failed, unreachable or timeout.
	Outcome ProbeOutcome `json:"outcome"`
	// Models are the model tags the endpoint listed.
	Models ModelTags `json:"models"`
	// Latency is how long the probe's answer took (a Go duration).
	Latency NonNegativeDuration `json:"latency"`
	// ObservedBy is who observed it, as stated (recorded, not trusted).
	ObservedBy ShortText `json:"observed_by"`
	// ObservedAt is when the probe was observed (RFC 3339).
	ObservedAt time.Time `json:"observed_at" jsonschema:"optional"`
}

// CommandName implements Command.
func (*RecordProbe) CommandName() string { return "RecordProbe" }

// Streams implements Command: the streams this command reads.
func (c *RecordProbe) Streams(States) []string { return []string{ProviderStream(c.Name)} }

// Decide implements Command: the gates.
func (c *RecordProbe) Decide(in Inputs) ([]NewEvent, error) {
	p := in.States.Provider(string(c.Name))
	if !p.Declared {
		return nil, providerUnknown(string(c.Name))
	}
	observed := c.ObservedAt
	if observed.IsZero() {
		observed = in.At
	}
	if observed.After(in.At) {
		return nil, refuse(CodeProbeTimeInvalid, map[string]any{"observed_at": observed, "at": in.At},
			"the probe says it was observed at %s, after it was received", observed.UTC().Format(time.RFC3339Nano))
	}
	return []NewEvent{{Stream: ProviderStream(c.Name), Type: TypeProbeRecorded, Data: ProbeRecorded{
		Provider: string(c.Name), Kind: string(c.Kind), Outcome: string(c.Outcome), Models: c.Models, Latency: Duration(c.Latency),
		ObservedBy: string(c.ObservedBy), Principal: in.Principal.Name, ObservedAt: observed.UTC(), ExpectedTag: p.ModelTag,
		ExactTagListed: p.ModelTag != "" && slices.Contains(c.Models, p.ModelTag), Stated: true, At: in.At,
	}}}, nil
}

// isAlias reports whether listed looks like another name for tag without
// being it: equal ignoring case, or equal once a ":variant" suffix or a
// "namespace/" prefix is dropped from either side. It only refines the
// reason a probe does not prove liveness; it never makes a probe count.
func isAlias(listed, tag string) bool {
	if listed == tag {
		return false
	}
	norm := func(s string) string {
		s = strings.ToLower(s)
		if i := strings.LastIndex(s, "/"); i >= 0 {
			s = s[i+1:]
		}
		s, _, _ = strings.Cut(s, ":")
		return s
	}
	return norm(listed) == norm(tag)
}
