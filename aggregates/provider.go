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
	Name string `json:"name" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// Kind is local (a runtime on a host of this deployment) or connected
	// (a remote service or agent client).
	Kind string `json:"kind" jsonschema:"enum=local,enum=connected"`
	// Profile is the provider's profile (e.g. a local server or a connected
	// API), which decides what its activation requires.
	Profile string `json:"profile" jsonschema:"minLength=1,maxLength=256,pattern=\\S"`
	// Endpoint is the provider's base URL (probes GET <endpoint>/v1/models).
	Endpoint string `json:"endpoint" jsonschema:"maxLength=4096,optional"`
	// ModelTag is the exact model tag the provider serves (no alias).
	ModelTag string `json:"model_tag" jsonschema:"maxLength=256,optional"`
	// Capabilities are what the provider can do (e.g. "code", "tools"),
	// matched by routing.
	Capabilities []string `json:"capabilities" jsonschema:"maxItems=256,uniqueItems=true,optional,minLength=1,maxLength=256,pattern=\\S"`
	// TaskClasses are the task classes the provider serves.
	TaskClasses []string `json:"task_classes" jsonschema:"maxItems=256,uniqueItems=true,optional,minLength=1,maxLength=256,pattern=\\S"`
	// Scope is where the provider runs: local or connected (remote).
	Scope string `json:"scope" jsonschema:"maxLength=256,optional"`
	// BindingRequired says the provider serves only under a verified binding
	// (a local model server's exact files).
	BindingRequired bool `json:"binding_required" jsonschema:"optional"`
}

// CommandName implements Command.
func (*DeclareProvider) CommandName() string { return "DeclareProvider" }

// Validate implements Command: the shape checks, field by field.
func (c *DeclareProvider) Validate() error {
	if err := checkID("name", c.Name); err != nil {
		return err
	}
	if err := checkOneOf("kind", c.Kind, KindLocal, KindConnected); err != nil {
		return err
	}
	if err := checkText("profile", c.Profile, true, maxShortText); err != nil {
		return err
	}
	if err := checkText("endpoint", c.Endpoint, false, maxLongText); err != nil {
		return err
	}
	if err := checkText("model_tag", c.ModelTag, false, maxShortText); err != nil {
		return err
	}
	if err := checkList("capabilities", c.Capabilities); err != nil {
		return err
	}
	if err := checkList("task_classes", c.TaskClasses); err != nil {
		return err
	}
	return checkText("scope", c.Scope, false, maxShortText)
}

// Streams implements Command: the streams this command reads.
func (c *DeclareProvider) Streams(States) []string { return []string{ProviderStream(c.Name)} }

// Decide implements Command: the gates.
func (c *DeclareProvider) Decide(in Inputs) ([]NewEvent, error) {
	p := in.States.Provider(c.Name)
	d := ProviderDeclared{Name: c.Name, Kind: c.Kind, Profile: c.Profile, Endpoint: c.Endpoint, ModelTag: c.ModelTag,
		Capabilities: c.Capabilities, TaskClasses: c.TaskClasses, Scope: c.Scope, BindingRequired: c.BindingRequired, At: in.At}
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
	Name string `json:"name" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// ContextTokens is the model's context window, in tokens.
	ContextTokens int `json:"context_tokens" jsonschema:"minimum=1"`
	// OutputTokens is the most tokens one generation may produce.
	OutputTokens int `json:"output_tokens" jsonschema:"minimum=1"`
}

// CommandName implements Command.
func (*DeclareProviderLimits) CommandName() string { return "DeclareProviderLimits" }

// Validate implements Command: the shape checks, field by field.
func (c *DeclareProviderLimits) Validate() error {
	if err := checkID("name", c.Name); err != nil {
		return err
	}
	if c.ContextTokens <= 0 {
		return invalid("context_tokens", "is %d; must be positive", c.ContextTokens)
	}
	if c.OutputTokens <= 0 || c.OutputTokens > c.ContextTokens {
		return invalid("output_tokens", "is %d; must be positive and at most context_tokens (%d)", c.OutputTokens, c.ContextTokens)
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *DeclareProviderLimits) Streams(States) []string { return []string{ProviderStream(c.Name)} }

// Decide implements Command: the gates.
func (c *DeclareProviderLimits) Decide(in Inputs) ([]NewEvent, error) {
	p := in.States.Provider(c.Name)
	if !p.Declared {
		return nil, providerUnknown(c.Name)
	}
	if p.Limits != nil && *p.Limits == (ProviderLimits{ContextTokens: c.ContextTokens, OutputTokens: c.OutputTokens}) {
		return nil, nil
	}
	return []NewEvent{{Stream: ProviderStream(c.Name), Type: TypeProviderLimitsDeclared, Data: ProviderLimitsDeclared{
		Name: c.Name, ContextTokens: c.ContextTokens, OutputTokens: c.OutputTokens, At: in.At,
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
	Name string `json:"name" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// ApprovalID is the activation approval to spend (action activation,
	// subject provider-<name>); a gate refuses when it is missing.
	ApprovalID string `json:"approval_id" jsonschema:"maxLength=128,pattern=^(\\S+)?$,optional"`
	// BindingID is the verified binding the provider serves under; required
	// when its profile requires a binding.
	BindingID string `json:"binding_id" jsonschema:"maxLength=128,pattern=^(\\S+)?$,optional"`
}

// CommandName implements Command.
func (*ActivateProvider) CommandName() string { return "ActivateProvider" }

// Validate implements Command: the shape checks, field by field.
func (c *ActivateProvider) Validate() error {
	if err := checkID("name", c.Name); err != nil {
		return err
	}
	if c.ApprovalID != "" {
		if err := checkID("approval_id", c.ApprovalID); err != nil {
			return err
		}
	}
	if c.BindingID != "" {
		return checkID("binding_id", c.BindingID)
	}
	return nil
}

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
	p := in.States.Provider(c.Name)
	if !p.Declared {
		return nil, providerUnknown(c.Name)
	}
	if p.Activated && !p.Dormant && p.BindingID == c.BindingID {
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
		b := in.States.Binding(c.BindingID)
		if f := bindingFact(p, b); !f.Ready {
			return nil, factRefusal(p.Name, "binding", f)
		}
		identity = b.Identity
	}
	consume, err := in.States.Approval(c.ApprovalID).Authorize(ActionActivation, ProviderStream(c.Name), c.CommandName(), in.At)
	if err != nil {
		return nil, err
	}
	return []NewEvent{
		{Stream: ProviderStream(c.Name), Type: TypeProviderActivated, Data: ProviderActivated{
			Name: c.Name, ApprovalID: c.ApprovalID, BindingID: c.BindingID, BindingIdentity: identity, At: in.At,
		}},
		consume,
	}, nil
}

// MakeProviderDormant makes a provider dormant: readable by name, never
// selected by routing. Making a dormant provider dormant appends nothing.
type MakeProviderDormant struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name string `json:"name" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// Reason says why the provider is made dormant.
	Reason string `json:"reason" jsonschema:"minLength=1,maxLength=4096,pattern=\\S"`
}

// CommandName implements Command.
func (*MakeProviderDormant) CommandName() string { return "MakeProviderDormant" }

// Validate implements Command: the shape checks, field by field.
func (c *MakeProviderDormant) Validate() error {
	if err := checkID("name", c.Name); err != nil {
		return err
	}
	return checkText("reason", c.Reason, true, maxLongText)
}

// Streams implements Command: the streams this command reads.
func (c *MakeProviderDormant) Streams(States) []string { return []string{ProviderStream(c.Name)} }

// Decide implements Command: the gates.
func (c *MakeProviderDormant) Decide(in Inputs) ([]NewEvent, error) {
	p := in.States.Provider(c.Name)
	if !p.Declared {
		return nil, providerUnknown(c.Name)
	}
	if p.Dormant {
		return nil, nil
	}
	return []NewEvent{{Stream: ProviderStream(c.Name), Type: TypeProviderMadeDormant, Data: ProviderMadeDormant{
		Name: c.Name, Reason: c.Reason, At: in.At,
	}}}, nil
}

// RecordProbe records a doctor, models or smoke probe of a provider as a
// writer states it: the ProbeRecorded is marked stated and proves nothing
// (issue #20): a provider is live only by an executor's signed probe
// measurement (RequestMeasurement of kind probe, or a probe schedule).
// ObservedAt defaults to the command's time and may not be after it.
type RecordProbe struct {
	// Name is the provider's name (its stream is provider-<name>).
	Name string `json:"name" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// Kind is the probe's kind: doctor, models or smoke.
	Kind string `json:"kind" jsonschema:"enum=doctor,enum=models,enum=smoke"`
	// Outcome is how the probe ended: ok, failed, unreachable or timeout.
	Outcome string `json:"outcome" jsonschema:"enum=ok,enum=failed,enum=unreachable,enum=timeout"`
	// Models are the model tags the endpoint listed.
	Models []string `json:"models" jsonschema:"optional,maxItems=1024,minLength=1,maxLength=256,pattern=\\S"`
	// Latency is how long the probe's answer took (a Go duration).
	Latency Duration `json:"latency" jsonschema:"optional"`
	// ObservedBy is who observed it, as stated (recorded, not trusted).
	ObservedBy string `json:"observed_by" jsonschema:"minLength=1,maxLength=256,pattern=\\S"`
	// ObservedAt is when the probe was observed (RFC 3339).
	ObservedAt time.Time `json:"observed_at" jsonschema:"optional"`
}

// CommandName implements Command.
func (*RecordProbe) CommandName() string { return "RecordProbe" }

// Validate implements Command: the shape checks, field by field.
func (c *RecordProbe) Validate() error {
	if err := checkID("name", c.Name); err != nil {
		return err
	}
	if err := checkOneOf("kind", c.Kind, ProbeDoctor, ProbeModels, ProbeSmoke); err != nil {
		return err
	}
	if err := checkOneOf("outcome", c.Outcome, ProbeOK, ProbeFailed, ProbeUnreachable, ProbeTimeout); err != nil {
		return err
	}
	if len(c.Models) > 4*maxListLen {
		return invalid("models", "has %d entries; the limit is %d", len(c.Models), 4*maxListLen)
	}
	for i, m := range c.Models {
		if err := checkText(indexPath("models", i), m, true, maxShortText); err != nil {
			return err
		}
	}
	if c.Latency.Duration < 0 {
		return invalid("latency", "is %s; must be >= 0", c.Latency)
	}
	return checkText("observed_by", c.ObservedBy, true, maxShortText)
}

// Streams implements Command: the streams this command reads.
func (c *RecordProbe) Streams(States) []string { return []string{ProviderStream(c.Name)} }

// Decide implements Command: the gates.
func (c *RecordProbe) Decide(in Inputs) ([]NewEvent, error) {
	p := in.States.Provider(c.Name)
	if !p.Declared {
		return nil, providerUnknown(c.Name)
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
		Provider: c.Name, Kind: c.Kind, Outcome: c.Outcome, Models: c.Models, Latency: c.Latency,
		ObservedBy: c.ObservedBy, Principal: in.Principal.Name, ObservedAt: observed.UTC(), ExpectedTag: p.ModelTag,
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
