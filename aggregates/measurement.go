package aggregates

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/greffe/greffe/events"
)

// Measurements: executors on GPU hosts run approved command lines and
// report signed results.
//
// Keys (stream "executor-<id>"). RegisterExecutorKey needs an "activation"
// approval whose subject is the executor's stream, "executor-<id>", spent
// in the same append: registering a key activates an executor. The events
// are events.TypeExecutorKeyRegistered/TypeExecutorKeyRevoked with
// events.KeyRegisteredData/KeyRevokedData, so an auditor folds them with
// events.KeyRing. A key id is registered once; revocation is final.
//
// Requests (stream "measurement-<id>"). MeasurementRequested fixes the
// host, the exact argv (the request is the approval of that argv: an
// executor runs nothing else, and a result for another argv is refused),
// the kind, the timeout and the output cap.
//
// Claims. Exactly one claim wins: the first MeasurementClaimed. A request
// is never claimed twice, even after its lease expired: a claim while the
// lease runs is refused with lease_held, after it with already_claimed. A
// claim whose lease expired without a result is marked uncertain
// (MarkMeasurementUncertain, or by the late result itself) and is never
// retried automatically; measuring again is an explicit new request.
//
// Results. MeasurementRecorded's data is the executor's signed payload,
// stored verbatim, with the DSSE envelope: it must verify against a
// registered, unrevoked key of the claiming executor's stream, be for this
// request and executor, and carry the approved argv. A result after the
// lease expired is recorded beside the uncertainty (MeasurementUncertain
// then MeasurementRecorded), never over it; such a late result grounds no
// admission.

// MeasurementPayloadType is the DSSE payload type of a signed measurement.
const MeasurementPayloadType = "application/vnd.greffe.measurement+json"

// Executor is the state of one executor's keys (stream "executor-<id>").
type Executor struct {
	ID   string
	Host string
	// Keys by key id.
	Keys map[string]ExecutorKey
	// Events is the number of events folded.
	Events int
}

// ExecutorKey is one registered key.
type ExecutorKey struct {
	KeyID      string
	PublicKey  ed25519.PublicKey
	ApprovalID string
	Revoked    bool
	Registered EventRef
	Revocation EventRef
}

// Exists reports whether the executor stream has events.
func (x Executor) Exists() bool { return x.Events > 0 }

// Lookup implements events.KeyLookup over this executor's keys only: a
// key of another executor is unknown here.
func (x Executor) Lookup(keyID string) (ed25519.PublicKey, bool, bool) {
	k, ok := x.Keys[keyID]
	if !ok {
		return nil, false, false
	}
	return k.PublicKey, k.Revoked, true
}

// ActiveKeys returns the ids of the unrevoked keys, sorted.
func (x Executor) ActiveKeys() []string {
	var out []string
	for _, id := range sortedKeys(x.Keys) {
		if !x.Keys[id].Revoked {
			out = append(out, id)
		}
	}
	return out
}

// Evolve folds one event of the executor stream.
func (x Executor) Evolve(e *events.Event) (Executor, error) {
	switch e.Type {
	case events.TypeExecutorKeyRegistered:
		var d events.KeyRegisteredData
		if err := decodeData(e, &d); err != nil {
			return x, err
		}
		if len(d.PublicKey) != ed25519.PublicKeySize || events.KeyID(d.PublicKey) != d.KeyID {
			return x, foldError(e, errors.New("key id does not match the public key"))
		}
		keys := maps.Clone(x.Keys)
		if keys == nil {
			keys = map[string]ExecutorKey{}
		}
		if _, dup := keys[d.KeyID]; !dup { // as events.KeyRing: a key id is registered once
			keys[d.KeyID] = ExecutorKey{KeyID: d.KeyID, PublicKey: ed25519.PublicKey(d.PublicKey), ApprovalID: d.ApprovalID, Registered: RefOf(e)}
		}
		x.ID, x.Host, x.Keys = d.ExecutorID, d.Host, keys
	case events.TypeExecutorKeyRevoked:
		var d events.KeyRevokedData
		if err := decodeData(e, &d); err != nil {
			return x, err
		}
		keys := maps.Clone(x.Keys)
		if k, ok := keys[d.KeyID]; ok {
			k.Revoked, k.Revocation = true, RefOf(e)
			keys[d.KeyID] = k
		}
		x.Keys = keys
	default:
		return x, foldError(e, ErrUnknownEventType)
	}
	x.Events++
	return x, nil
}

// Measurement is the state of one measurement request (stream
// "measurement-<id>").
type Measurement struct {
	ID        string
	Requested bool
	Request   MeasurementRequested
	Claimed   bool
	Claim     MeasurementClaimed
	Uncertain bool
	Recorded  bool
	// Result is the decoded signed payload; Late is true when it was
	// recorded beside an uncertainty.
	Result MeasurementResult
	Late   bool
	// RequestRef, ClaimRef, UncertainRef and ResultRef prove each fact.
	RequestRef, ClaimRef, UncertainRef, ResultRef EventRef
	// Events is the number of events folded.
	Events int
}

// Measurement statuses.
const (
	MeasurementStatusMissing   = "missing"
	MeasurementStatusRequested = "requested"
	MeasurementStatusClaimed   = "claimed"
	MeasurementStatusRecorded  = "recorded"
	MeasurementStatusUncertain = "uncertain"
	// MeasurementStatusLate: a result recorded beside an uncertainty.
	MeasurementStatusLate = "late"
)

// Status returns where the request stands.
func (m Measurement) Status() string {
	switch {
	case !m.Requested:
		return MeasurementStatusMissing
	case m.Recorded && m.Late:
		return MeasurementStatusLate
	case m.Recorded:
		return MeasurementStatusRecorded
	case m.Uncertain:
		return MeasurementStatusUncertain
	case m.Claimed:
		return MeasurementStatusClaimed
	}
	return MeasurementStatusRequested
}

// Exists reports whether the measurement stream has events.
func (m Measurement) Exists() bool { return m.Events > 0 }

// Measurement kinds.
const (
	MeasurementRun   = "run"
	MeasurementProbe = "probe"
	MeasurementHash  = "hash"
)

// Measurement event types (the key events are the events package's).
const (
	TypeMeasurementRequested = "MeasurementRequested"
	TypeMeasurementClaimed   = "MeasurementClaimed"
	TypeMeasurementRecorded  = "MeasurementRecorded"
	TypeMeasurementUncertain = "MeasurementUncertain"
)

// MeasurementRequested is the data of TypeMeasurementRequested.
// OutputCapBytes bounds each of stdout and stderr excerpts, in bytes.
type MeasurementRequested struct {
	MeasurementID  string    `json:"measurement_id"`
	Host           string    `json:"host"`
	Argv           []string  `json:"argv"`
	Kind           string    `json:"kind"`
	Timeout        Duration  `json:"timeout"`
	OutputCapBytes int64     `json:"output_cap_bytes"`
	Purpose        string    `json:"purpose,omitempty"`
	MissionID      string    `json:"mission_id,omitempty"`
	At             time.Time `json:"at"`
}

// MeasurementClaimed is the data of TypeMeasurementClaimed.
type MeasurementClaimed struct {
	MeasurementID string    `json:"measurement_id"`
	ExecutorID    string    `json:"executor_id"`
	LeaseUntil    time.Time `json:"lease_until"`
	At            time.Time `json:"at"`
}

// MeasurementUncertain is the data of TypeMeasurementUncertain.
type MeasurementUncertain struct {
	MeasurementID string    `json:"measurement_id"`
	ExecutorID    string    `json:"executor_id"`
	LeaseUntil    time.Time `json:"lease_until"`
	Reason        string    `json:"reason"`
	At            time.Time `json:"at"`
}

// GPUReading is one GPU as the executor read it. Memory is in bytes.
type GPUReading struct {
	Name             string `json:"name"`
	Driver           string `json:"driver"`
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
	MemoryUsedBytes  uint64 `json:"memory_used_bytes"`
}

// MeasurementResult is the signed payload of TypeMeasurementRecorded, as
// the executor writes it. A reading the executor could not take is left
// out (GPU nil, RAMAvailableBytes nil, ResidentModelsObserved false), never
// written as zero: the screens treat absent as failing.
type MeasurementResult struct {
	MeasurementID          string             `json:"measurement_id"`
	ExecutorID             string             `json:"executor_id"`
	Host                   string             `json:"host"`
	HostIdentity           string             `json:"host_identity,omitempty"`
	Argv                   []string           `json:"argv"`
	StartedAt              time.Time          `json:"started_at"`
	EndedAt                time.Time          `json:"ended_at"`
	ExitCode               int                `json:"exit_code"`
	StdoutSHA256           string             `json:"stdout_sha256,omitempty"`
	StderrSHA256           string             `json:"stderr_sha256,omitempty"`
	StdoutExcerpt          string             `json:"stdout_excerpt,omitempty"`
	StderrExcerpt          string             `json:"stderr_excerpt,omitempty"`
	GPU                    *GPUReading        `json:"gpu,omitempty"`
	RAMAvailableBytes      *uint64            `json:"ram_available_bytes,omitempty"`
	ResidentModels         []string           `json:"resident_models,omitempty"`
	ResidentModelsObserved bool               `json:"resident_models_observed"`
	Metrics                map[string]float64 `json:"metrics,omitempty"`
}

// Evolve folds one event of the measurement stream.
func (m Measurement) Evolve(e *events.Event) (Measurement, error) {
	switch e.Type {
	case TypeMeasurementRequested:
		if err := decodeData(e, &m.Request); err != nil {
			return m, err
		}
		m.ID, m.Requested, m.RequestRef = m.Request.MeasurementID, true, RefOf(e)
	case TypeMeasurementClaimed:
		if err := decodeData(e, &m.Claim); err != nil {
			return m, err
		}
		m.Claimed, m.ClaimRef = true, RefOf(e)
	case TypeMeasurementUncertain:
		var d MeasurementUncertain
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Uncertain, m.UncertainRef = true, RefOf(e)
	case TypeMeasurementRecorded:
		var r MeasurementResult
		if err := decodeData(e, &r); err != nil {
			return m, err
		}
		m.Recorded, m.Result, m.Late, m.ResultRef = true, r, m.Uncertain, RefOf(e)
	default:
		return m, foldError(e, ErrUnknownEventType)
	}
	m.Events++
	return m, nil
}

// Refusal codes of the Measurement gates.
const (
	// CodeExecutorHostMismatch: the executor is registered on another host.
	CodeExecutorHostMismatch = "executor_host_mismatch"
	// CodeKeyAlreadyRegistered: this key id is already registered.
	CodeKeyAlreadyRegistered = "key_already_registered"
	// CodeKeyUnknown: the executor has no key under this id.
	CodeKeyUnknown = "key_unknown"
	// CodeMeasurementExists: a measurement id is requested once.
	CodeMeasurementExists = "measurement_exists"
	// CodeMeasurementBoundsExceeded: the timeout or output cap is above the
	// policy's measurement bounds.
	CodeMeasurementBoundsExceeded = "measurement_bounds_exceeded"
	// CodeMeasurementUnknown: no request under this id.
	CodeMeasurementUnknown = "measurement_unknown"
	// CodeExecutorKeyUnknown: the executor has no registered, unrevoked key
	// (a claim), or the signature names a key it does not have.
	CodeExecutorKeyUnknown = "executor_key_unknown"
	// CodeExecutorKeyRevoked: the signature names a revoked key.
	CodeExecutorKeyRevoked = "executor_key_revoked"
	// CodeSignatureInvalid: no signature, a signature that does not verify,
	// or another payload type.
	CodeSignatureInvalid = "signature_invalid"
	// CodeHostMismatch: the executor or result is on another host than the
	// request.
	CodeHostMismatch = "host_mismatch"
	// CodeLeaseHeld: the request is claimed and the lease still runs.
	CodeLeaseHeld = "lease_held"
	// CodeAlreadyClaimed: the request was claimed and its lease expired; it
	// is never claimed again (request a new measurement).
	CodeAlreadyClaimed = "already_claimed"
	// CodeLeaseInvalid: the lease ends before the claim or beyond the
	// request's timeout plus the policy's grace.
	CodeLeaseInvalid = "lease_invalid"
	// CodeMeasurementNotClaimed: the request was never claimed.
	CodeMeasurementNotClaimed = "measurement_not_claimed"
	// CodeNotClaimedByExecutor: the request was claimed by another
	// executor.
	CodeNotClaimedByExecutor = "not_claimed_by_executor"
	// CodeMeasurementAlreadyRecorded: the request already has its result.
	CodeMeasurementAlreadyRecorded = "measurement_already_recorded"
	// CodeResultNotForRequest: the signed payload names another request or
	// executor (a signed result replayed onto another request).
	CodeResultNotForRequest = "result_not_for_request"
	// CodeArgvNotApproved: the result's argv is not exactly the request's.
	CodeArgvNotApproved = "argv_not_approved"
	// CodeMeasurementTimeInvalid: started after it ended, or ended after
	// it was received.
	CodeMeasurementTimeInvalid = "measurement_time_invalid"
	// CodeOutputCapExceeded: an excerpt is longer than the request's cap.
	CodeOutputCapExceeded = "output_cap_exceeded"
)

// RegisterExecutorKey registers an executor's ed25519 public key under an
// "activation" approval for "executor-<id>".
type RegisterExecutorKey struct {
	ExecutorID string `json:"executor_id"`
	Host       string `json:"host"`
	PublicKey  []byte `json:"public_key"`
	ApprovalID string `json:"approval_id"`
}

// CommandName implements Command.
func (*RegisterExecutorKey) CommandName() string { return "RegisterExecutorKey" }

// Validate implements Command: the shape checks, field by field.
func (c *RegisterExecutorKey) Validate() error {
	if err := checkID("executor_id", c.ExecutorID); err != nil {
		return err
	}
	if err := checkID("host", c.Host); err != nil {
		return err
	}
	if len(c.PublicKey) != ed25519.PublicKeySize {
		return invalid("public_key", "is %d bytes; an ed25519 public key is %d (base64 in JSON)", len(c.PublicKey), ed25519.PublicKeySize)
	}
	if c.ApprovalID != "" {
		return checkID("approval_id", c.ApprovalID)
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *RegisterExecutorKey) Streams(States) []string {
	s := []string{ExecutorStream(c.ExecutorID)}
	if c.ApprovalID != "" {
		s = append(s, ApprovalStream(c.ApprovalID))
	}
	return s
}

// Decide implements Command: the gates.
func (c *RegisterExecutorKey) Decide(in Inputs) ([]NewEvent, error) {
	x := in.States.Executor(c.ExecutorID)
	if x.Exists() && x.Host != c.Host {
		return nil, refuse(CodeExecutorHostMismatch, map[string]any{"executor_id": c.ExecutorID, "host": c.Host, "registered_host": x.Host},
			"executor %s is registered on host %s, not %s", c.ExecutorID, x.Host, c.Host)
	}
	keyID := events.KeyID(c.PublicKey)
	if _, ok := x.Keys[keyID]; ok {
		return nil, refuse(CodeKeyAlreadyRegistered, map[string]any{"executor_id": c.ExecutorID, "key_id": keyID},
			"key %s is already registered; a key id is registered once and revocation is final", keyID)
	}
	consume, err := in.States.Approval(c.ApprovalID).Authorize(ActionActivation, ExecutorStream(c.ExecutorID), c.CommandName(), in.At)
	if err != nil {
		return nil, err
	}
	return []NewEvent{
		{Stream: ExecutorStream(c.ExecutorID), Type: events.TypeExecutorKeyRegistered, Data: events.KeyRegisteredData{
			ExecutorID: c.ExecutorID, Host: c.Host, KeyID: keyID, PublicKey: c.PublicKey, ApprovalID: c.ApprovalID,
		}},
		consume,
	}, nil
}

// RevokeExecutorKey revokes a key; revoking it again appends nothing.
type RevokeExecutorKey struct {
	ExecutorID string `json:"executor_id"`
	KeyID      string `json:"key_id"`
	Reason     string `json:"reason"`
}

// CommandName implements Command.
func (*RevokeExecutorKey) CommandName() string { return "RevokeExecutorKey" }

// Validate implements Command: the shape checks, field by field.
func (c *RevokeExecutorKey) Validate() error {
	if err := checkID("executor_id", c.ExecutorID); err != nil {
		return err
	}
	if err := checkText("key_id", c.KeyID, true, maxShortText); err != nil {
		return err
	}
	return checkText("reason", c.Reason, true, maxLongText)
}

// Streams implements Command: the streams this command reads.
func (c *RevokeExecutorKey) Streams(States) []string { return []string{ExecutorStream(c.ExecutorID)} }

// Decide implements Command: the gates.
func (c *RevokeExecutorKey) Decide(in Inputs) ([]NewEvent, error) {
	x := in.States.Executor(c.ExecutorID)
	k, ok := x.Keys[c.KeyID]
	if !ok {
		return nil, refuse(CodeKeyUnknown, map[string]any{"executor_id": c.ExecutorID, "key_id": c.KeyID}, "executor %s has no key %s", c.ExecutorID, c.KeyID)
	}
	if k.Revoked {
		return nil, nil
	}
	return []NewEvent{{Stream: ExecutorStream(c.ExecutorID), Type: events.TypeExecutorKeyRevoked, Data: events.KeyRevokedData{
		ExecutorID: c.ExecutorID, KeyID: c.KeyID, Reason: c.Reason,
	}}}, nil
}

// RequestMeasurement asks for an exact argv to be run on a host.
type RequestMeasurement struct {
	MeasurementID  string   `json:"measurement_id"`
	Host           string   `json:"host"`
	Argv           []string `json:"argv"`
	Kind           string   `json:"kind"`
	Timeout        Duration `json:"timeout"`
	OutputCapBytes int64    `json:"output_cap_bytes"`
	Purpose        string   `json:"purpose"`
	MissionID      string   `json:"mission_id"`
}

// CommandName implements Command.
func (*RequestMeasurement) CommandName() string { return "RequestMeasurement" }

// Validate implements Command: the shape checks, field by field.
func (c *RequestMeasurement) Validate() error {
	if err := checkID("measurement_id", c.MeasurementID); err != nil {
		return err
	}
	if err := checkID("host", c.Host); err != nil {
		return err
	}
	if len(c.Argv) == 0 || len(c.Argv) > maxListLen {
		return invalid("argv", "has %d entries; an exact argv has 1 to %d", len(c.Argv), maxListLen)
	}
	for i, a := range c.Argv {
		if err := checkText(indexPath("argv", i), a, i == 0, maxLongText); err != nil {
			return err
		}
	}
	if err := checkOneOf("kind", c.Kind, MeasurementRun, MeasurementProbe, MeasurementHash); err != nil {
		return err
	}
	if c.Timeout.Duration <= 0 {
		return invalid("timeout", "is %s; must be positive", c.Timeout)
	}
	if c.OutputCapBytes <= 0 {
		return invalid("output_cap_bytes", "is %d; must be positive", c.OutputCapBytes)
	}
	if err := checkText("purpose", c.Purpose, false, maxLongText); err != nil {
		return err
	}
	if c.MissionID != "" {
		return checkID("mission_id", c.MissionID)
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *RequestMeasurement) Streams(States) []string {
	return []string{MeasurementStream(c.MeasurementID)}
}

// Decide implements Command: the gates.
func (c *RequestMeasurement) Decide(in Inputs) ([]NewEvent, error) {
	if in.States.Measurement(c.MeasurementID).Requested {
		return nil, refuse(CodeMeasurementExists, map[string]any{"measurement_id": c.MeasurementID}, "measurement %s was already requested", c.MeasurementID)
	}
	mp := in.Policy.Measurement
	if c.Timeout.Duration > mp.MaxTimeout.Duration || c.OutputCapBytes > mp.MaxOutputBytes {
		return nil, refuse(CodeMeasurementBoundsExceeded, map[string]any{"timeout": c.Timeout.String(), "max_timeout": mp.MaxTimeout.String(),
			"output_cap_bytes": c.OutputCapBytes, "max_output_bytes": mp.MaxOutputBytes},
			"the request's timeout or output cap is above the node's measurement bounds")
	}
	return []NewEvent{{Stream: MeasurementStream(c.MeasurementID), Type: TypeMeasurementRequested, Data: MeasurementRequested{
		MeasurementID: c.MeasurementID, Host: c.Host, Argv: c.Argv, Kind: c.Kind, Timeout: c.Timeout,
		OutputCapBytes: c.OutputCapBytes, Purpose: c.Purpose, MissionID: c.MissionID, At: in.At,
	}}}, nil
}

// ClaimMeasurement claims a request for an executor until LeaseUntil.
type ClaimMeasurement struct {
	MeasurementID string    `json:"measurement_id"`
	ExecutorID    string    `json:"executor_id"`
	LeaseUntil    time.Time `json:"lease_until"`
}

// CommandName implements Command.
func (*ClaimMeasurement) CommandName() string { return "ClaimMeasurement" }

// Validate implements Command: the shape checks, field by field.
func (c *ClaimMeasurement) Validate() error {
	if err := checkID("measurement_id", c.MeasurementID); err != nil {
		return err
	}
	if err := checkID("executor_id", c.ExecutorID); err != nil {
		return err
	}
	if c.LeaseUntil.IsZero() {
		return invalid("lease_until", "is required")
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *ClaimMeasurement) Streams(States) []string {
	return []string{MeasurementStream(c.MeasurementID), ExecutorStream(c.ExecutorID)}
}

// Decide implements Command: the gates.
func (c *ClaimMeasurement) Decide(in Inputs) ([]NewEvent, error) {
	m := in.States.Measurement(c.MeasurementID)
	det := map[string]any{"measurement_id": c.MeasurementID, "executor_id": c.ExecutorID}
	switch {
	case !m.Requested:
		return nil, refuse(CodeMeasurementUnknown, det, "no measurement %s was requested", c.MeasurementID)
	case m.Recorded:
		return nil, refuse(CodeMeasurementAlreadyRecorded, det, "measurement %s already has its result", c.MeasurementID)
	case m.Claimed && in.At.Before(m.Claim.LeaseUntil):
		det["claimed_by"], det["lease_until"] = m.Claim.ExecutorID, m.Claim.LeaseUntil
		return nil, refuse(CodeLeaseHeld, det, "measurement %s is claimed by %s until %s", c.MeasurementID, m.Claim.ExecutorID, m.Claim.LeaseUntil.UTC().Format(time.RFC3339))
	case m.Claimed:
		det["claimed_by"], det["lease_until"] = m.Claim.ExecutorID, m.Claim.LeaseUntil
		return nil, refuse(CodeAlreadyClaimed, det,
			"measurement %s was claimed by %s and its lease expired: its outcome is uncertain and it is never claimed again; request a new measurement", c.MeasurementID, m.Claim.ExecutorID)
	}
	x := in.States.Executor(c.ExecutorID)
	if len(x.ActiveKeys()) == 0 {
		return nil, refuse(CodeExecutorKeyUnknown, det, "executor %s has no registered, unrevoked key", c.ExecutorID)
	}
	if x.Host != m.Request.Host {
		det["host"], det["executor_host"] = m.Request.Host, x.Host
		return nil, refuse(CodeHostMismatch, det, "measurement %s runs on %s; executor %s is on %s", c.MeasurementID, m.Request.Host, c.ExecutorID, x.Host)
	}
	maxLease := in.At.Add(m.Request.Timeout.Duration + in.Policy.Measurement.LeaseGrace.Duration)
	if !c.LeaseUntil.After(in.At) || c.LeaseUntil.After(maxLease) {
		det["lease_until"], det["max_lease_until"] = c.LeaseUntil, maxLease
		return nil, refuse(CodeLeaseInvalid, det, "the lease must end after the claim and by the request's timeout plus grace (%s)", maxLease.UTC().Format(time.RFC3339))
	}
	return []NewEvent{{Stream: MeasurementStream(c.MeasurementID), Type: TypeMeasurementClaimed, Data: MeasurementClaimed{
		MeasurementID: c.MeasurementID, ExecutorID: c.ExecutorID, LeaseUntil: c.LeaseUntil.UTC(), At: in.At,
	}}}, nil
}

// MarkMeasurementUncertain records that a claimed request's lease expired
// without a result. Marking it again appends nothing.
type MarkMeasurementUncertain struct {
	MeasurementID string `json:"measurement_id"`
}

// CommandName implements Command.
func (*MarkMeasurementUncertain) CommandName() string { return "MarkMeasurementUncertain" }

// Validate implements Command: the shape checks, field by field.
func (c *MarkMeasurementUncertain) Validate() error {
	return checkID("measurement_id", c.MeasurementID)
}

// Streams implements Command: the streams this command reads.
func (c *MarkMeasurementUncertain) Streams(States) []string {
	return []string{MeasurementStream(c.MeasurementID)}
}

// Decide implements Command: the gates.
func (c *MarkMeasurementUncertain) Decide(in Inputs) ([]NewEvent, error) {
	m := in.States.Measurement(c.MeasurementID)
	det := map[string]any{"measurement_id": c.MeasurementID}
	switch {
	case !m.Requested:
		return nil, refuse(CodeMeasurementUnknown, det, "no measurement %s was requested", c.MeasurementID)
	case m.Uncertain:
		return nil, nil
	case m.Recorded:
		return nil, refuse(CodeMeasurementAlreadyRecorded, det, "measurement %s has its result", c.MeasurementID)
	case !m.Claimed:
		return nil, refuse(CodeMeasurementNotClaimed, det, "measurement %s was never claimed; nothing is uncertain", c.MeasurementID)
	case in.At.Before(m.Claim.LeaseUntil):
		det["lease_until"] = m.Claim.LeaseUntil
		return nil, refuse(CodeLeaseHeld, det, "the lease of measurement %s runs until %s", c.MeasurementID, m.Claim.LeaseUntil.UTC().Format(time.RFC3339))
	}
	return []NewEvent{m.uncertain(in.At)}, nil
}

func (m Measurement) uncertain(at time.Time) NewEvent {
	return NewEvent{Stream: MeasurementStream(m.ID), Type: TypeMeasurementUncertain, Data: MeasurementUncertain{
		MeasurementID: m.ID, ExecutorID: m.Claim.ExecutorID, LeaseUntil: m.Claim.LeaseUntil,
		Reason: "lease expired without a result", At: at,
	}}
}

// RecordMeasurement records an executor's signed result. Payload is the
// exact signed bytes (a JSON object, base64 in the command's JSON so no
// client re-serialises it); Envelope carries the DSSE signatures over it.
type RecordMeasurement struct {
	MeasurementID string          `json:"measurement_id"`
	ExecutorID    string          `json:"executor_id"`
	Payload       []byte          `json:"payload"`
	Envelope      events.Envelope `json:"envelope"`
}

// CommandName implements Command.
func (*RecordMeasurement) CommandName() string { return "RecordMeasurement" }

// Validate implements Command: the shape checks, field by field.
func (c *RecordMeasurement) Validate() error {
	if err := checkID("measurement_id", c.MeasurementID); err != nil {
		return err
	}
	if err := checkID("executor_id", c.ExecutorID); err != nil {
		return err
	}
	p := bytes.TrimSpace(c.Payload)
	if len(p) == 0 || p[0] != '{' || !json.Valid(p) {
		return invalid("payload", "must be the base64 of the signed JSON object")
	}
	var r MeasurementResult
	if err := decodeStrict(c.Payload, &r); err != nil {
		var ie *InvalidCommandError
		if errors.As(err, &ie) {
			ie.Path = "data.payload" + ie.Path[len("data"):]
		}
		return err
	}
	if len(c.Envelope.Signatures) == 0 || len(c.Envelope.Signatures) > 16 {
		return invalid("envelope.signatures", "an envelope carries 1 to 16 signatures")
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *RecordMeasurement) Streams(States) []string {
	return []string{MeasurementStream(c.MeasurementID), ExecutorStream(c.ExecutorID)}
}

// Decide implements Command: the gates.
func (c *RecordMeasurement) Decide(in Inputs) ([]NewEvent, error) {
	m := in.States.Measurement(c.MeasurementID)
	det := map[string]any{"measurement_id": c.MeasurementID, "executor_id": c.ExecutorID}
	switch {
	case !m.Requested:
		return nil, refuse(CodeMeasurementUnknown, det, "no measurement %s was requested", c.MeasurementID)
	case !m.Claimed:
		return nil, refuse(CodeMeasurementNotClaimed, det, "measurement %s was never claimed", c.MeasurementID)
	case m.Claim.ExecutorID != c.ExecutorID:
		det["claimed_by"] = m.Claim.ExecutorID
		return nil, refuse(CodeNotClaimedByExecutor, det, "measurement %s was claimed by %s, not %s", c.MeasurementID, m.Claim.ExecutorID, c.ExecutorID)
	case m.Recorded:
		return nil, refuse(CodeMeasurementAlreadyRecorded, det, "measurement %s already has its result", c.MeasurementID)
	}
	if c.Envelope.PayloadType != MeasurementPayloadType {
		det["payload_type"] = c.Envelope.PayloadType
		return nil, refuse(CodeSignatureInvalid, det, "the envelope's payload type is %q, not %q", c.Envelope.PayloadType, MeasurementPayloadType)
	}
	x := in.States.Executor(c.ExecutorID)
	if _, err := events.VerifyEnvelope(c.Payload, &c.Envelope, x.Lookup); err != nil {
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
		return nil, refuse(code, det, "the measurement's signature does not verify against executor %s's keys: %v", c.ExecutorID, err)
	}
	var r MeasurementResult // Validate decoded it strictly already
	if err := json.Unmarshal(c.Payload, &r); err != nil {
		return nil, invalid("payload", "%v", err)
	}
	switch {
	case r.MeasurementID != c.MeasurementID || r.ExecutorID != c.ExecutorID:
		det["payload_measurement_id"], det["payload_executor_id"] = r.MeasurementID, r.ExecutorID
		return nil, refuse(CodeResultNotForRequest, det, "the signed result is for measurement %s by %s", r.MeasurementID, r.ExecutorID)
	case !slices.Equal(r.Argv, m.Request.Argv):
		det["argv"], det["approved_argv"] = r.Argv, m.Request.Argv
		return nil, refuse(CodeArgvNotApproved, det, "the result's argv is not exactly the approved argv of the request")
	case r.Host != m.Request.Host:
		det["host"], det["result_host"] = m.Request.Host, r.Host
		return nil, refuse(CodeHostMismatch, det, "the result comes from host %s, the request is for %s", r.Host, m.Request.Host)
	case r.StartedAt.IsZero() || r.EndedAt.Before(r.StartedAt) || r.EndedAt.After(in.At):
		det["started_at"], det["ended_at"], det["at"] = r.StartedAt, r.EndedAt, in.At
		return nil, refuse(CodeMeasurementTimeInvalid, det, "the result must start, then end, before it is received")
	case int64(len(r.StdoutExcerpt)) > m.Request.OutputCapBytes || int64(len(r.StderrExcerpt)) > m.Request.OutputCapBytes:
		det["output_cap_bytes"], det["stdout_bytes"], det["stderr_bytes"] = m.Request.OutputCapBytes, len(r.StdoutExcerpt), len(r.StderrExcerpt)
		return nil, refuse(CodeOutputCapExceeded, det, "an excerpt is longer than the request's output cap of %d bytes", m.Request.OutputCapBytes)
	}
	env := c.Envelope
	env.Signatures = slices.Clone(env.Signatures)
	rec := NewEvent{Stream: MeasurementStream(c.MeasurementID), Type: TypeMeasurementRecorded, Data: json.RawMessage(slices.Clone(c.Payload)), Envelope: &env}
	if !m.Uncertain && in.At.After(m.Claim.LeaseUntil) {
		// A late result: the uncertainty is recorded first, the result
		// beside it, never over it.
		return []NewEvent{m.uncertain(in.At), rec}, nil
	}
	return []NewEvent{rec}, nil
}
