package projections

import (
	"slices"
	"strings"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// The bindings read model: each model binding with its identity, the roles
// its artifacts cover (and the required ones they miss), the newest hash of
// every artifact path next to what the proposal states, and every
// invalidation with its reason.

type bindingRow struct {
	ID                  string                       `json:"id"`
	Proposed            bool                         `json:"proposed"`
	Provider            string                       `json:"provider"`
	ModelTag            string                       `json:"model_tag"`
	Family              string                       `json:"family"`
	ClaimedIdentity     string                       `json:"claimed_identity"`
	Identity            string                       `json:"identity"`
	Verified            bool                         `json:"verified"`
	VerifiedBy          string                       `json:"verified_by"`
	VerifiedByPrincipal string                       `json:"verified_by_principal"`
	Rejected            bool                         `json:"rejected"`
	RejectReason        string                       `json:"reject_reason"`
	Invalidated         bool                         `json:"invalidated"`
	Artifacts           []aggregates.BindingArtifact `json:"artifacts"`
	Hashes              map[string]ArtifactHash      `json:"hashes"`
	Invalidations       []Invalidation               `json:"invalidations"`
	Proposal            aggregates.EventRef          `json:"proposal"`
	Verification        aggregates.EventRef          `json:"verification"`
}

// ArtifactHash is the newest recorded hash of an artifact path.
type ArtifactHash struct {
	Path       string `json:"path"`
	Role       string `json:"role"`
	Size       int64  `json:"size"`
	MtimeNS    int64  `json:"mtime_ns"`
	SHA256     string `json:"sha256"`
	VerifiedBy string `json:"verified_by"`
	// Principal is who sent the hash (a token's name; "anonymous" on a
	// node without tokens): VerifiedBy is what it stated (issue #20).
	Principal    string `json:"principal,omitempty"`
	VerifierRole string `json:"verifier_role"`
	// MeasurementID is the executor's signed hash measurement it was read
	// from; empty for a hash a writer stated, which verifies nothing
	// (issue #20).
	MeasurementID string              `json:"measurement_id,omitempty"`
	Event         aggregates.EventRef `json:"event"`
}

// Invalidation is one invalidation of a binding.
type Invalidation struct {
	Reason string              `json:"reason"`
	Path   string              `json:"path,omitempty"`
	Event  aggregates.EventRef `json:"event"`
}

type bindings struct {
	interner
	rows *table[bindingRow]
}

func newBindings(Env) Model { return &bindings{rows: newTable[bindingRow]("b/")} }

var (
	hashKeys           = []string{"path", "size", "mtime_ns", "sha256", "role", "verified_by", "verifier_role", "measurement_id", "principal"}
	proposalKeys       = []string{"provider", "model_tag", "family", "identity", "artifacts"}
	artifactKeys       = []string{"path", "size", "sha256", "role"}
	verifiedKeys       = []string{"identity", "verified_by", "principal"}
	invalidatedKeys    = []string{"reason", "path"}
	bindingRejectedKey = []string{"reason"}
)

func (m *bindings) Apply(e *events.Event) error {
	if !strings.HasPrefix(e.Stream, aggregates.BindingPrefix) {
		return nil
	}
	id := strings.TrimPrefix(e.Stream, aggregates.BindingPrefix)
	var v [9][]byte
	switch e.Type {
	case aggregates.TypeArtifactHashed:
		fields(e.Data, hashKeys, v[:])
		b := m.rows.upsert(id)
		b.ID = id
		h := ArtifactHash{Path: str(v[0]), Size: i64(v[1]), MtimeNS: i64(v[2]), SHA256: str(v[3]), Role: str(v[4]),
			VerifiedBy: str(v[5]), VerifierRole: str(v[6]), MeasurementID: str(v[7]), Principal: str(v[8]), Event: m.ref(e)}
		if b.Hashes == nil {
			b.Hashes = map[string]ArtifactHash{}
		}
		b.Hashes[h.Path] = h
	case aggregates.TypeBindingProposed:
		fields(e.Data, proposalKeys, v[:])
		b := m.rows.upsert(id)
		b.ID, b.Proposed, b.Provider, b.ModelTag, b.Family, b.ClaimedIdentity = id, true, str(v[0]), str(v[1]), str(v[2]), str(v[3])
		b.Artifacts = []aggregates.BindingArtifact{}
		elements(v[4], func(el []byte) {
			var a [4][]byte
			fields(el, artifactKeys, a[:])
			b.Artifacts = append(b.Artifacts, aggregates.BindingArtifact{Path: aggregates.LongText(str(a[0])), Size: aggregates.Size(i64(a[1])), SHA256: aggregates.Hex64(str(a[2])), Role: aggregates.ArtifactRole(str(a[3]))})
		})
		b.Proposal = m.ref(e)
	case aggregates.TypeBindingVerified:
		fields(e.Data, verifiedKeys, v[:])
		b := m.rows.upsert(id)
		b.ID, b.Verified, b.Identity, b.VerifiedBy, b.VerifiedByPrincipal, b.Verification = id, true, str(v[0]), str(v[1]), str(v[2]), m.ref(e)
	case aggregates.TypeBindingRejected:
		fields(e.Data, bindingRejectedKey, v[:])
		b := m.rows.upsert(id)
		b.ID, b.Rejected, b.RejectReason = id, true, str(v[0])
	case aggregates.TypeBindingInvalidated:
		fields(e.Data, invalidatedKeys, v[:])
		b := m.rows.upsert(id)
		b.ID, b.Invalidated = id, true
		b.Invalidations = append(b.Invalidations, Invalidation{Reason: str(v[0]), Path: str(v[1]), Event: m.ref(e)})
	default:
		// A type this model does not read (one a later decider added):
		// nothing it shows depends on it.
		return nil
	}
	return nil
}

func (m *bindings) Flush(put func(string, []byte) error) error { return m.rows.flush(put) }

func (m *bindings) Load(key string, value []byte) error { return loadTables(key, value, m.rows.load) }

// Binding statuses of the bindings read model.
const (
	BindingHashedOnly  = "hashed_only"
	BindingProposed    = "proposed"
	BindingVerified    = "verified"
	BindingRejected    = "rejected"
	BindingInvalidated = "invalidated"
)

// BindingRow is one row of the bindings read model.
type BindingRow struct {
	Key             string `json:"key"`
	BindingID       string `json:"binding_id"`
	Status          string `json:"status"`
	Provider        string `json:"provider,omitempty"`
	ModelTag        string `json:"model_tag,omitempty"`
	Family          string `json:"family,omitempty"`
	Identity        string `json:"identity,omitempty"`
	ClaimedIdentity string `json:"claimed_identity,omitempty"`
	VerifiedBy      string `json:"verified_by,omitempty"`
	// VerifiedByPrincipal is who sent VerifyBinding (a token's name;
	// "anonymous" on a node without tokens): VerifiedBy is what it stated
	// (issue #20).
	VerifiedByPrincipal string               `json:"verified_by_principal,omitempty"`
	RejectReason        string               `json:"reject_reason,omitempty"`
	RolesPresent        []string             `json:"roles_present"`
	RolesMissing        []string             `json:"roles_missing"`
	Artifacts           []ArtifactRow        `json:"artifacts"`
	Unbound             []ArtifactHash       `json:"unbound_hashes"`
	Invalidations       []Invalidation       `json:"invalidations"`
	Proposal            *aggregates.EventRef `json:"proposal,omitempty"`
	Verification        *aggregates.EventRef `json:"verification,omitempty"`
}

// ArtifactRow is one artifact a binding proposes, next to its newest hash.
type ArtifactRow struct {
	aggregates.BindingArtifact
	// Hashed is the newest hash of the path; nil when never hashed.
	Hashed *ArtifactHash `json:"hashed"`
	// Matches: hashed by an executor's signed hash measurement with the
	// proposed size and sha256 (what verification requires).
	Matches bool `json:"matches"`
}

func (m *bindings) View(q Query) any {
	rows := []BindingRow{}
	for _, k := range m.rows.keys() {
		if q.Key != "" && k != q.Key {
			continue
		}
		b := m.rows.get(k)
		r := BindingRow{Key: k, BindingID: k, Provider: b.Provider, ModelTag: b.ModelTag, Family: b.Family, ClaimedIdentity: b.ClaimedIdentity,
			Identity: b.Identity, VerifiedBy: b.VerifiedBy, VerifiedByPrincipal: b.VerifiedByPrincipal, RejectReason: b.RejectReason, RolesPresent: []string{}, RolesMissing: []string{},
			Artifacts: []ArtifactRow{}, Unbound: []ArtifactHash{}, Invalidations: b.Invalidations}
		switch {
		case b.Invalidated:
			r.Status = BindingInvalidated
		case b.Rejected:
			r.Status = BindingRejected
		case b.Verified:
			r.Status = BindingVerified
		case b.Proposed:
			r.Status = BindingProposed
		default:
			r.Status = BindingHashedOnly
		}
		if r.Invalidations == nil {
			r.Invalidations = []Invalidation{}
		}
		bound := map[string]bool{}
		for _, a := range b.Artifacts {
			bound[string(a.Path)] = true
			if !slices.Contains(r.RolesPresent, string(a.Role)) {
				r.RolesPresent = append(r.RolesPresent, string(a.Role))
			}
			ar := ArtifactRow{BindingArtifact: a}
			if h, ok := b.Hashes[string(a.Path)]; ok {
				ar.Hashed = &h
				ar.Matches = h.MeasurementID != "" && h.Size == int64(a.Size) && h.SHA256 == string(a.SHA256) && h.Role == string(a.Role)
			}
			r.Artifacts = append(r.Artifacts, ar)
		}
		slices.Sort(r.RolesPresent)
		if b.Proposed {
			for _, role := range aggregates.RequiredRoles() {
				if !slices.Contains(r.RolesPresent, role) {
					r.RolesMissing = append(r.RolesMissing, role)
				}
			}
			slices.Sort(r.RolesMissing)
		}
		for _, p := range sortedMapKeys(b.Hashes) {
			if !bound[p] {
				r.Unbound = append(r.Unbound, b.Hashes[p])
			}
		}
		if b.Proposed {
			p := b.Proposal
			r.Proposal = &p
		}
		if b.Verified {
			v := b.Verification
			r.Verification = &v
		}
		rows = append(rows, r)
	}
	return rows
}

func sortedMapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
