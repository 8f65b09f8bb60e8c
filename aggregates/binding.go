package aggregates

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/greffe/greffe/events"
)

// Binding is the state of one model binding (stream "binding-<id>"): the
// identity of what actually serves a provider's model.
//
// Artifacts are hashed on the binding's own stream (ArtifactHashed), before
// or after the proposal. Verification recomputes the identity and checks
// every proposed artifact against the newest hash of its path, which must
// be signed: read by an executor's hash measurement (issue #20; a hash a
// writer records, whatever verifier it names, is stated and verifies
// nothing). Once verified, any later hash of a bound path with
// another size, mtime or sha256 invalidates the binding in the same append;
// an invalidated or rejected binding is never verified again: a runtime
// restart, or any change, needs a fresh binding under a new id.
type Binding struct {
	ID             string
	Proposed       bool
	Provider       string
	ModelTag       string
	Family         string
	ConfigSHA256   string
	SourceCommit   string
	TemplateSHA256 string
	ContextTokens  int
	ModelMetadata  map[string]string
	Artifacts      []BindingArtifact
	// ClaimedIdentity is the identity the proposal stated.
	ClaimedIdentity string
	// Hashes is the newest ArtifactHashed per path.
	Hashes map[string]ArtifactHashed
	// Verified is true once BindingVerified was folded; Identity is then
	// the recomputed identity and VerifiedHashes the hashes it relied on.
	Verified       bool
	Identity       string
	VerifiedHashes map[string]ArtifactHashed
	Rejected       bool
	Invalidated    bool
	InvalidReason  string
	// Proposal, Verification, Rejection and Invalidation are the events that
	// prove each fact.
	Proposal, Verification, Rejection, Invalidation EventRef
	// Events is the number of events folded.
	Events int
}

// Exists reports whether the binding stream has events.
func (b Binding) Exists() bool { return b.Events > 0 }

// Usable reports whether the binding is verified and neither rejected nor
// invalidated.
func (b Binding) Usable() bool { return b.Verified && !b.Invalidated && !b.Rejected }

// Artifact roles (DOMAIN.md). The first five are required for verification.
const (
	RoleWeights   = "weights"
	RoleEngine    = "engine"
	RoleServer    = "server"
	RoleTokenizer = "tokenizer"
	RoleTemplate  = "template"
	RoleConfig    = "config"
	RoleSource    = "source"
)

// ArtifactRole is an artifact's role in a binding: one of the Role…
// constants.
type ArtifactRole string

// Values lists the artifact roles.
func (ArtifactRole) Values() []string {
	return []string{RoleWeights, RoleEngine, RoleServer, RoleTokenizer, RoleTemplate, RoleConfig, RoleSource}
}

// requiredRoles must each appear at least once among a binding's
// artifacts.
var requiredRoles = []string{RoleWeights, RoleEngine, RoleServer, RoleTokenizer, RoleTemplate}

// RequiredRoles returns the roles a binding needs to be verified.
func RequiredRoles() []string { return slices.Clone(requiredRoles) }

// Verifier roles of an ArtifactHashed, as stated. Only a signed hash (an
// executor's hash measurement, whose role is supervisor) verifies.
const (
	VerifierSupervisor = "supervisor"
	VerifierWorker     = "worker"
	VerifierOperator   = "operator"
)

// VerifierRole is the stated role of who hashed an artifact.
type VerifierRole string

// Values lists the verifier roles.
func (VerifierRole) Values() []string {
	return []string{VerifierSupervisor, VerifierWorker, VerifierOperator}
}

// BindingArtifacts are a binding's artifacts: 1 to 256, each path listed
// once, in the order that enters the identity.
type BindingArtifacts []BindingArtifact

func (l BindingArtifacts) check(path string) error {
	if len(l) == 0 || len(l) > maxListLen {
		return invalid(path, "has %d entries; a binding lists 1 to %d artifacts", len(l), maxListLen)
	}
	return checkStructs(path, l, "path", func(a BindingArtifact) LongText { return a.Path },
		func(a BindingArtifact) string { return strconv.Quote(string(a.Path)) })
}
func (BindingArtifacts) jsonSchema() map[string]any {
	return structListSchema("BindingArtifact", 1, maxListLen, false)
}

// BindingArtifact is one artifact of a binding, in the order that enters
// the identity.
type BindingArtifact struct {
	// Path is the artifact's absolute path on the host.
	Path LongText `json:"path"`
	// Size is the file's size, in bytes.
	Size Size `json:"size"`
	// SHA256 is the file's content hash: 64 lowercase hex characters, as
	// sha256sum prints it.
	SHA256 Hex64 `json:"sha256"`
	// Role is the artifact's role in the binding: weights, engine, server,
	// tokenizer, template, config or source.
	Role ArtifactRole `json:"role"`
}

// Binding event types.
const (
	TypeArtifactHashed     = "ArtifactHashed"
	TypeBindingProposed    = "BindingProposed"
	TypeBindingVerified    = "BindingVerified"
	TypeBindingRejected    = "BindingRejected"
	TypeBindingInvalidated = "BindingInvalidated"
)

// ArtifactHashed is the data of TypeArtifactHashed. Size is in bytes,
// MtimeNS in nanoseconds since the Unix epoch.
type ArtifactHashed struct {
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID string `json:"binding_id"`
	// Path is the artifact's absolute path on the host.
	Path string `json:"path"`
	// Size is the file's size, in bytes.
	Size int64 `json:"size"`
	// MtimeNS is the file's modification time, in nanoseconds since the Unix
	// epoch.
	MtimeNS int64 `json:"mtime_ns"`
	// SHA256 is the file's content hash: 64 lowercase hex characters, as
	// sha256sum prints it.
	SHA256 string `json:"sha256"`
	// Role is the artifact's role in the binding: weights, engine, server,
	// tokenizer, template, config or source.
	Role string `json:"role"`
	// VerifiedBy is who verified it, as stated: an accountable person or
	// role, or the executor that read it (then checked: an executor
	// principal acts only for its own id).
	VerifiedBy string `json:"verified_by"`
	// Principal is the authenticated principal that sent the command this
	// hash was recorded by ("anonymous" on a node without tokens): who
	// vouches for VerifiedBy. Absent from hashes recorded before issue #20.
	Principal string `json:"principal,omitempty"`
	// VerifierRole is the role of who hashed it: supervisor, worker or
	// operator (only a supervisor's hash verifies a binding).
	VerifierRole string `json:"verifier_role"`
	// MeasurementID names the signed hash measurement this hash was read
	// from, when an executor read it (VerifiedBy is then the executor).
	// Only such a hash verifies a binding (Signed).
	MeasurementID string `json:"measurement_id,omitempty"`
	// Stated marks a hash a writer recorded (RecordArtifactHash): kept, and
	// a changed stated hash still invalidates a verified binding (fail
	// closed), but it never verifies one. (Hashes recorded before issue
	// #20 carry neither this nor a measurement_id, and verify nothing
	// either.)
	Stated bool `json:"stated,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// Signed reports whether the hash was read by an executor's signed hash
// measurement, recorded in the same append after its signature verified.
func (d *ArtifactHashed) Signed() bool { return d.MeasurementID != "" }

// BindingProposed is the data of TypeBindingProposed.
type BindingProposed struct {
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID string `json:"binding_id"`
	// Provider is the provider's name (its stream is provider-<name>).
	Provider string `json:"provider"`
	// ModelTag is the exact model tag the provider serves (no alias).
	ModelTag string `json:"model_tag"`
	// Family is the model's family (e.g. "glm").
	Family string `json:"family"`
	// ConfigSHA256 is the hex SHA-256 of the server's configuration; empty
	// when it has none.
	ConfigSHA256 string `json:"config_sha256"`
	// SourceCommit is the commit of the server's or engine's source that was
	// built; empty when not built from source.
	SourceCommit string `json:"source_commit"`
	// TemplateSHA256 is the hex SHA-256 of the chat template in use.
	TemplateSHA256 string `json:"template_sha256"`
	// ContextTokens is the model's context window, in tokens.
	ContextTokens int `json:"context_tokens"`
	// ModelMetadata are other facts about the model (quantisation,
	// parameters), as key-value strings; part of the identity, sorted by key.
	ModelMetadata map[string]string `json:"model_metadata"`
	// Artifacts are the binding's files, each with its path, size, content
	// hash and role.
	Artifacts BindingArtifacts `json:"artifacts"`
	// Identity is the binding's identity: "sha256:" and the hex SHA-256 of its
	// canonical JSON (docs/DOMAIN.md; greffe digest binding).
	Identity string `json:"identity"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// BindingVerified is the data of TypeBindingVerified.
type BindingVerified struct {
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID string `json:"binding_id"`
	// Identity is the identity verified (the proposal's).
	Identity string `json:"identity"`
	// VerifiedBy is who verified it, as the command stated it: an
	// accountable person or role. A statement, recorded, never checked:
	// what verifies a binding is its artifacts' signed hashes.
	VerifiedBy string `json:"verified_by"`
	// Principal is the authenticated principal that sent VerifyBinding
	// ("anonymous" on a node without tokens); absent from verifications
	// recorded before issue #20.
	Principal string `json:"principal,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// BindingRejected is the data of TypeBindingRejected.
type BindingRejected struct {
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID string `json:"binding_id"`
	// Reason says why the binding was rejected.
	Reason string `json:"reason"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// BindingInvalidated is the data of TypeBindingInvalidated. For an artifact
// change, Path, Was and Now say what changed.
type BindingInvalidated struct {
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID string `json:"binding_id"`
	// Reason says why the binding stopped holding (a new hash of one of its
	// files differs).
	Reason string `json:"reason"`
	// Path is the artifact whose hash changed; empty when invalidated by hand.
	Path string `json:"path,omitempty"`
	// Was is the hash the binding was verified with; absent when invalidated
	// by hand.
	Was *ArtifactHashed `json:"was,omitempty"`
	// Now is the new hash that differs; absent when invalidated by hand.
	Now *ArtifactHashed `json:"now,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// Invalidation reasons written by the decider itself.
const (
	InvalidatedArtifactChanged = "artifact_changed"
	InvalidatedRuntimeRestart  = "runtime_restart"
)

// identityContent returns what a binding's identity covers
// (events.BindingIdentity) from its fields.
func identityContent(configSHA256, sourceCommit, templateSHA256 string, metadata map[string]string, artifacts []BindingArtifact) events.BindingContent {
	c := events.BindingContent{ConfigSHA256: configSHA256, SourceCommit: sourceCommit, TemplateSHA256: templateSHA256, ModelMetadata: metadata}
	if artifacts != nil {
		c.Artifacts = make([]events.BindingArtifact, len(artifacts))
		for i, a := range artifacts {
			c.Artifacts[i] = events.BindingArtifact{Path: string(a.Path), Size: int64(a.Size), SHA256: string(a.SHA256), Role: string(a.Role)}
		}
	}
	return c
}

// BindingContent returns what the proposed binding's identity covers:
// events.BindingIdentity of it is the Identity the proposal must carry.
func (c *ProposeBinding) BindingContent() events.BindingContent {
	return identityContent(string(c.ConfigSHA256), string(c.SourceCommit), string(c.TemplateSHA256), c.ModelMetadata, c.Artifacts)
}

// Evolve folds one event of the binding stream.
func (b Binding) Evolve(e *events.Event) (Binding, error) {
	switch e.Type {
	case TypeArtifactHashed:
		var d ArtifactHashed
		if err := decodeData(e, &d); err != nil {
			return b, err
		}
		b.ID = d.BindingID
		hashes := maps.Clone(b.Hashes)
		if hashes == nil {
			hashes = map[string]ArtifactHashed{}
		}
		hashes[d.Path] = d
		b.Hashes = hashes
	case TypeBindingProposed:
		var d BindingProposed
		if err := decodeData(e, &d); err != nil {
			return b, err
		}
		b.ID, b.Proposed, b.Provider, b.ModelTag, b.Family = d.BindingID, true, d.Provider, d.ModelTag, d.Family
		b.ConfigSHA256, b.SourceCommit, b.TemplateSHA256 = d.ConfigSHA256, d.SourceCommit, d.TemplateSHA256
		b.ContextTokens, b.ModelMetadata, b.Artifacts, b.ClaimedIdentity = d.ContextTokens, d.ModelMetadata, d.Artifacts, d.Identity
		b.Proposal = RefOf(e)
	case TypeBindingVerified:
		var d BindingVerified
		if err := decodeData(e, &d); err != nil {
			return b, err
		}
		b.Verified, b.Identity = true, d.Identity
		bound := make(map[string]ArtifactHashed, len(b.Artifacts))
		for _, a := range b.Artifacts {
			if h, ok := b.Hashes[string(a.Path)]; ok {
				bound[string(a.Path)] = h
			}
		}
		b.VerifiedHashes = bound
		b.Verification = RefOf(e)
	case TypeBindingRejected:
		var d BindingRejected
		if err := decodeData(e, &d); err != nil {
			return b, err
		}
		b.Rejected = true
		b.Rejection = RefOf(e)
	case TypeBindingInvalidated:
		var d BindingInvalidated
		if err := decodeData(e, &d); err != nil {
			return b, err
		}
		b.Invalidated, b.InvalidReason = true, d.Reason
		b.Invalidation = RefOf(e)
	default:
		return b, foldError(e, ErrUnknownEventType)
	}
	b.Events++
	return b, nil
}

// Refusal codes of the ModelBinding gates.
const (
	// CodeBindingExists: a binding id is proposed once; a change is a new
	// binding.
	CodeBindingExists = "binding_exists"
	// CodeBindingUnknown: no proposal under this binding id.
	CodeBindingUnknown = "binding_unknown"
	// CodeBindingRoleMissing: a required artifact role (weights, engine,
	// server, tokenizer, template) is absent.
	CodeBindingRoleMissing = "binding_role_missing"
	// CodeArtifactNotVerified: an artifact's newest hash is absent or not
	// signed (an executor's hash measurement's).
	CodeArtifactNotVerified = "artifact_not_verified"
	// CodeArtifactMismatch: the supervisor's hash of an artifact differs
	// from the size or sha256 the binding proposes.
	CodeArtifactMismatch = "artifact_mismatch"
	// CodeIdentityMismatch: the proposed identity does not recompute from
	// the binding's fields.
	CodeIdentityMismatch = "identity_mismatch"
	// CodeBindingRejected: the binding was rejected.
	CodeBindingRejected = "binding_rejected"
	// CodeBindingInvalidated: the binding was invalidated (an artifact
	// changed, the runtime restarted); propose a fresh one.
	CodeBindingInvalidated = "binding_invalidated"
	// CodeBindingAlreadyVerified: a verified binding cannot be rejected;
	// invalidate it instead.
	CodeBindingAlreadyVerified = "binding_already_verified"
)

// RecordArtifactHash records a hash of one artifact file as a writer
// states it: marked stated, it verifies no binding (issue #20); a binding
// is verified on an executor's signed hash measurement (RequestMeasurement
// of kind hash).
type RecordArtifactHash struct {
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID ID `json:"binding_id"`
	// Path is the artifact's absolute path on the host.
	Path LongText `json:"path"`
	// Size is the file's size, in bytes.
	Size Size `json:"size"`
	// MtimeNS is the file's modification time, in nanoseconds since the Unix
	// epoch.
	MtimeNS int64 `json:"mtime_ns" jsonschema:"optional"`
	// SHA256 is the file's content hash: 64 lowercase hex characters, as
	// sha256sum prints it.
	SHA256 Hex64 `json:"sha256"`
	// Role is the artifact's role in the binding: weights, engine, server,
	// tokenizer, template, config or source.
	Role ArtifactRole `json:"role"`
	// VerifiedBy is who verified it, as stated: an accountable person or
	// role. Recorded beside the authenticated principal, never checked.
	VerifiedBy ShortText `json:"verified_by"`
	// VerifierRole is the role of who hashed it, as stated: supervisor,
	// worker or operator (a stated hash verifies no binding, whatever its
	// role).
	VerifierRole VerifierRole `json:"verifier_role"`
}

// CommandName implements Command.
func (*RecordArtifactHash) CommandName() string { return "RecordArtifactHash" }

// Streams implements Command: the streams this command reads.
func (c *RecordArtifactHash) Streams(States) []string { return []string{BindingStream(c.BindingID)} }

// Decide implements Command: the gates.
func (c *RecordArtifactHash) Decide(in Inputs) ([]NewEvent, error) {
	b := in.States.Binding(string(c.BindingID))
	h := ArtifactHashed{BindingID: string(c.BindingID), Path: string(c.Path), Size: int64(c.Size), MtimeNS: c.MtimeNS, SHA256: string(c.SHA256),
		Role: string(c.Role), VerifiedBy: string(c.VerifiedBy), Principal: in.Principal.Name, VerifierRole: string(c.VerifierRole), Stated: true, At: in.At}
	return b.hashed([]ArtifactHashed{h}, in.At), nil
}

// hashed returns the events that record hs (hashes of b's artifacts, in
// order): one ArtifactHashed each, and after the first hash of a bound
// path whose size, mtime or sha256 changed, the BindingInvalidated that
// ends a verified binding (once: an invalidated binding stays so).
func (b Binding) hashed(hs []ArtifactHashed, at time.Time) []NewEvent {
	out := make([]NewEvent, 0, len(hs)+1)
	invalidated := b.Invalidated
	for _, h := range hs {
		out = append(out, NewEvent{Stream: BindingStream(h.BindingID), Type: TypeArtifactHashed, Data: h})
		if !b.Verified || invalidated {
			continue
		}
		if was, bound := b.VerifiedHashes[h.Path]; bound && (was.Size != h.Size || was.MtimeNS != h.MtimeNS || was.SHA256 != h.SHA256) {
			now := h
			out = append(out, NewEvent{Stream: BindingStream(h.BindingID), Type: TypeBindingInvalidated, Data: BindingInvalidated{
				BindingID: h.BindingID, Reason: InvalidatedArtifactChanged, Path: h.Path, Was: &was, Now: &now, At: at,
			}})
			invalidated = true
		}
	}
	return out
}

// ProposeBinding proposes the identity of what serves a provider's model.
type ProposeBinding struct {
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID ID `json:"binding_id"`
	// Provider is the provider's name (its stream is provider-<name>).
	Provider ID `json:"provider"`
	// ModelTag is the exact model tag the provider serves (no alias).
	ModelTag ShortText `json:"model_tag"`
	// Family is the model's family (e.g. "glm").
	Family ShortText `json:"family"`
	// ConfigSHA256 is the hex SHA-256 of the server's configuration; empty
	// when it has none.
	ConfigSHA256 Hex64 `json:"config_sha256"`
	// SourceCommit is the commit of the server's or engine's source that was
	// built; empty when not built from source.
	SourceCommit ShortText `json:"source_commit"`
	// TemplateSHA256 is the hex SHA-256 of the chat template in use.
	TemplateSHA256 Hex64 `json:"template_sha256"`
	// ContextTokens is the model's context window, in tokens.
	ContextTokens TokenLimit `json:"context_tokens"`
	// ModelMetadata are other facts about the model (quantisation,
	// parameters), as key-value strings; part of the identity, sorted by key.
	ModelMetadata Metadata `json:"model_metadata"`
	// Artifacts are the binding's files, each with its path, size, content
	// hash and role.
	Artifacts BindingArtifacts `json:"artifacts"`
	// Identity is the binding's identity: "sha256:" and the hex SHA-256 of its
	// canonical JSON (docs/DOMAIN.md; greffe digest binding).
	Identity Digest `json:"identity"`
}

// CommandName implements Command.
func (*ProposeBinding) CommandName() string { return "ProposeBinding" }

// Streams implements Command: the streams this command reads.
func (c *ProposeBinding) Streams(States) []string { return []string{BindingStream(c.BindingID)} }

// Decide implements Command: the gates.
func (c *ProposeBinding) Decide(in Inputs) ([]NewEvent, error) {
	b := in.States.Binding(string(c.BindingID))
	if b.Proposed {
		return nil, refuse(CodeBindingExists, map[string]any{"binding_id": c.BindingID},
			"binding %s was already proposed; a changed identity is a new binding", c.BindingID)
	}
	return []NewEvent{{Stream: BindingStream(c.BindingID), Type: TypeBindingProposed, Data: BindingProposed{
		BindingID: string(c.BindingID), Provider: string(c.Provider), ModelTag: string(c.ModelTag), Family: string(c.Family),
		ConfigSHA256: string(c.ConfigSHA256), SourceCommit: string(c.SourceCommit), TemplateSHA256: string(c.TemplateSHA256),
		ContextTokens: int(c.ContextTokens), ModelMetadata: c.ModelMetadata, Artifacts: c.Artifacts,
		Identity: string(c.Identity), At: in.At,
	}}}, nil
}

// VerifyBinding verifies a proposed binding. Verifying a verified binding
// appends nothing.
type VerifyBinding struct {
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID ID `json:"binding_id"`
	// VerifiedBy is who verifies it, as stated: a supervisor, not the
	// worker. Recorded beside the authenticated principal, never checked.
	VerifiedBy ShortText `json:"verified_by"`
}

// CommandName implements Command.
func (*VerifyBinding) CommandName() string { return "VerifyBinding" }

// Streams implements Command: the streams this command reads.
func (c *VerifyBinding) Streams(States) []string { return []string{BindingStream(c.BindingID)} }

// Decide implements Command: the gates.
func (c *VerifyBinding) Decide(in Inputs) ([]NewEvent, error) {
	b := in.States.Binding(string(c.BindingID))
	if err := b.usableForVerification(); err != nil {
		return nil, err
	}
	if b.Verified {
		return nil, nil
	}
	var missing []string
	for _, r := range requiredRoles {
		if !slices.ContainsFunc(b.Artifacts, func(a BindingArtifact) bool { return string(a.Role) == r }) {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return nil, refuse(CodeBindingRoleMissing, map[string]any{"binding_id": b.ID, "missing_roles": missing},
			"binding %s has no artifact for the required role(s) %v", b.ID, missing)
	}
	for _, a := range b.Artifacts {
		h, ok := b.Hashes[string(a.Path)]
		if !ok || !h.Signed() {
			det := map[string]any{"binding_id": b.ID, "path": a.Path, "role": a.Role}
			if ok {
				det["verified_by"], det["verifier_role"], det["stated"] = h.VerifiedBy, h.VerifierRole, true
			}
			return nil, refuse(CodeArtifactNotVerified, det,
				"artifact %s (%s) has no signed hash as its newest hash: request a hash measurement of it from an executor (a hash a writer records verifies nothing)", a.Path, a.Role)
		}
		if h.Size != int64(a.Size) || h.SHA256 != string(a.SHA256) || h.Role != string(a.Role) {
			return nil, refuse(CodeArtifactMismatch, map[string]any{
				"binding_id": b.ID, "path": a.Path,
				"proposed": map[string]any{"size": a.Size, "sha256": a.SHA256, "role": a.Role},
				"hashed":   map[string]any{"size": h.Size, "sha256": h.SHA256, "role": h.Role},
			}, "artifact %s as the executor hashed it differs from the proposal", a.Path)
		}
	}
	id := events.BindingIdentity(identityContent(b.ConfigSHA256, b.SourceCommit, b.TemplateSHA256, b.ModelMetadata, b.Artifacts))
	if id != b.ClaimedIdentity {
		return nil, refuse(CodeIdentityMismatch, map[string]any{"binding_id": b.ID, "claimed": b.ClaimedIdentity, "recomputed": id},
			"binding %s claims identity %s but its fields recompute to %s", b.ID, b.ClaimedIdentity, id)
	}
	return []NewEvent{{Stream: BindingStream(c.BindingID), Type: TypeBindingVerified, Data: BindingVerified{
		BindingID: string(c.BindingID), Identity: id, VerifiedBy: string(c.VerifiedBy), Principal: in.Principal.Name, At: in.At,
	}}}, nil
}

// usableForVerification refuses an unknown, rejected or invalidated binding.
func (b Binding) usableForVerification() error {
	switch {
	case !b.Proposed:
		return refuse(CodeBindingUnknown, map[string]any{"binding_id": b.ID}, "no binding was proposed under this id")
	case b.Rejected:
		return refuse(CodeBindingRejected, map[string]any{"binding_id": b.ID}, "binding %s was rejected", b.ID)
	case b.Invalidated:
		return refuse(CodeBindingInvalidated, map[string]any{"binding_id": b.ID, "reason": b.InvalidReason},
			"binding %s was invalidated (%s); propose a fresh binding", b.ID, b.InvalidReason)
	}
	return nil
}

// RejectBinding rejects a proposed, unverified binding. Rejecting twice
// appends nothing.
type RejectBinding struct {
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID ID `json:"binding_id"`
	// Reason says why the binding is rejected.
	Reason LongText `json:"reason"`
}

// CommandName implements Command.
func (*RejectBinding) CommandName() string { return "RejectBinding" }

// Streams implements Command: the streams this command reads.
func (c *RejectBinding) Streams(States) []string { return []string{BindingStream(c.BindingID)} }

// Decide implements Command: the gates.
func (c *RejectBinding) Decide(in Inputs) ([]NewEvent, error) {
	b := in.States.Binding(string(c.BindingID))
	switch {
	case !b.Proposed:
		return nil, refuse(CodeBindingUnknown, map[string]any{"binding_id": c.BindingID}, "no binding was proposed under this id")
	case b.Rejected:
		return nil, nil
	case b.Verified:
		return nil, refuse(CodeBindingAlreadyVerified, map[string]any{"binding_id": c.BindingID},
			"binding %s is verified; invalidate it instead of rejecting it", c.BindingID)
	}
	return []NewEvent{{Stream: BindingStream(c.BindingID), Type: TypeBindingRejected, Data: BindingRejected{
		BindingID: string(c.BindingID), Reason: string(c.Reason), At: in.At,
	}}}, nil
}

// InvalidateBinding invalidates a binding, e.g. after a runtime restart
// (reason "runtime_restart"). Invalidating twice appends nothing.
type InvalidateBinding struct {
	// BindingID is the model binding's id (its stream is binding-<id>).
	BindingID ID `json:"binding_id"`
	// Reason says why the binding no longer holds.
	Reason ShortText `json:"reason"`
}

// CommandName implements Command.
func (*InvalidateBinding) CommandName() string { return "InvalidateBinding" }

// Streams implements Command: the streams this command reads.
func (c *InvalidateBinding) Streams(States) []string { return []string{BindingStream(c.BindingID)} }

// Decide implements Command: the gates.
func (c *InvalidateBinding) Decide(in Inputs) ([]NewEvent, error) {
	b := in.States.Binding(string(c.BindingID))
	switch {
	case !b.Proposed:
		return nil, refuse(CodeBindingUnknown, map[string]any{"binding_id": c.BindingID}, "no binding was proposed under this id")
	case b.Invalidated:
		return nil, nil
	}
	return []NewEvent{{Stream: BindingStream(c.BindingID), Type: TypeBindingInvalidated, Data: BindingInvalidated{
		BindingID: string(c.BindingID), Reason: string(c.Reason), At: in.At,
	}}}, nil
}
