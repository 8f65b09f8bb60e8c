package aggregates

import (
	"bytes"
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
	MissionID string `json:"mission_id"`
	// CandidateHash is the candidate's content hash: 64 lowercase hex
	// characters.
	CandidateHash string `json:"candidate_hash"`
	// CheckID is the acceptance check's id, as the mission names it.
	CheckID string `json:"check_id"`
	// ArgvHash is ArgvHash(argv) of the argv the runner ran.
	ArgvHash string `json:"argv_hash"`
	// Outcome is the check's outcome: pass, fail, skipped, truncated or error.
	Outcome string `json:"outcome"`
	// RunnerID is the check runner's id, as registered with its key.
	RunnerID string `json:"runner_id"`
	// ExitCode is the process's exit code (0 for a pass).
	ExitCode int `json:"exit_code"`
	// Duration is how long the check ran (a Go duration).
	Duration Duration `json:"duration"`
	// OutputBytes is the size of the kept output, in bytes.
	OutputBytes int64 `json:"output_bytes"`
	// OutputSHA256 is the hex SHA-256 of the kept output; empty when none
	// was kept.
	OutputSHA256 string `json:"output_sha256,omitempty"`
}

// validate checks the payload's shape, with paths under data.payload.
func (r *CheckRun) validate() error {
	if err := checkID("payload.mission_id", r.MissionID); err != nil {
		return err
	}
	if err := checkSHA256("payload.candidate_hash", r.CandidateHash, true); err != nil {
		return err
	}
	if err := checkID("payload.check_id", r.CheckID); err != nil {
		return err
	}
	if err := checkDigest("payload.argv_hash", r.ArgvHash, true); err != nil {
		return err
	}
	if err := checkOneOf("payload.outcome", r.Outcome, CheckPass, CheckFail, CheckSkipped, CheckTruncated, CheckError); err != nil {
		return err
	}
	if err := checkID("payload.runner_id", r.RunnerID); err != nil {
		return err
	}
	if r.Duration.Duration < 0 {
		return invalid("payload.duration", "is %s; must be >= 0", r.Duration)
	}
	if r.OutputBytes < 0 {
		return invalid("payload.output_bytes", "is %d; must be >= 0", r.OutputBytes)
	}
	return checkSHA256("payload.output_sha256", r.OutputSHA256, false)
}

// maxEnvelopeSignatures bounds an envelope's signatures, as for a
// measurement: a bound of the edge.
const maxEnvelopeSignatures = 16

// RecordSignedCheck records an independent check runner's signed run of an
// acceptance check. Payload is the exact signed bytes (a JSON CheckRun,
// base64 in the command's JSON so no client re-serialises it); Envelope
// carries the DSSE signatures over it.
type RecordSignedCheck struct {
	// MissionID is the mission's id (its stream is mission-<id>); the
	// payload must name it.
	MissionID string `json:"mission_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// RunnerID is the check runner whose check-runner key signed the run
	// (its keys are in stream executor-<id>); the payload must name it.
	RunnerID string `json:"runner_id" jsonschema:"minLength=1,maxLength=128,pattern=^\\S+$"`
	// Payload is the signed run: the bytes of a JSON CheckRun, base64 in
	// JSON; the envelope's signatures are over them.
	Payload []byte `json:"payload"`
	// Envelope is the DSSE envelope of the signed run; a run without a
	// signature is refused, and the refusal is recorded.
	Envelope events.Envelope `json:"envelope" jsonschema:"optional"`
}

// CommandName implements Command.
func (*RecordSignedCheck) CommandName() string { return "RecordSignedCheck" }

// Validate implements Command: the shape checks, field by field.
func (c *RecordSignedCheck) Validate() error {
	if err := checkID("mission_id", c.MissionID); err != nil {
		return err
	}
	if err := checkID("runner_id", c.RunnerID); err != nil {
		return err
	}
	p := bytes.TrimSpace(c.Payload)
	if len(p) == 0 || p[0] != '{' || !json.Valid(p) {
		return invalid("payload", "must be the base64 of the signed JSON object")
	}
	var r CheckRun
	if err := decodeStrict(c.Payload, &r); err != nil {
		var ie *InvalidCommandError
		if errors.As(err, &ie) {
			ie.Path = "data.payload" + ie.Path[len("data"):]
		}
		return err
	}
	if err := r.validate(); err != nil {
		return err
	}
	// No signature at all is refused by Decide, so that it is recorded;
	// more than 16 is a bound of the edge.
	if len(c.Envelope.Signatures) > maxEnvelopeSignatures {
		return invalid("envelope.signatures", "has %d signatures; an envelope carries 1 to %d", len(c.Envelope.Signatures), maxEnvelopeSignatures)
	}
	return nil
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
	x := in.States.Executor(c.RunnerID)
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
	var r CheckRun // Validate decoded it strictly already
	if err := json.Unmarshal(c.Payload, &r); err != nil {
		return nil, invalid("payload", "%v", err)
	}
	if r.MissionID != c.MissionID || r.RunnerID != c.RunnerID {
		det["payload_mission_id"], det["payload_runner_id"] = r.MissionID, r.RunnerID
		return nil, refuse(CodeResultNotForRequest, det, "the signed run is for mission %s by %s", r.MissionID, r.RunnerID)
	}
	env := c.Envelope
	env.Signatures = slices.Clone(env.Signatures)
	signed := NewEvent{Stream: MissionStream(c.MissionID), Type: TypeCheckRunSigned, Data: json.RawMessage(slices.Clone(c.Payload)), Envelope: &env}
	return recordCheck(in, CheckRecorded{MissionID: r.MissionID, CandidateHash: r.CandidateHash, CheckID: r.CheckID, ArgvHash: r.ArgvHash,
		Outcome: r.Outcome, Runner: r.RunnerID, RunnerKind: RunnerIndependent, ExitCode: r.ExitCode, Duration: r.Duration,
		OutputBytes: r.OutputBytes, OutputSHA256: r.OutputSHA256, SignedBy: r.RunnerID, KeyIDs: ids, At: in.At}, &signed)
}
