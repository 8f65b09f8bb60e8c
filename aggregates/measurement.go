package aggregates

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/greffe/greffe/events"
)

// Measurements: executors on GPU hosts run approved command lines and
// report signed results.
//
// Keys (stream "executor-<id>") are executor.go's: the registered,
// unrevoked keys of an executor are the only ones its results verify with.
//
// Requests (stream "measurement-<id>"). MeasurementRequested fixes the
// host, the exact argv (an executor runs nothing else, and a result for
// another argv is refused), the kind, the timeout and the output cap. A
// writer's request alone is not an approval to run (issue #20): the
// executor runs what its own host's policy allows, or what an approver
// approved (ApproveMeasurement: MeasurementApproved, before any claim). The kind says what the argv
// means:
//
//   - run: a command line, run without a shell;
//   - probe: an OpenAI-compatible endpoint of a declared provider,
//     ["models", ENDPOINT] or ["smoke", ENDPOINT, EXACT_TAG] (see
//     ParseProbeArgv); the endpoint and tag must be the provider's own,
//     since a probe of anything else proves nothing about it;
//   - hash: artifact files of a binding, one "ROLE=/absolute/path" per
//     entry (see ParseHashArgv).
//
// A probe's signed result is also recorded as the provider's
// ProbeRecorded, and a hash's as the binding's ArtifactHashed events (one
// per file hashed, verifier role supervisor: the executor is registered
// under an owner's approval and the worker never holds its key), in the
// same append as the MeasurementRecorded they derive from, each naming
// the measurement. A late result derives nothing.
//
// Leases. A claim's lease may be renewed by its executor while it runs
// (RenewMeasurementLease), never shortened, never past the claim's time
// plus the request's timeout plus the policy's grace, and never once it
// has expired: from then on the node may have marked it uncertain.
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

// Measurement is the state of one measurement request (stream
// "measurement-<id>").
type Measurement struct {
	ID        string
	Requested bool
	Request   MeasurementRequested
	// Approved is true once an approver approved this exact request
	// (MeasurementApproved); ApprovedBy is that principal's name.
	Approved   bool
	ApprovedBy string
	Claimed    bool
	// Claim is the winning claim; its LeaseUntil follows the renewals.
	Claim MeasurementClaimed
	// Renewals counts the lease renewals folded.
	Renewals  int
	Uncertain bool
	Recorded  bool
	// Result is the decoded signed payload; Late is true when it was
	// recorded beside an uncertainty.
	Result MeasurementResult
	Late   bool
	// RequestRef, ApprovalRef, ClaimRef, UncertainRef and ResultRef prove
	// each fact.
	RequestRef, ApprovalRef, ClaimRef, UncertainRef, ResultRef EventRef
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

// MeasurementKind is a measurement's kind: run, probe or hash.
type MeasurementKind string

// Values lists the measurement kinds.
func (MeasurementKind) Values() []string {
	return []string{MeasurementRun, MeasurementProbe, MeasurementHash}
}

// Measurement event types (the key events are the events package's).
const (
	TypeMeasurementRequested = "MeasurementRequested"
	TypeMeasurementClaimed   = "MeasurementClaimed"
	TypeMeasurementRecorded  = "MeasurementRecorded"
	TypeMeasurementUncertain = "MeasurementUncertain"
	// TypeMeasurementLeaseRenewed moves a claim's lease forward.
	TypeMeasurementLeaseRenewed = "MeasurementLeaseRenewed"
	// TypeMeasurementApproved is an approver's approval of one exact
	// request (issue #20).
	TypeMeasurementApproved = "MeasurementApproved"
)

// MeasurementApproved is the data of TypeMeasurementApproved: a principal
// of the approver role (or the admin) approved this exact request, before
// any executor claimed it. The node runs nothing; an executor whose host
// policy does not itself allow the request's argv (executor/) runs it only
// when it carries this approval.
type MeasurementApproved struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID string `json:"measurement_id"`
	// Host is the request's host, copied from it so that an executor
	// following the log tells the approvals of its own host from the
	// others' without reading every measurement's stream; absent from
	// approvals recorded before it was added.
	Host string `json:"host,omitempty"`
	// Approver is the authenticated principal that approved it ("anonymous"
	// on a node without tokens).
	Approver string `json:"approver"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// MeasurementRequested is the data of TypeMeasurementRequested.
// OutputCapBytes bounds each of stdout and stderr excerpts, in bytes.
type MeasurementRequested struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID string `json:"measurement_id"`
	// Host is the host's name: where the executor runs and the work is done.
	Host string `json:"host"`
	// Argv is the exact command line: the program and its arguments, in order.
	Argv []string `json:"argv"`
	// Kind is the measurement's kind: run (an argv), probe (an endpoint) or
	// hash (a binding's files).
	Kind string `json:"kind"`
	// Timeout is the longest the work may run (a Go duration such as "30s").
	Timeout Duration `json:"timeout"`
	// OutputCapBytes is the most output the executor keeps of each stream, in
	// bytes; the policy's default when 0.
	OutputCapBytes int64 `json:"output_cap_bytes"`
	// Purpose says what the measurement is for: proposal, qualification or
	// direct_reply.
	Purpose string `json:"purpose,omitempty"`
	// MissionID is the mission the measurement serves; empty when none.
	MissionID string `json:"mission_id,omitempty"`
	// Provider is the provider a probe is for; BindingID the binding a
	// hash is for. Empty for the other kinds.
	Provider string `json:"provider,omitempty"`
	// BindingID is the binding a hash hashes; empty for a run or a probe.
	BindingID string `json:"binding_id,omitempty"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// MeasurementClaimed is the data of TypeMeasurementClaimed.
type MeasurementClaimed struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID string `json:"measurement_id"`
	// ExecutorID is the executor's id, as registered with its key.
	ExecutorID string `json:"executor_id"`
	// LeaseUntil is when the executor's lease on the measurement ends unless
	// renewed (RFC 3339).
	LeaseUntil time.Time `json:"lease_until"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// MeasurementLeaseRenewed is the data of TypeMeasurementLeaseRenewed.
type MeasurementLeaseRenewed struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID string `json:"measurement_id"`
	// ExecutorID is the executor's id, as registered with its key.
	ExecutorID string `json:"executor_id"`
	// LeaseUntil is when the executor's lease on the measurement ends unless
	// renewed (RFC 3339).
	LeaseUntil time.Time `json:"lease_until"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// MeasurementUncertain is the data of TypeMeasurementUncertain.
type MeasurementUncertain struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID string `json:"measurement_id"`
	// ExecutorID is the executor that held the lease.
	ExecutorID string `json:"executor_id"`
	// LeaseUntil is when the lease ended.
	LeaseUntil time.Time `json:"lease_until"`
	// Reason says why the outcome is unknown (e.g. the lease expired).
	Reason string `json:"reason"`
	// At is when the node decided it: the command's time (the node's clock, or
	// the command's at where the node allows it).
	At time.Time `json:"at"`
}

// GPUReading is one GPU as the executor read it. Memory is in bytes.
type GPUReading struct {
	// Name is the GPU's model name.
	Name string `json:"name"`
	// Driver is the GPU driver's version.
	Driver string `json:"driver"`
	// MemoryTotalBytes is the GPU's memory, in bytes.
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
	// MemoryUsedBytes is the GPU memory in use, in bytes.
	MemoryUsedBytes uint64 `json:"memory_used_bytes"`
}

// MeasurementResult is the signed payload of TypeMeasurementRecorded, as
// the executor writes it. A reading the executor could not take is left
// out (GPU nil, RAMAvailableBytes nil, ResidentModelsObserved false), never
// written as zero: the screens treat absent as failing.
//
// GPU, RAMAvailableBytes and ResidentModels are what the admission screens
// read: the executor fills them with the worse of its Before and After
// snapshots (least RAM, most GPU memory used), and leaves GPU out when the
// GPU's memory could not be read.
type MeasurementResult struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID string `json:"measurement_id"`
	// ExecutorID is the executor that ran it.
	ExecutorID string `json:"executor_id"`
	// Host is the host the executor ran on (the request's).
	Host string `json:"host"`
	// HostIdentity is the host's identity as the executor read it (e.g. its
	// machine id); empty when unknown.
	HostIdentity string `json:"host_identity,omitempty"`
	// Argv is the exact argv the executor ran (the request's).
	Argv []string `json:"argv"`
	// StartedAt is when the measurement started, snapshots included (RFC
	// 3339); never before its request.
	StartedAt time.Time `json:"started_at"`
	// EndedAt is when the measurement ended, snapshots included (RFC 3339).
	EndedAt time.Time `json:"ended_at"`
	// ExitCode is the process's own exit code for an exited run, 0 when
	// completed, -1 otherwise.
	ExitCode int `json:"exit_code"`
	// StdoutSHA256 is the hex SHA-256 of the whole standard output.
	StdoutSHA256 string `json:"stdout_sha256,omitempty"`
	// StderrSHA256 is the hex SHA-256 of the whole standard error.
	StderrSHA256 string `json:"stderr_sha256,omitempty"`
	// StdoutExcerpt is the kept start of the standard output, UTF-8 (up to the
	// output cap).
	StdoutExcerpt string `json:"stdout_excerpt,omitempty"`
	// StderrExcerpt is the kept start of the standard error, UTF-8 (up to the
	// output cap).
	StderrExcerpt string `json:"stderr_excerpt,omitempty"`
	// GPU is the GPU the result was measured on; absent when none was read.
	GPU *GPUReading `json:"gpu,omitempty"`
	// RAMAvailableBytes is the host's available RAM, in bytes; absent when it
	// could not be read.
	RAMAvailableBytes *uint64 `json:"ram_available_bytes,omitempty"`
	// ResidentModels are the models the host's model servers had loaded.
	ResidentModels []string `json:"resident_models,omitempty"`
	// ResidentModelsObserved says whether resident models were observed at all
	// (false: unknown, not none).
	ResidentModelsObserved bool `json:"resident_models_observed"`
	// Metrics are numbers the work reported, by name.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// MetricUnits holds the unit of each metric that declared one.
	MetricUnits map[string]string `json:"metric_units,omitempty"`
	// Outcome says how the work ended (Result… constants); ExitCode is the
	// process's own for ResultExited, 0 for ResultCompleted, -1 otherwise.
	// Error says why, when something did not go as asked.
	Outcome string `json:"outcome,omitempty"`
	// Error says what went wrong; empty when nothing did.
	Error string `json:"error,omitempty"`
	// Duration is how long the work itself ran (the process, the probe or
	// the hashing), on the executor's monotonic clock; StartedAt and
	// EndedAt span the whole measurement, snapshots included.
	Duration Duration `json:"duration,omitzero"`
	// StdoutBytes and StderrBytes are the whole streams' sizes (what the
	// SHA-256 covers); a Truncated flag says the excerpt is not the whole
	// stream (cut at the output cap, or invalid UTF-8 replaced).
	StdoutBytes int64 `json:"stdout_bytes,omitempty"`
	// StderrBytes is the whole standard error's size, in bytes.
	StderrBytes int64 `json:"stderr_bytes,omitempty"`
	// StdoutTruncated says the excerpt is not the whole standard output.
	StdoutTruncated bool `json:"stdout_truncated,omitempty"`
	// StderrTruncated says the excerpt is not the whole standard error.
	StderrTruncated bool `json:"stderr_truncated,omitempty"`
	// Before and After are the resource snapshots taken around the work.
	Before *ResourceSnapshot `json:"before,omitempty"`
	// After is the resource snapshot taken after the work.
	After *ResourceSnapshot `json:"after,omitempty"`
	// Probe is a probe's reading; Artifacts a hash's, one per approved
	// entry in order. Both are absent from a run.
	Probe *ProbeReading `json:"probe,omitempty"`
	// Artifacts are a hash's readings, one per approved file in order; absent
	// from a run or a probe.
	Artifacts ArtifactReadings `json:"artifacts,omitempty"`
}

// Result outcomes (MeasurementResult.Outcome).
const (
	// ResultExited: the process exited by itself; ExitCode is its code.
	ResultExited = "exited"
	// ResultTimeout: the process group was killed at the request's timeout.
	ResultTimeout = "timeout"
	// ResultSignaled: the process died of a signal the executor did not send.
	ResultSignaled = "signaled"
	// ResultStartFailed: the program could not be started (not on PATH,
	// not executable).
	ResultStartFailed = "start_failed"
	// ResultCompleted: a probe or a hash ran to its end; its reading says
	// what it found.
	ResultCompleted = "completed"
	// ResultRefusedByHost: the executor's host policy refused the request
	// (issue #20): nothing was run, read or dialled, and no snapshot taken
	// (or, for a probe refused at the dial, nothing connected). Error
	// starts with the host policy's code ("run_not_allowed: …"). Such a
	// result proves nothing about what it was asked to measure: it grounds
	// no admission (measurement_refused_by_host), is no evidence, derives
	// no ArtifactHashed, and its probe's ProbeRecorded is refused, never
	// live.
	ResultRefusedByHost = "refused_by_host"
)

// resultOutcomes returns every outcome a recorded result may carry (a new
// slice on each call): any other, or none, is result_outcome_unknown.
func resultOutcomes() []string {
	return []string{ResultExited, ResultTimeout, ResultSignaled, ResultStartFailed, ResultCompleted, ResultRefusedByHost}
}

// ResourceSnapshot is what the executor read of its host at one instant.
// A reading it could not take is absent, with the reason, never zero.
type ResourceSnapshot struct {
	// At is when the snapshot was taken (RFC 3339).
	At time.Time `json:"at"`
	// Hostname is the host's name as the operating system gives it.
	Hostname string `json:"hostname,omitempty"`
	// CPUCount is the number of CPUs the executor sees.
	CPUCount int `json:"cpu_count"`
	// ExecutorVersion is the executor's build version.
	ExecutorVersion string `json:"executor_version"`
	// RAMAvailableBytes is MemAvailable from /proc/meminfo, in bytes.
	RAMAvailableBytes *uint64 `json:"ram_available_bytes,omitempty"`
	// RAMError says why RAM could not be read; empty when it was.
	RAMError string `json:"ram_error,omitempty"`
	// GPUStatus is one of the GPU… constants; GPUs are listed only when
	// present.
	GPUStatus string `json:"gpu_status"`
	// GPUError says why the GPUs could not be read; empty when they were.
	GPUError string `json:"gpu_error,omitempty"`
	// GPUs are the GPUs read, when present.
	GPUs []GPUSample `json:"gpus,omitempty"`
	// GPUProcesses are the processes holding GPU memory ("pid name"), when
	// GPUProcessesObserved.
	GPUProcesses []string `json:"gpu_processes,omitempty"`
	// GPUProcessesObserved says whether GPU processes were observed at all
	// (false: unknown, not none).
	GPUProcessesObserved bool `json:"gpu_processes_observed"`
}

// GPU statuses of a ResourceSnapshot.
const (
	// GPUPresent: nvidia-smi answered with at least one GPU.
	GPUPresent = "present"
	// GPUAbsent: no nvidia-smi on PATH, or it lists no GPU.
	GPUAbsent = "absent"
	// GPUTimeout: nvidia-smi did not answer within the executor's bound.
	GPUTimeout = "timeout"
	// GPUFailed: nvidia-smi failed or answered something unreadable.
	GPUFailed = "error"
)

// GPUSample is one GPU line of nvidia-smi. A field nvidia-smi reports as
// unavailable ("[N/A]", as unified-memory GPUs do for memory) is nil.
type GPUSample struct {
	// Index is the GPU's index on the host, from 0.
	Index int `json:"index"`
	// Name is the GPU's model name.
	Name string `json:"name"`
	// Driver is the GPU driver's version.
	Driver string `json:"driver"`
	// MemoryTotalBytes is the GPU's memory, in bytes; absent when unread.
	MemoryTotalBytes *uint64 `json:"memory_total_bytes,omitempty"`
	// MemoryUsedBytes is the GPU memory in use, in bytes; absent when unread.
	MemoryUsedBytes *uint64 `json:"memory_used_bytes,omitempty"`
	// UtilizationPercent is the GPU's utilisation, 0 to 100; absent when
	// unread.
	UtilizationPercent *float64 `json:"utilization_percent,omitempty"`
}

// ProbeReading is what a probe found. Outcome is one of the Probe…
// outcomes: ok when the endpoint answered (and, for smoke, completed);
// whether the exact tag is listed is judged by the node against the
// provider's configured tag, never by the executor.
type ProbeReading struct {
	// Kind is the probe's kind: models (GET /v1/models) or smoke (also a
	// bounded completion).
	Kind LiveProbeKind `json:"kind"`
	// Endpoint is the endpoint probed.
	Endpoint string `json:"endpoint"`
	// Outcome is how the probe ended: ok, failed, unreachable or timeout.
	Outcome ReadingOutcome `json:"outcome"`
	// Models are the model tags the endpoint listed.
	Models ModelTags `json:"models,omitempty"`
	// Latency is how long the probe's answer took (a Go duration).
	Latency NonNegativeDuration `json:"latency"`
	// HTTPStatus is the endpoint's HTTP status; 0 when none was received.
	HTTPStatus int `json:"http_status,omitempty"`
	// Error says what went wrong; empty when the probe was ok.
	Error string `json:"error,omitempty"`
	// SmokeFinishReason is the completion's finish_reason ("stop",
	// "length", …) for a smoke probe that got one.
	SmokeFinishReason string `json:"smoke_finish_reason,omitempty"`
}

// ArtifactReadings are a hash's readings, up to 256: each that read its
// file (no Error) carries the file's content hash and size.
type ArtifactReadings []ArtifactReading

func (l ArtifactReadings) check(path string) error {
	if len(l) > maxListLen {
		return invalid(path, "has %d entries; the limit is %d", len(l), maxListLen)
	}
	for i, a := range l {
		p := indexPath(path, i)
		if a.Error != "" {
			continue // not hashed: recorded in the measurement, no ArtifactHashed
		}
		if err := Hex64(a.SHA256).check(p + ".sha256"); err != nil {
			return err
		}
		if err := Size(a.Size).check(p + ".size"); err != nil {
			return err
		}
	}
	return nil
}
func (ArtifactReadings) jsonSchema() map[string]any {
	return structListSchema("ArtifactReading", 0, maxListLen, false)
}

// ArtifactReading is one file a hash measurement read. Size is in bytes,
// MtimeNS in nanoseconds since the Unix epoch; SHA256 is empty and Error
// set when the file could not be read.
type ArtifactReading struct {
	// Path is the artifact's absolute path on the host.
	Path string `json:"path"`
	// Role is the artifact's role in the binding: weights, engine, server,
	// tokenizer, template, config or source.
	Role string `json:"role"`
	// Size is the file's size, in bytes.
	Size int64 `json:"size"`
	// MtimeNS is the file's modification time, in nanoseconds since the Unix
	// epoch.
	MtimeNS int64 `json:"mtime_ns"`
	// SHA256 is the file's content hash: 64 lowercase hex characters; empty
	// when it could not be read.
	SHA256 string `json:"sha256,omitempty"`
	// Error says why the file could not be hashed; empty when it was.
	Error string `json:"error,omitempty"`
}

// Evolve folds one event of the measurement stream.
func (m Measurement) Evolve(e *events.Event) (Measurement, error) {
	switch e.Type {
	case TypeMeasurementRequested:
		// Decoded into a fresh value, never into m.Request: encoding/json
		// decodes into the slices it finds, whose arrays m shares with the
		// state it was copied from.
		var d MeasurementRequested
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.ID, m.Requested, m.Request, m.RequestRef = d.MeasurementID, true, d, RefOf(e)
	case TypeMeasurementApproved:
		var d MeasurementApproved
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Approved, m.ApprovedBy, m.ApprovalRef = true, d.Approver, RefOf(e)
	case TypeMeasurementClaimed:
		var d MeasurementClaimed
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Claimed, m.Claim, m.ClaimRef = true, d, RefOf(e)
	case TypeMeasurementLeaseRenewed:
		var d MeasurementLeaseRenewed
		if err := decodeData(e, &d); err != nil {
			return m, err
		}
		m.Claim.LeaseUntil = d.LeaseUntil
		m.Renewals++
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
	// CodeMeasurementTimeInvalid: started after it ended, ended after it
	// was received, or started before it was requested (a run cannot start
	// before it was approved).
	CodeMeasurementTimeInvalid = "measurement_time_invalid"
	// CodeMeasurementUnsigned: the result carries no signature. It is a
	// gate, not a malformed command, so that the refusal is recorded
	// (DOMAIN.md: "anything else is refused and the refusal is itself
	// recorded").
	CodeMeasurementUnsigned = "measurement_unsigned"
	// CodeOutputCapExceeded: an excerpt is longer than the request's cap.
	CodeOutputCapExceeded = "output_cap_exceeded"
	// CodeLeaseExpired: a lease is renewed only while it runs; once it has
	// passed, the node may have marked the measurement uncertain.
	CodeLeaseExpired = "lease_expired"
	// CodeResultKindMismatch: the signed result is not of the request's
	// kind (a probe without its probe reading, a run carrying one, a probe
	// of another kind or endpoint than approved).
	CodeResultKindMismatch = "result_kind_mismatch"
	// CodeProbeTargetMismatch: a probe request names another endpoint or
	// model tag than the provider's own; probing it would prove nothing
	// about the provider.
	CodeProbeTargetMismatch = "probe_target_mismatch"
	// CodeMeasurementAlreadyApproved: the request was approved already; an
	// approval is recorded once.
	CodeMeasurementAlreadyApproved = "measurement_already_approved"
	// CodeMeasurementAlreadyClaimed: an executor claimed the request before
	// it was approved; it decided to run it (or not) without the approval,
	// which can no longer cover it.
	CodeMeasurementAlreadyClaimed = "measurement_already_claimed"
	// CodeResultOutcomeUnknown: the signed result's outcome is absent or
	// none of exited, timeout, signaled, start_failed, completed and
	// refused_by_host: a result that does not say how it ended grounds
	// nothing.
	CodeResultOutcomeUnknown = "result_outcome_unknown"
)

// RequestMeasurement asks for an exact argv to be run on a host.
type RequestMeasurement struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID ID `json:"measurement_id"`
	// Host is the host's name: where the executor runs and the work is done.
	Host ID `json:"host"`
	// Argv is the exact command line: the program and its arguments, in order.
	Argv Argv `json:"argv"`
	// Kind is the measurement's kind: run (an argv), probe (an endpoint) or
	// hash (a binding's files).
	Kind MeasurementKind `json:"kind"`
	// Timeout is the longest the work may run (a Go duration such as "30s").
	Timeout PositiveDuration `json:"timeout"`
	// OutputCapBytes is the most output the executor keeps of each stream, in
	// bytes; the policy's default when 0.
	OutputCapBytes PositiveSize `json:"output_cap_bytes"`
	// Purpose says what the measurement is for: proposal, qualification or
	// direct_reply.
	Purpose OptionalLongText `json:"purpose"`
	// MissionID is the mission the measurement serves (an admission's); empty
	// when none.
	MissionID OptionalID `json:"mission_id"`
	// Provider is required for a probe (and only there): the provider whose
	// ProbeRecorded the result becomes.
	Provider OptionalID `json:"provider"`
	// BindingID is required for a hash (and only there): the binding whose
	// ArtifactHashed events the result becomes.
	BindingID OptionalID `json:"binding_id"`
}

// CommandName implements Command.
func (*RequestMeasurement) CommandName() string { return "RequestMeasurement" }

// Validate implements crossFieldRules: what a kind names, and the argv of a probe or a hash.
func (c *RequestMeasurement) Validate() error {
	if c.Kind != MeasurementProbe && c.Provider != "" {
		return invalid("provider", "names the provider of a probe; a %s names none", c.Kind)
	}
	if c.Kind != MeasurementHash && c.BindingID != "" {
		return invalid("binding_id", "names the binding of a hash; a %s names none", c.Kind)
	}
	switch c.Kind {
	case MeasurementProbe:
		if err := ID(c.Provider).check("provider"); err != nil {
			return err
		}
		if _, err := ParseProbeArgv(c.Argv); err != nil {
			return err
		}
	case MeasurementHash:
		if err := ID(c.BindingID).check("binding_id"); err != nil {
			return err
		}
		if _, err := ParseHashArgv(c.Argv); err != nil {
			return err
		}
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *RequestMeasurement) Streams(States) []string {
	if c.Kind == MeasurementProbe {
		return []string{MeasurementStream(c.MeasurementID), ProviderStream(c.Provider)}
	}
	return []string{MeasurementStream(c.MeasurementID)}
}

// Decide implements Command: the gates.
func (c *RequestMeasurement) Decide(in Inputs) ([]NewEvent, error) {
	if in.States.Measurement(string(c.MeasurementID)).Requested {
		return nil, refuse(CodeMeasurementExists, map[string]any{"measurement_id": c.MeasurementID}, "measurement %s was already requested", c.MeasurementID)
	}
	mp := in.Policy.Measurement
	if c.Timeout.Duration > mp.MaxTimeout.Duration || int64(c.OutputCapBytes) > mp.MaxOutputBytes {
		return nil, refuse(CodeMeasurementBoundsExceeded, map[string]any{"timeout": c.Timeout.String(), "max_timeout": mp.MaxTimeout.String(),
			"output_cap_bytes": c.OutputCapBytes, "max_output_bytes": mp.MaxOutputBytes},
			"the request's timeout or output cap is above the node's measurement bounds")
	}
	if c.Kind == MeasurementProbe {
		p := in.States.Provider(string(c.Provider))
		if !p.Declared {
			return nil, providerUnknown(string(c.Provider))
		}
		spec, _ := ParseProbeArgv(c.Argv) // Validate parsed it
		if spec.Endpoint != p.Endpoint || spec.Kind == ProbeSmoke && spec.ModelTag != p.ModelTag {
			return nil, refuse(CodeProbeTargetMismatch, map[string]any{"provider": c.Provider, "endpoint": spec.Endpoint,
				"provider_endpoint": p.Endpoint, "model_tag": spec.ModelTag, "provider_model_tag": p.ModelTag},
				"a probe of provider %s must target its endpoint %s (and, for smoke, its exact tag %s)", c.Provider, p.Endpoint, p.ModelTag)
		}
	}
	return []NewEvent{{Stream: MeasurementStream(c.MeasurementID), Type: TypeMeasurementRequested, Data: MeasurementRequested{
		MeasurementID: string(c.MeasurementID), Host: string(c.Host), Argv: c.Argv, Kind: string(c.Kind), Timeout: Duration(c.Timeout),
		OutputCapBytes: int64(c.OutputCapBytes), Purpose: string(c.Purpose), MissionID: string(c.MissionID),
		Provider: string(c.Provider), BindingID: string(c.BindingID), At: in.At,
	}}}, nil
}

// ApproveMeasurement is an approver's approval of one exact request: its
// host, argv, kind and bounds as requested, nothing else. A request is
// approved once and only before it is claimed: an executor that claimed
// it decided without the approval. The approver is the principal.
type ApproveMeasurement struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID ID `json:"measurement_id"`
}

// CommandName implements Command.
func (*ApproveMeasurement) CommandName() string { return "ApproveMeasurement" }

// Streams implements Command: the streams this command reads.
func (c *ApproveMeasurement) Streams(States) []string {
	return []string{MeasurementStream(c.MeasurementID)}
}

// Decide implements Command: the gates.
func (c *ApproveMeasurement) Decide(in Inputs) ([]NewEvent, error) {
	m := in.States.Measurement(string(c.MeasurementID))
	det := map[string]any{"measurement_id": c.MeasurementID}
	switch {
	case !m.Requested:
		return nil, refuse(CodeMeasurementUnknown, det, "no measurement %s was requested", c.MeasurementID)
	case m.Approved:
		det["approved_by"], det["approval"] = m.ApprovedBy, m.ApprovalRef
		return nil, refuse(CodeMeasurementAlreadyApproved, det, "measurement %s was approved by %s already", c.MeasurementID, m.ApprovedBy)
	case m.Claimed || m.Uncertain || m.Recorded:
		det["claimed_by"], det["status"] = m.Claim.ExecutorID, m.Status()
		return nil, refuse(CodeMeasurementAlreadyClaimed, det,
			"measurement %s was claimed by %s before any approval (it is %s); request it again and approve it before it is claimed",
			c.MeasurementID, m.Claim.ExecutorID, m.Status())
	}
	return []NewEvent{{Stream: MeasurementStream(c.MeasurementID), Type: TypeMeasurementApproved, Data: MeasurementApproved{
		MeasurementID: string(c.MeasurementID), Host: m.Request.Host, Approver: in.Principal.Name, At: in.At,
	}}}, nil
}

// ClaimMeasurement claims a request for an executor until LeaseUntil.
type ClaimMeasurement struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID ID `json:"measurement_id"`
	// ExecutorID is the executor's id, as registered with its key.
	ExecutorID ID `json:"executor_id"`
	// LeaseUntil is when the claim's lease ends unless renewed (RFC 3339);
	// within the policy's lease bound.
	LeaseUntil time.Time `json:"lease_until"`
}

// CommandName implements Command.
func (*ClaimMeasurement) CommandName() string { return "ClaimMeasurement" }

// Validate implements crossFieldRules: a claim names its lease (a time has no zero JSON Schema can refuse).
func (c *ClaimMeasurement) Validate() error {
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
	if err := actsFor(in.Principal, string(c.ExecutorID)); err != nil {
		return nil, err
	}
	m := in.States.Measurement(string(c.MeasurementID))
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
	x := in.States.Executor(string(c.ExecutorID))
	if len(x.ActiveKeys(KeyRoleExecutor)) == 0 {
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
		MeasurementID: string(c.MeasurementID), ExecutorID: string(c.ExecutorID), LeaseUntil: c.LeaseUntil.UTC(), At: in.At,
	}}}, nil
}

// RenewMeasurementLease moves the lease of a claim forward while its
// executor is still working. Renewing to a time not after the current
// lease appends nothing: a lease is never shortened.
type RenewMeasurementLease struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID ID `json:"measurement_id"`
	// ExecutorID is the executor's id, as registered with its key.
	ExecutorID ID `json:"executor_id"`
	// LeaseUntil is the lease's new end (RFC 3339).
	LeaseUntil time.Time `json:"lease_until"`
}

// CommandName implements Command.
func (*RenewMeasurementLease) CommandName() string { return "RenewMeasurementLease" }

// Validate implements crossFieldRules: a renewal names its lease.
func (c *RenewMeasurementLease) Validate() error {
	if c.LeaseUntil.IsZero() {
		return invalid("lease_until", "is required")
	}
	return nil
}

// Streams implements Command: the streams this command reads.
func (c *RenewMeasurementLease) Streams(States) []string {
	return []string{MeasurementStream(c.MeasurementID), ExecutorStream(c.ExecutorID)}
}

// Decide implements Command: the gates.
func (c *RenewMeasurementLease) Decide(in Inputs) ([]NewEvent, error) {
	if err := actsFor(in.Principal, string(c.ExecutorID)); err != nil {
		return nil, err
	}
	m := in.States.Measurement(string(c.MeasurementID))
	det := map[string]any{"measurement_id": c.MeasurementID, "executor_id": c.ExecutorID}
	switch {
	case !m.Requested:
		return nil, refuse(CodeMeasurementUnknown, det, "no measurement %s was requested", c.MeasurementID)
	case m.Recorded:
		return nil, refuse(CodeMeasurementAlreadyRecorded, det, "measurement %s already has its result", c.MeasurementID)
	case !m.Claimed:
		return nil, refuse(CodeMeasurementNotClaimed, det, "measurement %s was never claimed", c.MeasurementID)
	case m.Claim.ExecutorID != string(c.ExecutorID):
		det["claimed_by"] = m.Claim.ExecutorID
		return nil, refuse(CodeNotClaimedByExecutor, det, "measurement %s was claimed by %s, not %s", c.MeasurementID, m.Claim.ExecutorID, c.ExecutorID)
	case m.Uncertain || !in.At.Before(m.Claim.LeaseUntil):
		det["lease_until"], det["uncertain"] = m.Claim.LeaseUntil, m.Uncertain
		return nil, refuse(CodeLeaseExpired, det, "the lease of measurement %s ended at %s; it is renewed only while it runs",
			c.MeasurementID, m.Claim.LeaseUntil.UTC().Format(time.RFC3339Nano))
	}
	if len(in.States.Executor(string(c.ExecutorID)).ActiveKeys(KeyRoleExecutor)) == 0 {
		return nil, refuse(CodeExecutorKeyUnknown, det, "executor %s has no registered, unrevoked key", c.ExecutorID)
	}
	maxLease := m.Claim.At.Add(m.Request.Timeout.Duration + in.Policy.Measurement.LeaseGrace.Duration)
	if !c.LeaseUntil.After(in.At) || c.LeaseUntil.After(maxLease) {
		det["lease_until"], det["max_lease_until"] = c.LeaseUntil, maxLease
		return nil, refuse(CodeLeaseInvalid, det, "a renewed lease ends after now and by the claim's time plus the request's timeout plus grace (%s)",
			maxLease.UTC().Format(time.RFC3339))
	}
	if !c.LeaseUntil.After(m.Claim.LeaseUntil) {
		return nil, nil
	}
	return []NewEvent{{Stream: MeasurementStream(c.MeasurementID), Type: TypeMeasurementLeaseRenewed, Data: MeasurementLeaseRenewed{
		MeasurementID: string(c.MeasurementID), ExecutorID: string(c.ExecutorID), LeaseUntil: c.LeaseUntil.UTC(), At: in.At,
	}}}, nil
}

// MarkMeasurementUncertain records that a claimed request's lease expired
// without a result. Marking it again appends nothing.
type MarkMeasurementUncertain struct {
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID ID `json:"measurement_id"`
}

// CommandName implements Command.
func (*MarkMeasurementUncertain) CommandName() string { return "MarkMeasurementUncertain" }

// Streams implements Command: the streams this command reads.
func (c *MarkMeasurementUncertain) Streams(States) []string {
	return []string{MeasurementStream(c.MeasurementID)}
}

// Decide implements Command: the gates.
func (c *MarkMeasurementUncertain) Decide(in Inputs) ([]NewEvent, error) {
	m := in.States.Measurement(string(c.MeasurementID))
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
	// MeasurementID is the measurement's id (its stream is measurement-<id>).
	MeasurementID ID `json:"measurement_id"`
	// ExecutorID is the executor reporting: the one that claimed the
	// measurement.
	ExecutorID ID `json:"executor_id"`
	// Payload is the signed result: the bytes of a JSON MeasurementResult,
	// base64 in JSON; the envelope's signatures are over them.
	Payload []byte `json:"payload"`
	// Envelope is the DSSE envelope of the signed result; a result without one
	// is refused, and the refusal is recorded.
	Envelope events.Envelope `json:"envelope" jsonschema:"optional"`

	// result is Payload as Validate decoded it, so that Decide (run again
	// on every retry) does not decode the same bytes again.
	result *MeasurementResult
}

// CommandName implements Command.
func (*RecordMeasurement) CommandName() string { return "RecordMeasurement" }

// payload returns the signed result: as Validate decoded it, or decoded
// now (strictly, as Validate does) for a command that was not validated.
func (c *RecordMeasurement) payload() (MeasurementResult, error) {
	if c.result != nil {
		return *c.result, nil
	}
	var r MeasurementResult
	err := decodeSignedPayload(c.Payload, &r)
	return r, err
}

// Validate implements crossFieldRules: the payload is the signed JSON of
// a MeasurementResult, whose fields are held to their types as a command's
// are, a refused probe is only in a result the host refused, and the
// envelope is within the edge's bound (signed_payload.go).
func (c *RecordMeasurement) Validate() error {
	var r MeasurementResult
	if err := decodeSignedPayload(c.Payload, &r); err != nil {
		return err
	}
	c.result = &r
	if pr := r.Probe; pr != nil && pr.Outcome == ProbeRefused && r.Outcome != ResultRefusedByHost {
		return invalid("payload.probe.outcome", "is %s only in a result whose outcome is %s (the host policy refused the probe)", ProbeRefused, ResultRefusedByHost)
	}
	return checkEnvelopeBound(&c.Envelope)
}

// Streams implements Command: the streams this command reads: the
// request's and the executor's, and once the request is known, the
// provider a probe is for or the binding a hash is for.
func (c *RecordMeasurement) Streams(loaded States) []string {
	out := []string{MeasurementStream(c.MeasurementID), ExecutorStream(c.ExecutorID)}
	if st, ok := loaded[MeasurementStream(c.MeasurementID)].(Measurement); ok && st.Requested {
		switch {
		case st.Request.Kind == MeasurementProbe && st.Request.Provider != "":
			out = append(out, ProviderStream(st.Request.Provider))
		case st.Request.Kind == MeasurementHash && st.Request.BindingID != "":
			out = append(out, BindingStream(st.Request.BindingID))
		}
	}
	return out
}

// Decide implements Command: the gates.
func (c *RecordMeasurement) Decide(in Inputs) ([]NewEvent, error) {
	if err := actsFor(in.Principal, string(c.ExecutorID)); err != nil {
		return nil, err
	}
	m := in.States.Measurement(string(c.MeasurementID))
	det := map[string]any{"measurement_id": c.MeasurementID, "executor_id": c.ExecutorID}
	switch {
	case len(c.Envelope.Signatures) == 0:
		det["payload_sha256"] = sha256Hex(c.Payload)
		return nil, refuse(CodeMeasurementUnsigned, det,
			"the result of measurement %s carries no signature: an executor signs its result (a DSSE envelope of payload type %q with 1 to 16 signatures)", c.MeasurementID, MeasurementPayloadType)
	case !m.Requested:
		return nil, refuse(CodeMeasurementUnknown, det, "no measurement %s was requested", c.MeasurementID)
	case !m.Claimed:
		return nil, refuse(CodeMeasurementNotClaimed, det, "measurement %s was never claimed", c.MeasurementID)
	case m.Claim.ExecutorID != string(c.ExecutorID):
		det["claimed_by"] = m.Claim.ExecutorID
		return nil, refuse(CodeNotClaimedByExecutor, det, "measurement %s was claimed by %s, not %s", c.MeasurementID, m.Claim.ExecutorID, c.ExecutorID)
	case m.Recorded:
		return nil, refuse(CodeMeasurementAlreadyRecorded, det, "measurement %s already has its result", c.MeasurementID)
	}
	if c.Envelope.PayloadType != MeasurementPayloadType {
		det["payload_type"] = c.Envelope.PayloadType
		return nil, refuse(CodeSignatureInvalid, det, "the envelope's payload type is %q, not %q", c.Envelope.PayloadType, MeasurementPayloadType)
	}
	x := in.States.Executor(string(c.ExecutorID))
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
	r, err := c.payload()
	if err != nil {
		return nil, err
	}
	switch {
	case r.MeasurementID != string(c.MeasurementID) || r.ExecutorID != string(c.ExecutorID):
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
	case r.StartedAt.Before(m.Request.At):
		det["started_at"], det["ended_at"], det["requested_at"] = r.StartedAt, r.EndedAt, m.Request.At
		return nil, refuse(CodeMeasurementTimeInvalid, det,
			"the result started at %s, before measurement %s was requested at %s: a run cannot start before it was approved",
			r.StartedAt.UTC().Format(time.RFC3339Nano), c.MeasurementID, m.Request.At.UTC().Format(time.RFC3339Nano))
	case !slices.Contains(resultOutcomes(), r.Outcome):
		det["outcome"], det["outcomes"] = r.Outcome, resultOutcomes()
		return nil, refuse(CodeResultOutcomeUnknown, det, "the signed result's outcome %q is none of %v; a result says how it ended", r.Outcome, resultOutcomes())
	case int64(len(r.StdoutExcerpt)) > m.Request.OutputCapBytes || int64(len(r.StderrExcerpt)) > m.Request.OutputCapBytes:
		det["output_cap_bytes"], det["stdout_bytes"], det["stderr_bytes"] = m.Request.OutputCapBytes, len(r.StdoutExcerpt), len(r.StderrExcerpt)
		return nil, refuse(CodeOutputCapExceeded, det, "an excerpt is longer than the request's output cap of %d bytes", m.Request.OutputCapBytes)
	}
	if err := m.kindMatches(r, det); err != nil {
		return nil, err
	}
	env := c.Envelope
	env.Signatures = slices.Clone(env.Signatures)
	rec := NewEvent{Stream: MeasurementStream(c.MeasurementID), Type: TypeMeasurementRecorded, Data: json.RawMessage(slices.Clone(c.Payload)), Envelope: &env}
	if m.Uncertain {
		return []NewEvent{rec}, nil // late, beside the recorded uncertainty
	}
	if in.At.After(m.Claim.LeaseUntil) {
		// A late result: the uncertainty is recorded first, the result
		// beside it, never over it. It derives nothing: what it says about
		// a provider or a binding is as uncertain as the run.
		return []NewEvent{m.uncertain(in.At), rec}, nil
	}
	out := []NewEvent{rec}
	switch m.Request.Kind {
	case MeasurementProbe:
		p := in.States.Provider(m.Request.Provider)
		if !p.Declared {
			return nil, providerUnknown(m.Request.Provider)
		}
		spec, _ := ParseProbeArgv(m.Request.Argv) // validated when requested
		pr := r.Probe
		d := ProbeRecorded{
			Provider: p.Name, Kind: string(pr.Kind), Outcome: string(pr.Outcome), Models: pr.Models, Latency: Duration(pr.Latency),
			ObservedBy: string(c.ExecutorID), Principal: in.Principal.Name, ObservedAt: r.EndedAt.UTC(), ExpectedTag: p.ModelTag,
			// A smoke completion of another tag says nothing about this one.
			ExactTagListed: p.ModelTag != "" && slices.Contains(pr.Models, p.ModelTag) && (spec.Kind != ProbeSmoke || spec.ModelTag == p.ModelTag),
			MeasurementID:  string(c.MeasurementID), At: in.At,
		}
		if r.Outcome == ResultRefusedByHost {
			// The host refused to probe: nothing was dialled, whatever the
			// reading says. Fail closed, and apart from a runtime's failure.
			d.Outcome, d.Models, d.Latency, d.ExactTagListed = ProbeRefused, nil, Duration{}, false
		}
		out = append(out, NewEvent{Stream: ProviderStream(p.Name), Type: TypeProbeRecorded, Data: d})
	case MeasurementHash:
		b := in.States.Binding(m.Request.BindingID)
		var hashes []ArtifactHashed
		for _, a := range r.Artifacts {
			// A refused hash read nothing, whatever its readings say.
			if a.Error != "" || r.Outcome == ResultRefusedByHost {
				continue
			}
			hashes = append(hashes, ArtifactHashed{BindingID: m.Request.BindingID, Path: a.Path, Size: a.Size, MtimeNS: a.MtimeNS,
				SHA256: a.SHA256, Role: a.Role, VerifiedBy: string(c.ExecutorID), Principal: in.Principal.Name, VerifierRole: VerifierSupervisor,
				MeasurementID: string(c.MeasurementID), At: in.At})
		}
		out = append(out, b.hashed(hashes, in.At)...)
	}
	return out, nil
}

// kindMatches checks that a signed result is of the request's kind: a run
// carries no reading, a probe the reading of its approved probe, a hash
// one reading per approved file, in order.
func (m Measurement) kindMatches(r MeasurementResult, det map[string]any) error {
	det["kind"] = m.Request.Kind
	switch m.Request.Kind {
	case MeasurementProbe:
		spec, _ := ParseProbeArgv(m.Request.Argv)
		if r.Probe == nil || len(r.Artifacts) > 0 || r.Probe.Kind != spec.Kind || r.Probe.Endpoint != spec.Endpoint {
			return refuse(CodeResultKindMismatch, det, "a probe's result carries the reading of its approved %s probe of %s, and nothing else", spec.Kind, spec.Endpoint)
		}
	case MeasurementHash:
		if r.Probe != nil {
			return refuse(CodeResultKindMismatch, det, "a hash's result carries no probe reading")
		}
		targets, _ := ParseHashArgv(m.Request.Argv)
		ok := len(targets) == len(r.Artifacts)
		for i := 0; ok && i < len(targets); i++ {
			ok = targets[i].Path == r.Artifacts[i].Path && targets[i].Role == r.Artifacts[i].Role
		}
		if !ok {
			return refuse(CodeArgvNotApproved, det, "a hash's result reads exactly the approved files, in order, with their roles")
		}
	default:
		if r.Probe != nil || len(r.Artifacts) > 0 {
			return refuse(CodeResultKindMismatch, det, "a run's result carries no probe or artifact reading")
		}
	}
	return nil
}

// sha256Hex is the content hash of b, as a refusal records what was sent.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
