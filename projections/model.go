package projections

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// Model is one read model's state. Implementations are not safe for
// concurrent use: the runner serialises Apply, Flush and Load, and guards
// View with a read lock.
type Model interface {
	// Apply folds one event. Events arrive once each, in position order,
	// including those the model ignores (it returns nil for them). It must
	// be deterministic and must not retain e or the slices and strings it
	// holds (they alias a read buffer): copy what it keeps. An error means
	// a domain event the model cannot read: the runner stops.
	Apply(e *events.Event) error
	// Flush calls put for every row changed since the last Flush, with its
	// encoded value, and forgets the changes. Keys are unique within the
	// model.
	Flush(put func(key string, value []byte) error) error
	// Load restores one row written by Flush (when the runner reopens).
	Load(key string, value []byte) error
	// View returns the rows to render for q, sorted by key. The result is
	// encoded to JSON before Apply runs again (the runner holds its read
	// lock), so it may share the model's slices and maps.
	View(q Query) any
}

// Query says what to render.
type Query struct {
	// Time is when time-dependent models (readiness, approvals) are judged.
	// The zero time means the node's clock.
	Time time.Time
	// Key keeps only the row with this key (the audit trail of one
	// correlation id). Empty keeps every row.
	Key string
}

// Env is what models need from the node.
type Env struct {
	// Policy is the node's policy (probe freshness, binding profiles).
	Policy aggregates.Policy
}

// Spec describes one read model.
type Spec struct {
	// Name is the model's name in the API: /v1/projections/{name}.
	Name string
	// Version is bumped whenever the fold or the stored rows change: a
	// runner that finds rows of another version drops them and folds the
	// log again from position 0.
	Version int
	// Timed reports whether the model is judged at a time (Query.Time).
	Timed bool
	// Description says what the model shows, for GET /v1/projections.
	Description string
	// New returns an empty model.
	New func(env Env) Model
}

// Every read model implements Model.
var (
	_ Model = (*approvals)(nil)
	_ Model = (*audit)(nil)
	_ Model = (*bindings)(nil)
	_ Model = (*measurements)(nil)
	_ Model = (*missions)(nil)
	_ Model = (*readiness)(nil)
)

// Specs returns every read model, sorted by name. The slice is new on each
// call (no package-level mutable state).
func Specs() []Spec {
	s := []Spec{
		// Issue #20 bumped bindings, missions and readiness (stated facts,
		// without a signature, are kept apart and prove nothing) and
		// approvals (the principal beside the approver): every row is
		// folded again.
		{Name: "approvals", Version: 2, Timed: true, Description: "approvals: granted, consumed, remaining uses, expired, revoked", New: newApprovals},
		{Name: "audit", Version: 1, Description: "audit trail: every event sharing a correlation id, in order", New: newAudit},
		{Name: "bindings", Version: 3, Description: "model bindings and their artifacts: identity, roles present, invalidations", New: newBindings},
		{Name: "measurements", Version: 2, Description: "signed measurements per host and model, as time series", New: newMeasurements},
		{Name: "missions", Version: 3, Description: "missions board: state, attempt, budgets spent, checks by outcome, review, delivery", New: newMissions},
		{Name: "readiness", Version: 2, Timed: true, Description: "readiness matrix: one row per provider, four columns with state, reason and proving event", New: newReadiness},
	}
	sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	return s
}

// SpecByName returns the spec named name.
func SpecByName(name string) (Spec, bool) {
	for _, s := range Specs() {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// Names returns the models' names, sorted.
func Names() []string {
	var out []string
	for _, s := range Specs() {
		out = append(out, s.Name)
	}
	return out
}

// ErrUnknownProjection is returned for a name Specs does not list.
var ErrUnknownProjection = errors.New("projections: unknown projection")

// UnknownError names an unknown projection and lists the known ones.
type UnknownError struct{ Name string }

// Error lists the known projections.
func (e *UnknownError) Error() string {
	return fmt.Sprintf("no projection %q; known projections are %s", e.Name, strings.Join(Names(), ", "))
}

// CodedError describes the error: unknown_projection, a refusal.
func (e *UnknownError) CodedError() *events.Error {
	return &events.Error{Code: CodeUnknownProjection, Kind: events.KindRefused, Message: e.Error(), Err: e}
}

// Unwrap returns ErrUnknownProjection.
func (e *UnknownError) Unwrap() error { return ErrUnknownProjection }

// Codes of the projections (docs/COMMANDS.md).
const (
	// CodeUnknownProjection: no projection under that name.
	CodeUnknownProjection = "unknown_projection"
	// CodeProjectionLagging: the projection did not reach the requested
	// position within the wait bound (retry).
	CodeProjectionLagging = "projection_lagging"
	// CodeProjectionFailed: the projection stopped on an event it cannot
	// fold; its rows stay at the last good position.
	CodeProjectionFailed = "projection_failed"
	// CodePositionBeyondHead: an as-of position above the log's head.
	CodePositionBeyondHead = "position_beyond_head"
)

// Output is the JSON shape of a rendered projection.
type Output struct {
	Name string `json:"name"`
	// Position is the number of events folded: the projection as of the
	// log prefix [0, Position).
	Position uint64 `json:"position"`
	// At is the time a timed model was judged at.
	At *time.Time `json:"at,omitempty"`
	// Rows are the model's rows, sorted by key.
	Rows any `json:"rows"`
}

// render encodes a model's view. The bytes are the comparison unit of
// verify: encoding/json sorts map keys and models sort their rows.
func render(spec Spec, m Model, position uint64, q Query) ([]byte, error) {
	out := Output{Name: spec.Name, Position: position, Rows: m.View(q)}
	if spec.Timed {
		t := q.Time.UTC()
		out.At = &t
	}
	return json.Marshal(out)
}

// interner keeps one copy of each string a model retains from events
// (whose strings alias a read buffer): stream names and types repeat on
// every event of an aggregate. The zero value is ready.
type interner struct {
	m map[string]string
	// last is the string returned last: an aggregate's events often
	// follow each other, so most lookups skip the map.
	last string
}

func (in *interner) str(s string) string {
	if s == in.last {
		return in.last
	}
	if v, ok := in.m[s]; ok {
		in.last = v
		return v
	}
	if in.m == nil {
		in.m = map[string]string{}
	}
	c := strings.Clone(s)
	in.m[c] = c
	in.last = c
	return c
}

// ref returns the reference of an event. Types are few: they are matched
// against the known ones before the map.
func (in *interner) ref(e *events.Event) aggregates.EventRef {
	return aggregates.EventRef{Stream: in.str(e.Stream), Version: e.Version, Position: e.Position, ID: e.ID, Type: typeName(e.Type)}
}

// knownTypes are the event types the models reference.
var knownTypes = [...]string{
	aggregates.TypeProviderDeclared, aggregates.TypeProviderLimitsDeclared, aggregates.TypeProviderActivated,
	aggregates.TypeProviderMadeDormant, aggregates.TypeProbeRecorded, aggregates.TypeArtifactHashed, aggregates.TypeBindingProposed,
	aggregates.TypeBindingVerified, aggregates.TypeBindingRejected, aggregates.TypeBindingInvalidated, aggregates.TypeApprovalGranted,
	aggregates.TypeApprovalConsumed, aggregates.TypeApprovalRevoked, aggregates.TypeRouteDecided, aggregates.TypeAdmissionDecided,
	aggregates.TypeReviewRecorded, aggregates.TypeMissionStopped, aggregates.TypeResultDelivered, aggregates.TypePatchIntegrated,
	aggregates.TypeMeasurementRequested,
}

// typeName returns t as a constant of the aggregates when it is one (no
// copy), or a copy.
func typeName(t string) string {
	for _, k := range knownTypes {
		if k == t {
			return k
		}
	}
	return strings.Clone(t)
}

// table is a set of rows of one type keyed by string, remembering which
// changed since the last flush. Rows are stored as JSON under
// prefix+key.
type table[T any] struct {
	prefix string
	rows   map[string]*tableRow[T]
	dirty  []string
	// last is the row of the previous upsert: a command's events arrive
	// together, so most events touch the row the previous one did.
	last *tableRow[T]
}

type tableRow[T any] struct {
	key   string
	v     T
	dirty bool
}

func newTable[T any](prefix string) *table[T] {
	return &table[T]{prefix: prefix, rows: map[string]*tableRow[T]{}}
}

// get returns the row under key, or nil.
func (t *table[T]) get(key string) *T {
	if r := t.rows[key]; r != nil {
		return &r.v
	}
	return nil
}

// upsert returns the row under key, creating it, and marks it changed.
// key may alias a read buffer: a new row's key is copied.
func (t *table[T]) upsert(key string) *T {
	r := t.last
	if r == nil || r.key != key {
		r = t.rows[key]
		if r == nil {
			r = &tableRow[T]{key: strings.Clone(key)}
			t.rows[r.key] = r
		}
		t.last = r
	}
	if !r.dirty {
		r.dirty = true
		t.dirty = append(t.dirty, r.key)
	}
	return &r.v
}

// flush encodes the changed rows in key order.
func (t *table[T]) flush(put func(key string, value []byte) error) error {
	slices.Sort(t.dirty)
	for _, k := range t.dirty {
		r := t.rows[k]
		b, err := json.Marshal(&r.v)
		if err != nil {
			return fmt.Errorf("encode row %s: %w", k, err)
		}
		if err := put(t.prefix+k, b); err != nil {
			return err
		}
		r.dirty = false
	}
	t.dirty = t.dirty[:0]
	return nil
}

// load restores a row if key belongs to this table.
func (t *table[T]) load(key string, value []byte) (bool, error) {
	k, ok := strings.CutPrefix(key, t.prefix)
	if !ok {
		return false, nil
	}
	r := &tableRow[T]{key: k}
	if err := json.Unmarshal(value, &r.v); err != nil {
		return true, fmt.Errorf("row %s: %w", key, err)
	}
	t.rows[k] = r
	return true, nil
}

// keys returns the row keys, sorted.
func (t *table[T]) keys() []string {
	out := make([]string, 0, len(t.rows))
	for k := range t.rows {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// loadTables offers a stored row to each table in turn.
func loadTables(key string, value []byte, loaders ...func(string, []byte) (bool, error)) error {
	for _, l := range loaders {
		ok, err := l(key, value)
		if ok || err != nil {
			return err
		}
	}
	return fmt.Errorf("stored row %q belongs to no table", key)
}

// foldError reports a domain event a model cannot read.
func foldError(e *events.Event, what string) error {
	return fmt.Errorf("fold %s event at position %d (%s): %s: %w", e.Type, e.Position, e.Stream, what, events.ErrCorrupt)
}
