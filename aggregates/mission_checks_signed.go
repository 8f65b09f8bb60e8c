package aggregates

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/greffe/greffe/events"
)

// Signed checks (issue #20): an independent result is what an independent
// check runner signs, never what a writer states. A check runner is a key
// of the executor registry with role check_runner (RegisterExecutorKey
// under an activation approval of "executor-<runner id>", executor.go);
// it signs a CheckRun with that key (a DSSE envelope of payload type
// CheckPayloadType, as an executor signs a measurement), and anyone may
// relay it with RecordSignedCheck. The node verifies the envelope against
// the runner's check-runner keys, then applies RecordCheck's gates, and
// appends in one append:
//
//   - CheckRunSigned: the signed bytes verbatim, with the envelope, so an
//     auditor checks the signature against the key ring like any signed
//     event;
//   - CheckRecorded, derived from it: runner_kind independent, signed_by
//     the runner and the key ids; the only runs that count toward
//     verification and as evidence.

// CheckPayloadType is the DSSE payload type of a signed check run.
const CheckPayloadType = "application/vnd.greffe.check+json"

// CheckRun is the signed payload of a check run, as the runner writes it.
// It names the mission, the candidate and the check by the same fields as
// CheckRecorded, and the runner by its registered id.
type CheckRun struct {
	// MissionID is the mission's id (its stream is mission-<id>).
	MissionID ID `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash Hex64 `json:"candidate_hash"`
	// CheckID is the acceptance check's id, as the mission names it.
	CheckID ID `json:"check_id"`
	// ArgvHash is ArgvHash(argv) of the argv the runner ran.
	ArgvHash Digest `json:"argv_hash"`
	// Outcome is the check's outcome: pass, fail, skipped, truncated or error.
	Outcome CheckOutcome `json:"outcome"`
	// RunnerID is the check runner's id, as registered with its key.
	RunnerID ID `json:"runner_id"`
	// ExitCode is the process's exit code (0 for a pass).
	ExitCode int `json:"exit_code"`
	// Duration is how long the check ran (a Go duration).
	Duration NonNegativeDuration `json:"duration"`
	// OutputBytes is the size of the kept output, in bytes.
	OutputBytes Size `json:"output_bytes"`
	// OutputSHA256 is the hex SHA-256 of the kept output; empty when none
	// was kept.
	OutputSHA256 OptionalHex64 `json:"output_sha256,omitempty"`
}

// RecordSignedCheck records an independent check runner's signed run of an
// acceptance check. Payload is the exact signed bytes (a JSON CheckRun,
// base64 in the command's JSON so no client re-serialises it); Envelope
// carries the DSSE signatures over it.
type RecordSignedCheck struct {
	// MissionID is the mission's id (its stream is mission-<id>); the
	// payload must name it.
	MissionID ID `json:"mission_id"`
	// RunnerID is the check runner whose check-runner key signed the run
	// (its keys are in stream executor-<id>); the payload must name it.
	RunnerID ID `json:"runner_id"`
	// Payload is the signed run: the bytes of a JSON CheckRun, base64 in
	// JSON; the envelope's signatures are over them.
	Payload []byte `json:"payload"`
	// Envelope is the DSSE envelope of the signed run; a run without a
	// signature is refused, and the refusal is recorded.
	Envelope events.Envelope `json:"envelope" jsonschema:"optional"`

	// run is Payload as Validate decoded it, so that Decide (run again on
	// every retry) does not decode the same bytes again.
	run *CheckRun
}

// CommandName implements Command.
func (*RecordSignedCheck) CommandName() string { return "RecordSignedCheck" }

// payload returns the signed run: as Validate decoded it, or decoded now
// (strictly, as Validate does) for a command that was not validated.
func (c *RecordSignedCheck) payload() (CheckRun, error) {
	if c.run != nil {
		return *c.run, nil
	}
	var r CheckRun
	err := decodeSignedPayload(c.Payload, &r)
	return r, err
}

// Validate implements crossFieldRules: the payload is the signed JSON of
// a CheckRun, whose fields are held to their types as a command's are, and
// the envelope is within the edge's bound (signed_payload.go).
func (c *RecordSignedCheck) Validate() error {
	var r CheckRun
	if err := decodeSignedPayload(c.Payload, &r); err != nil {
		return err
	}
	c.run = &r
	return checkEnvelopeBound(&c.Envelope)
}

// Streams implements Command: the streams this command reads: the
// mission's and the runner's keys.
func (c *RecordSignedCheck) Streams(States) []string {
	return []string{MissionStream(c.MissionID), ExecutorStream(c.RunnerID)}
}

// Decide implements Command: the gates.
func (c *RecordSignedCheck) Decide(in Inputs) ([]NewEvent, error) {
	det := map[string]any{"mission_id": c.MissionID, "runner_id": c.RunnerID}
	if len(c.Envelope.Signatures) == 0 || c.Envelope.PayloadType != CheckPayloadType {
		det["payload_type"], det["signatures"] = c.Envelope.PayloadType, len(c.Envelope.Signatures)
		return nil, refuse(CodeSignatureInvalid, det,
			"a signed check carries a DSSE envelope of payload type %q with 1 to %d signatures by the runner's check-runner key", CheckPayloadType, maxEnvelopeSignatures)
	}
	x := in.States.Executor(string(c.RunnerID))
	ids, err := events.VerifyEnvelope(c.Payload, &c.Envelope, x.RunnerLookup)
	if err != nil {
		var se *events.SignatureError
		code := CodeSignatureInvalid
		if errors.As(err, &se) {
			det["key_id"], det["reason"] = se.KeyID, se.Reason
			switch se.Reason {
			case events.SigUnknownKey:
				code = CodeExecutorKeyUnknown
			case events.SigRevokedKey:
				code = CodeExecutorKeyRevoked
			}
		}
		return nil, refuse(code, det, "the check's signature does not verify against the check-runner keys of %s: %v", c.RunnerID, err)
	}
	r, err := c.payload()
	if err != nil {
		return nil, err
	}
	if r.MissionID != c.MissionID || r.RunnerID != c.RunnerID {
		det["payload_mission_id"], det["payload_runner_id"] = r.MissionID, r.RunnerID
		return nil, refuse(CodeResultNotForRequest, det, "the signed run is for mission %s by %s", r.MissionID, r.RunnerID)
	}
	env := c.Envelope
	env.Signatures = slices.Clone(env.Signatures)
	signed := NewEvent{Stream: MissionStream(c.MissionID), Type: TypeCheckRunSigned, Data: json.RawMessage(slices.Clone(c.Payload)), Envelope: &env}
	return recordCheck(in, CheckRecorded{MissionID: string(r.MissionID), CandidateHash: string(r.CandidateHash), CheckID: string(r.CheckID), ArgvHash: string(r.ArgvHash),
		Outcome: string(r.Outcome), Runner: string(r.RunnerID), RunnerKind: RunnerIndependent, ExitCode: r.ExitCode, Duration: Duration(r.Duration),
		OutputBytes: int64(r.OutputBytes), OutputSHA256: string(r.OutputSHA256), SignedBy: string(r.RunnerID), KeyIDs: ids, At: in.At}, &signed)
}
