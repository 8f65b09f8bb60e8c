// Package projections holds greffe's read models and the runner that keeps
// them up to date.
//
// A read model (Model) is a deterministic fold of the log: the same events
// give the same rows, byte for byte, whether they were folded live, after a
// restart, or replayed from position 0 in memory. Each one lives in its own
// file (readiness.go, missions.go, approvals.go, bindings.go,
// measurements.go, audit.go) and is listed by Specs.
//
// The runner (Set) gives each model a goroutine that subscribes to the log
// from the model's stored checkpoint, folds every event once, and stores
// the changed rows together with the new checkpoint in ONE batch of its
// Store (projections/pebblestore: <data>/projections, a Pebble instance of
// its own, opened by the node and handed to Open): after a crash or
// a restart a model resumes exactly where its rows were stored, so no event
// is folded twice or skipped.
//
// Rendering (Render, RenderAt, Rebuild) turns a model into JSON with sorted
// rows, so that a live model and one rebuilt from the log can be compared
// byte for byte. Models whose answer depends on time (readiness and its
// freshness window, approvals and their expiries) are folded without time
// and judged at render time (Query.Time).
//
// Folding decodes only the event types a model reads, and only the fields
// it needs, with the module's byte-level scanner (internal/jsonscan, see
// fields.go) instead of encoding/json: rebuilding every model from
// 1,000,000 events must take at most 5 s.
//
// The package imports events, aggregates (for the shared types and the
// readiness computation the gates use) and internal/jsonscan; never a
// storage engine (api reads this package for the models' types and links
// no Pebble), never commands, api or node, and never net/http: its errors
// carry an events.Kind, which the API turns into a status.
package projections
