// Package aggregates holds greffe's gates: one pure decider per aggregate of
// DOMAIN.md (Provider, ModelBinding, Approval, Mission, Measurement and
// executor keys, Claim).
//
// # The decider contract
//
// Every aggregate is three pure functions (Chassaing's Decider pattern):
//
//   - Initial: the zero value of its state type (Provider{}, Binding{},
//     Approval{}, Mission{}, Measurement{}, Executor{}, Claim{}); Exists
//     reports false until the first event is folded.
//   - Evolve: the state's Evolve method folds one stored event and returns
//     the next state, never modifying the one it is given (a state may be
//     kept and shared). It fails only on an event it cannot read (a
//     *FoldError), which means the stream is not one these deciders wrote.
//   - Decide: each command type's Decide method returns the events to append
//     ([]NewEvent), an empty slice for an idempotent repeat (a second
//     delivery, a second revocation), or a *Refusal with a stable code.
//
// Nothing here does I/O, reads the clock or draws randomness. The node sets
// the time of a command (Inputs.At) when it receives it, the decider records
// that time in the events it emits, and later decisions read it back from the
// events, so a replay decides exactly the same.
//
// # How the commands layer drives a decider
//
//  1. DecodeCommand(name, data): strict JSON (unknown or duplicate fields
//     refused with their JSON path) and shape validation, both reported as
//     *InvalidCommandError (an HTTP 400, never a refusal).
//  2. cmd.Streams(loaded): the streams the command reads. Call it again
//     after loading them until it names nothing new (a route names a
//     provider's binding only once the provider is known). Fold each with
//     Fold.
//  3. Decide(cmd, inputs): the gates. Every NewEvent targets a stream the
//     command read, so appending with an exact expected version on each read
//     stream makes the check and the write one atomic step.
//
// # A field's type carries its rule
//
// A command's bounded field is declared with a value type (values.go,
// lists.go, duration.go: ID, ShortText, Hex64, Digest, Count, …, and enum
// types whose Values list their values once). Validate (fields.go) walks a
// decoded command and holds each field to its type's rule; SchemaOf gives
// the same types' JSON Schema to the OpenAPI generator (api/openapi.go).
// A command's own Validate method keeps only the rules between its fields.
//
// Refusals are *Refusal values whose Code is declared next to the gate that
// returns it; docs/GATES.md lists every code, its rule, its aggregate, the
// commands that can hit it and the test that shows it.
//
// # Imports
//
// The package imports only the standard library, github.com/google/uuid
// and github.com/greffe/greffe/events. It never calls time.Now and never
// uses math/rand, os or net; internal/lint (testAggregatesPure) enforces
// this.
package aggregates
