// Package commands turns a command into events: the single writer path of
// greffe's domain streams.
//
// A command ({"command": "GrantApproval", "id": "<uuid>", …}) goes through
// one loop (Handler.Handle):
//
//  1. decode, once: the envelope, then the command's data strictly and its
//     shape (aggregates.DecodeCommand), and the digest from the same bytes
//     (decode.go); a malformed command is refused with the JSON path of
//     the bad field (errors.go) and writes nothing;
//  2. load: every stream the command names (aggregates.LoadStates, the one
//     loading loop), folded with the aggregates' own Evolve from the
//     handler's cache, plus the executor streams that verify a claim's
//     evidence (load.go);
//  3. decide: aggregates.Decide at the node's time (Inputs.At, from the
//     node's Clock when the command is received) and the log size read
//     after loading (Inputs.Position);
//  4. append: all the decision's events in ONE atomic multi-stream append
//     whose conditions pin EVERY stream read to the exact version loaded
//     (no_stream when it had none); streams read but not written are
//     condition-only entries. A decision therefore holds only if nothing
//     it read changed between the check and the write;
//  5. retry: on wrong_expected_version, reload and decide again, at most
//     Config.MaxRetries times with jittered backoff, then answer
//     concurrency_conflict (retry.go).
//
// # Idempotency
//
// The command id is the idempotency key. The i-th event of a command has
// the id EventID(command id, i) (a UUIDv5 in the command id's namespace),
// its causation_id is the command id and its correlation_id the command's
// (the command id when it has none). Re-sending a command therefore finds
// its events (the log answers Duplicate, or the handler finds them by id
// before answering anything else) and returns the ORIGINAL outcome without
// appending. A command whose decision appended nothing (an idempotent
// repeat such as a second delivery) records nothing, so re-sending it
// decides again, and again appends nothing unless the state moved.
//
// # Refusals
//
// A gate's refusal (*aggregates.Refusal) is recorded as a CommandRefused
// event in the "refusals" stream, with the id RefusalID(command id), in an
// append that also pins every stream the decision read: a refusal is
// recorded only if what it was based on is still current. A re-sent
// refused command answers the recorded refusal and records nothing more
// (refusal.go).
//
// # Actor
//
// The authenticated principal (Request.Principal: a name and a role) is
// the actor of every event, and the deciders judge it (issue #20:
// aggregates.Inputs.Principal): whether its role may send the command, and
// whether what the command states (an approver, an executor id) is its own
// name. A command body may name another actor; it is never the actor, it
// is recorded in the events' metadata as "on_behalf_of" (a statement by
// the principal, kept for the audit trail, which authorizes nothing).
//
// Its errors carry a code and a kind (errors.go); none knows HTTP. The
// package imports events, aggregates and the standard library (never
// net/http); never api, client, node or a store (the Log it needs is defined here, and
// *pebblelog.Store satisfies it). It also imports github.com/gowebpki/jcs,
// a kept implementation of RFC 8785 (JSON Canonicalization Scheme), the
// canonical form the command digest is computed over (decode.go), rather
// than a home-made canonicaliser whose number and string spellings would
// need their own proof.
package commands
