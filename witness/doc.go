// Package witness speaks C2SP tlog-witness (https://c2sp.org/tlog-witness)
// and tlog-cosignature (https://c2sp.org/tlog-cosignature) from both ends:
//
//   - [Collector] is the log's end: a greffe node sends each new signed
//     checkpoint, with a consistency proof from the size a witness last
//     cosigned, to every configured witness by the add-checkpoint call,
//     keeps the cosignatures it gets (durably, in a small node-local state
//     file) and hands them to the API, which serves them on the checkpoint.
//     A witness that is down delays nothing but its own cosignature: the
//     collector retries it by itself with a capped backoff.
//   - [Server] is the witness's end (`greffe witness`): greffe cosigning
//     the checkpoints of other logs (independent operators cross-witnessing
//     each other). It keeps the newest cosigned checkpoint of each log in a
//     folder, so that it remembers across restarts.
//
// The wire format of add-checkpoint ([AddCheckpointRequest]) and the key
// helpers ([ParseCosignatureVerifier], [LoadCosigner]) are shared by both.
// The reference for the HTTP contract is the transparency-dev witness
// (github.com/transparency-dev/witness); interop/witness tests greffe
// against it.
//
// The package may import events, the transparency-dev libraries
// (formats' cosignature/v1 signer and verifier, merkle's proof
// verification), x/mod's note and internal/atomicfile (its state files);
// never api, node or cmd, which wire it.
package witness
