// Package verified is the Go client's verified mode: every read it returns
// (an event by id, a stream page, a page of the global log, the event a
// projection cites) and every append or command it sends comes back with
// RFC 6962 inclusion proofs against a signed C2SP checkpoint (the API's
// ?prove=range, one round trip: an answer that is one run of consecutive
// positions, such as a page of the global log, is proven by one range
// proof, audit.VerifyRangeProof), and the client believes the answer only once
// it has checked, itself:
//
//   - the checkpoint's signature by the log's keys, and, when asked, the
//     cosignatures of a quorum of witnesses (audit.CheckpointPolicy, the
//     check `greffe verify --witness-quorum` makes);
//   - that the checkpoint extends the newest one it already trusts (an
//     RFC 6962 consistency proof from that size: audit.Advance), and is not
//     older than it (a rollback);
//   - each event's stored bytes against its inclusion proof, and that they
//     are the event the answer names (position, id, stream, version, type,
//     leaf hash). The events it returns are decoded from the proven bytes,
//     never taken from the answer's JSON;
//   - that the answer holds what the checkpoint proves exists
//     (omission.go): a page of the global log every position from where it
//     was read up to its limit or the checkpoint's size (or a "next" where
//     it stops); a stream page consecutive versions, and, where it claims
//     the stream's end (its newest version, or none), that no later event
//     of the checkpoint is of the stream, which the client reads, proven,
//     up to Config.MaxStreamEndScan events. An omission is an
//     *OmissionError (event_omitted); an end it cannot prove within the
//     bound, an *UnprovenEndError (stream_end_unproven), never an end
//     presented unproven.
//
// Its trusted state (the newest checkpoint verified) is kept in memory or
// in a file, the same audit.State file `greffe verify --state` keeps, so
// that a fork or a rollback between two visits is caught too. A failure is
// an *audit.ProofError whose detail names the event or the checkpoint.
//
// What it cannot show: events newer than the checkpoint the node chose,
// and that an event id the node says it does not know is absent.
// Completeness of a whole ledger is `greffe verify`'s.
//
// The package may import client, events, aggregates (the event references
// projections cite), audit (the checkpoint policy and Advance) and x/mod's
// note; never api, node or cmd.
package verified
