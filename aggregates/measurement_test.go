package aggregates

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/greffe/greffe/events"
)

func TestExecutorKeys_Decide(t *testing.T) {
	pub := pubOf(executorKey(1))
	kid := events.KeyID(pub)
	otherHost := &RegisterExecutorKey{ExecutorID: gpu1, Host: "spark-2", PublicKey: pubOf(executorKey(2)), ApprovalID: "reg2"}
	runGWT(t, []gwt{
		{
			name:  "register",
			given: []step{grant("reg", ActionActivation, ExecutorStream(gpu1), 1)},
			when:  &RegisterExecutorKey{ExecutorID: gpu1, Host: host, PublicKey: pub, ApprovalID: "reg"},
			want: []NewEvent{
				{Stream: "executor-gpu1", Type: events.TypeExecutorKeyRegistered, Data: events.KeyRegisteredData{ExecutorID: gpu1, Host: host, KeyID: kid, PublicKey: pub, ApprovalID: "reg"}},
				{Stream: "approval-reg", Type: TypeApprovalConsumed, Data: ApprovalConsumed{ApprovalID: "reg", By: "RegisterExecutorKey", Subject: "executor-gpu1", Use: 1, At: t0}},
			},
		},
		{name: "register without approval", when: &RegisterExecutorKey{ExecutorID: gpu1, Host: host, PublicKey: pub}, code: CodeApprovalMissing},
		{name: "register under an approval for another executor", given: []step{grant("reg", ActionActivation, ExecutorStream("gpu2"), 1)},
			when: &RegisterExecutorKey{ExecutorID: gpu1, Host: host, PublicKey: pub, ApprovalID: "reg"}, code: CodeApprovalSubjectMismatch},
		{name: "register a key twice", given: []step{registered(gpu1, 1), grant("reg2", ActionActivation, ExecutorStream(gpu1), 1)},
			when: &RegisterExecutorKey{ExecutorID: gpu1, Host: host, PublicKey: pub, ApprovalID: "reg2"}, code: CodeKeyAlreadyRegistered},
		{name: "register on another host", given: []step{registered(gpu1, 1), grant("reg2", ActionActivation, ExecutorStream(gpu1), 1)},
			when: otherHost, code: CodeExecutorHostMismatch},
		{name: "revoke", given: registered(gpu1, 1), when: &RevokeExecutorKey{ExecutorID: gpu1, KeyID: ShortText(kid), Reason: "host reinstalled"},
			want: []NewEvent{{Stream: "executor-gpu1", Type: events.TypeExecutorKeyRevoked, Data: events.KeyRevokedData{ExecutorID: gpu1, KeyID: kid, Reason: "host reinstalled"}}}},
		{name: "revoke twice appends nothing", given: []step{registered(gpu1, 1), &RevokeExecutorKey{ExecutorID: gpu1, KeyID: ShortText(kid), Reason: "r"}},
			when: &RevokeExecutorKey{ExecutorID: gpu1, KeyID: ShortText(kid), Reason: "r"}, want: nil},
		{name: "revoke an unknown key", given: registered(gpu1, 1), when: &RevokeExecutorKey{ExecutorID: gpu1, KeyID: "ed25519:00", Reason: "r"}, code: CodeKeyUnknown},
	})
}

// TestExecutorKeys_KeyRing: what the Executor state folds agrees with the
// events package's KeyRing, which verify uses.
func TestExecutorKeys_KeyRing(t *testing.T) {
	l := newLedger(t)
	l.given(registered(gpu1, 1)...)
	l.given(registered(gpu1, 2)...)
	kid1, kid2 := events.KeyID(pubOf(executorKey(1))), events.KeyID(pubOf(executorKey(2)))
	l.given(&RevokeExecutorKey{ExecutorID: gpu1, KeyID: ShortText(kid1), Reason: "r"})
	ring := events.NewKeyRing()
	for i := range l.log {
		ring.Apply(&l.log[i])
	}
	x := l.state(ExecutorStream(gpu1)).(Executor)
	for _, kid := range []string{kid1, kid2, "ed25519:unknown"} {
		p1, r1, ok1 := ring.Lookup(kid)
		p2, r2, ok2 := x.Lookup(kid)
		if string(p1) != string(p2) || r1 != r2 || ok1 != ok2 {
			t.Errorf("%s: ring (%v %v) state (%v %v)", kid, r1, ok1, r2, ok2)
		}
	}
	if diff := cmp.Diff([]string{kid2}, x.ActiveKeys(KeyRoleExecutor)); diff != "" {
		t.Errorf("active keys (-want +got):\n%s", diff)
	}
}

func TestMeasurement_Decide(t *testing.T) {
	big := requestProbe("x")
	big.OutputCapBytes = 1 << 20
	long := requestProbe("x")
	long.Timeout = PositiveDuration(D(2 * time.Hour))
	early := claim("x", gpu1)
	early.LeaseUntil = t0
	tooLong := claim("x", gpu1)
	tooLong.LeaseUntil = t0.Add(time.Hour)
	unsignedPayload := signed(resources("x"), 1)
	unsignedPayload.Envelope.Signatures[0].Sig[0] ^= 0xff
	otherType := signed(resources("x"), 1)
	otherType.Envelope.PayloadType = "application/json"
	forOther := resources("y")
	forOther.MeasurementID = "y"
	replayed := signed(forOther, 1)
	replayed.MeasurementID = "x"
	otherArgv := resources("x")
	otherArgv.Argv = append(otherArgv.Argv, "--loop=1")
	otherHost := resources("x")
	otherHost.Host = "spark-2"
	future := resources("x")
	future.EndedAt = t0.Add(time.Second)
	chatty := resources("x")
	chatty.StdoutExcerpt = string(make([]byte, 16<<10+1))
	// A result with no signature is the measurement_unsigned gate, so that
	// its refusal is recorded (executor.TestNode_RefusesMeasurements/unsigned).
	noSignature := signed(resources("x"), 1)
	noSignature.Envelope.Signatures = nil
	// A run cannot start before its request was approved (issue #15).
	beforeRequest := resources("x")
	beforeRequest.StartedAt = t0.Add(-time.Second)
	sig2 := signed(resources("x"), 2) // executorKey(2) is registered for gpu2
	// Issue #20: a result says how it ended, in a known outcome.
	noOutcome := resources("x")
	noOutcome.Outcome = ""
	crashed := resources("x")
	crashed.Outcome = "crashed"
	// A signed refusal of the host's policy is recorded like any result
	// (it ends the request visibly); it grounds nothing (admission.go,
	// evidence.go).
	refusedRun := resources("x")
	refusedRun.Outcome, refusedRun.ExitCode, refusedRun.Error = ResultRefusedByHost, -1, "run_not_allowed: the argv matches none of the host's 0 run templates; nothing was run (host policy: runs)"
	refusedRun.GPU, refusedRun.RAMAvailableBytes, refusedRun.ResidentModelsObserved, refusedRun.StdoutSHA256, refusedRun.StdoutExcerpt = nil, nil, false, "", ""
	kid1 := events.KeyID(pubOf(executorKey(1)))
	base := []step{registered(gpu1, 1), requestProbe("x")}
	claimed := []step{base, claim("x", gpu1)}
	runGWT(t, []gwt{
		{
			name: "request", when: requestProbe("x"),
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementRequested, Data: MeasurementRequested{
				MeasurementID: "x", Host: host, Argv: probeArgv, Kind: MeasurementRun, Timeout: D(15 * time.Second),
				OutputCapBytes: 16 << 10, Purpose: "admission screens", At: t0}}},
		},
		{name: "request twice", given: []step{requestProbe("x")}, when: requestProbe("x"), code: CodeMeasurementExists},
		{name: "request a larger output cap than the policy", when: big, code: CodeMeasurementBoundsExceeded},
		{name: "request a longer timeout than the policy", when: long, code: CodeMeasurementBoundsExceeded},
		{
			name: "claim", given: base, when: claim("x", gpu1),
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementClaimed, Data: MeasurementClaimed{
				MeasurementID: "x", ExecutorID: gpu1, LeaseUntil: t0.Add(time.Minute), At: t0}}},
		},
		{name: "claim an unknown request", given: registered(gpu1, 1), when: claim("x", gpu1), code: CodeMeasurementUnknown},
		{name: "claim by an executor without a key", given: []step{requestProbe("x")}, when: claim("x", gpu1), code: CodeExecutorKeyUnknown},
		{name: "claim by an executor whose key is revoked", given: []step{base, &RevokeExecutorKey{ExecutorID: gpu1, KeyID: ShortText(kid1), Reason: "r"}}, when: claim("x", gpu1), code: CodeExecutorKeyUnknown},
		{name: "claim from another host", given: []step{base, grant("r2", ActionActivation, ExecutorStream("gpu2"), 1),
			&RegisterExecutorKey{ExecutorID: "gpu2", Host: "spark-2", PublicKey: pubOf(executorKey(2)), ApprovalID: "r2"}},
			when: claim("x", "gpu2"), code: CodeHostMismatch},
		{name: "a lease that ends before it starts", given: base, when: early, code: CodeLeaseInvalid},
		{name: "a lease beyond timeout and grace", given: base, when: tooLong, code: CodeLeaseInvalid},
		{name: "exactly one claim wins", given: claimed, when: claim("x", gpu1), code: CodeLeaseHeld},
		{name: "a claim after the lease expired is never a retry", given: []step{claimed, advance(2 * time.Minute)}, when: claim("x", gpu1), code: CodeAlreadyClaimed},
		{name: "claim a recorded measurement", given: []step{claimed, signed(resources("x"), 1)}, when: claim("x", gpu1), code: CodeMeasurementAlreadyRecorded},
		{
			name: "record a signed result", given: claimed, when: signed(resources("x"), 1),
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementRecorded,
				Data: json.RawMessage(signed(resources("x"), 1).Payload), Envelope: &signed(resources("x"), 1).Envelope}},
		},
		{name: "record an unknown request", given: registered(gpu1, 1), when: signed(resources("x"), 1), code: CodeMeasurementUnknown},
		{name: "record an unclaimed request", given: base, when: signed(resources("x"), 1), code: CodeMeasurementNotClaimed},
		{name: "record a request claimed by another executor", given: []step{claimed, registered("gpu2", 2)}, when: func() *RecordMeasurement {
			r := resources("x")
			r.ExecutorID = "gpu2"
			return signed(r, 2)
		}(), code: CodeNotClaimedByExecutor},
		{name: "record twice", given: []step{claimed, signed(resources("x"), 1)}, when: signed(resources("x"), 1), code: CodeMeasurementAlreadyRecorded},
		{name: "a signature that does not verify", given: claimed, when: unsignedPayload, code: CodeSignatureInvalid},
		{name: "another payload type", given: claimed, when: otherType, code: CodeSignatureInvalid},
		{name: "signed by a key the executor does not have", given: []step{claimed, registered("gpu2", 2)}, when: sig2, code: CodeExecutorKeyUnknown},
		{name: "signed by a revoked key", given: []step{claimed, &RevokeExecutorKey{ExecutorID: gpu1, KeyID: ShortText(kid1), Reason: "r"}}, when: signed(resources("x"), 1), code: CodeExecutorKeyRevoked},
		{name: "a signed result replayed onto another request", given: claimed, when: replayed, code: CodeResultNotForRequest},
		{name: "a result for another argv", given: claimed, when: signed(otherArgv, 1), code: CodeArgvNotApproved},
		{name: "a result from another host", given: claimed, when: signed(otherHost, 1), code: CodeHostMismatch},
		{name: "a result from the future", given: claimed, when: signed(future, 1), code: CodeMeasurementTimeInvalid},
		{name: "a result started before its request", given: claimed, when: signed(beforeRequest, 1), code: CodeMeasurementTimeInvalid},
		{name: "a result without a signature", given: claimed, when: noSignature, code: CodeMeasurementUnsigned},
		{name: "an unsigned result for no request", given: base[:1], when: noSignature, code: CodeMeasurementUnsigned},
		{name: "an excerpt over the output cap", given: claimed, when: signed(chatty, 1), code: CodeOutputCapExceeded},
		{name: "a result without an outcome", given: claimed, when: signed(noOutcome, 1), code: CodeResultOutcomeUnknown},
		{name: "a result of an unknown outcome", given: claimed, when: signed(crashed, 1), code: CodeResultOutcomeUnknown},
		{
			name: "a result the host refused is recorded", given: claimed, when: signed(refusedRun, 1),
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementRecorded,
				Data: json.RawMessage(signed(refusedRun, 1).Payload), Envelope: &signed(refusedRun, 1).Envelope}},
		},
		{
			name: "a late result is recorded beside the uncertainty", given: []step{claimed, advance(2 * time.Minute)}, when: signed(resources("x"), 1),
			want: []NewEvent{
				{Stream: "measurement-x", Type: TypeMeasurementUncertain, Data: MeasurementUncertain{MeasurementID: "x", ExecutorID: gpu1,
					LeaseUntil: t0.Add(time.Minute), Reason: "lease expired without a result", At: t0.Add(2 * time.Minute)}},
				{Stream: "measurement-x", Type: TypeMeasurementRecorded, Data: json.RawMessage(signed(resources("x"), 1).Payload), Envelope: &signed(resources("x"), 1).Envelope},
			},
		},
		{
			name: "mark uncertain", given: []step{claimed, advance(2 * time.Minute)}, when: &MarkMeasurementUncertain{MeasurementID: "x"},
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementUncertain, Data: MeasurementUncertain{MeasurementID: "x", ExecutorID: gpu1,
				LeaseUntil: t0.Add(time.Minute), Reason: "lease expired without a result", At: t0.Add(2 * time.Minute)}}},
		},
		{name: "mark uncertain while the lease runs", given: claimed, when: &MarkMeasurementUncertain{MeasurementID: "x"}, code: CodeLeaseHeld},
		{name: "mark uncertain an unclaimed request", given: base, when: &MarkMeasurementUncertain{MeasurementID: "x"}, code: CodeMeasurementNotClaimed},
		{name: "mark uncertain an unknown request", when: &MarkMeasurementUncertain{MeasurementID: "x"}, code: CodeMeasurementUnknown},
		{name: "mark uncertain a recorded measurement", given: []step{claimed, signed(resources("x"), 1), advance(2 * time.Minute)}, when: &MarkMeasurementUncertain{MeasurementID: "x"}, code: CodeMeasurementAlreadyRecorded},
		{name: "mark uncertain twice appends nothing", given: []step{claimed, advance(2 * time.Minute), &MarkMeasurementUncertain{MeasurementID: "x"}}, when: &MarkMeasurementUncertain{MeasurementID: "x"}, want: nil},
	})
}

// TestMeasurement_LateResult: a late result stands beside the uncertainty,
// which stays; it grounds no admission.
func TestMeasurement_LateResult(t *testing.T) {
	l := newLedger(t)
	l.given(registered(gpu1, 1), requestProbe("x"), claim("x", gpu1), advance(2*time.Minute),
		&MarkMeasurementUncertain{MeasurementID: "x"}, signed(resources("x"), 1))
	m := l.state(MeasurementStream("x")).(Measurement)
	if !m.Uncertain || !m.Recorded || m.Status() != MeasurementStatusLate {
		t.Fatalf("uncertain=%v recorded=%v status=%s", m.Uncertain, m.Recorded, m.Status())
	}
}

// TestMeasurement_StoredVerbatim: the stored data is the signed bytes, so
// the stored event verifies with the standard DSSE check.
func TestMeasurement_StoredVerbatim(t *testing.T) {
	l := newLedger(t)
	payload := []byte("{\n  \"measurement_id\": \"x\", \"executor_id\": \"gpu1\", \"host\": \"spark-1\",\n  \"argv\": " + string(must(json.Marshal(probeArgv))) +
		", \"started_at\": \"2026-09-06T10:00:00Z\", \"ended_at\": \"2026-09-06T10:00:00Z\", \"exit_code\": 0, \"outcome\": \"exited\", \"resident_models_observed\": true}")
	env := must(events.SignData(context.Background(), MeasurementPayloadType, payload, executorKey(1)))
	l.given(registered(gpu1, 1), requestProbe("x"), claim("x", gpu1),
		&RecordMeasurement{MeasurementID: "x", ExecutorID: gpu1, Payload: payload, Envelope: *env})
	e := l.log[len(l.log)-1]
	if string(e.Data) != string(payload) {
		t.Fatalf("stored data was re-serialised:\n%s", e.Data)
	}
	x := l.state(ExecutorStream(gpu1)).(Executor)
	if _, err := events.VerifyEnvelope(e.Data, e.Envelope, x.Lookup); err != nil {
		t.Fatal(err)
	}
}

// Endpoint probes, artifact hashes and lease renewals (issue #6).

const probeEndpoint = "http://127.0.0.1:11434/v1"

// requestOf requests measurement id of kind with argv, for a provider (a
// probe) or a binding (a hash).
func requestOf(id, kind string, argv []string, provider, binding string) *RequestMeasurement {
	return &RequestMeasurement{MeasurementID: ID(id), Host: host, Argv: argv, Kind: MeasurementKind(kind), Timeout: PositiveDuration(D(15 * time.Second)),
		OutputCapBytes: 16 << 10, Provider: OptionalID(provider), BindingID: OptionalID(binding)}
}

// probeResult is a signed-ready result of a probe of argv that read pr.
func probeResult(id string, argv []string, pr ProbeReading) MeasurementResult {
	r := resources(id)
	r.Argv, r.Outcome, r.Probe = argv, ResultCompleted, &pr
	r.StdoutExcerpt, r.StdoutSHA256 = "", ""
	return r
}

// hashResult is a result of a hash of argv that read arts.
func hashResult(id string, argv []string, arts ...ArtifactReading) MeasurementResult {
	r := resources(id)
	r.Argv, r.Outcome, r.Artifacts = argv, ResultCompleted, arts
	r.StdoutExcerpt, r.StdoutSHA256 = "", ""
	return r
}

func TestMeasurement_Probe(t *testing.T) {
	const tag = "qwen3-coder:30b"
	models := []string{ProbeModels, probeEndpoint}
	smoke := []string{ProbeSmoke, probeEndpoint, tag}
	provider := []step{declare("ollama", KindLocal, "local_ollama", tag), limits("ollama")}
	base := []step{provider, registered(gpu1, 1), requestOf("p", MeasurementProbe, models, "ollama", "")}
	claimed := []step{base, claim("p", gpu1)}
	listed := ProbeReading{Kind: ProbeModels, Endpoint: probeEndpoint, Outcome: ProbeOK, Models: []string{"llama3:8b", tag}, Latency: NonNegativeDuration(D(12 * time.Millisecond)), HTTPStatus: 200}
	alias := listed
	alias.Models = []string{"qwen3-coder:latest"}
	otherEndpoint := listed
	otherEndpoint.Endpoint = "http://127.0.0.1:8080/v1"
	smokeOK := ProbeReading{Kind: ProbeSmoke, Endpoint: probeEndpoint, Outcome: ProbeOK, Models: []string{tag}, Latency: NonNegativeDuration(D(800 * time.Millisecond)), HTTPStatus: 200, SmokeFinishReason: "stop"}
	// Issue #20: a probe the host policy refused. Its ProbeRecorded is
	// refused, whatever its reading says (fail closed: a refused_by_host
	// result that claims to list the tag makes nothing live).
	const refusal = "probe_host_not_allowed: 127.0.0.1:11434 is not one of the host's probe_hosts; nothing was dialled (host policy: probe_hosts)"
	refusedReading := ProbeReading{Kind: ProbeModels, Endpoint: probeEndpoint, Outcome: ProbeRefused, Error: refusal}
	refusedResult := func(pr ProbeReading) MeasurementResult {
		r := probeResult("p", models, pr)
		r.Outcome, r.ExitCode, r.Error = ResultRefusedByHost, -1, refusal
		return r
	}
	refusedProbe := NewEvent{Stream: "provider-ollama", Type: TypeProbeRecorded, Data: ProbeRecorded{Provider: "ollama", Kind: ProbeModels,
		Outcome: ProbeRefused, ObservedBy: gpu1, Principal: AnonymousName, ObservedAt: t0, ExpectedTag: tag, MeasurementID: "p", At: t0}}
	probeEvent := func(pr ProbeReading, exact bool, at time.Time) NewEvent {
		return NewEvent{Stream: "provider-ollama", Type: TypeProbeRecorded, Data: ProbeRecorded{Provider: "ollama", Kind: string(pr.Kind),
			Outcome: string(pr.Outcome), Models: pr.Models, Latency: Duration(pr.Latency), ObservedBy: gpu1, Principal: AnonymousName, ObservedAt: t0, ExpectedTag: tag,
			ExactTagListed: exact, MeasurementID: "p", At: at}}
	}
	recorded := func(r MeasurementResult) NewEvent {
		s := signed(r, 1)
		return NewEvent{Stream: "measurement-p", Type: TypeMeasurementRecorded, Data: json.RawMessage(s.Payload), Envelope: &s.Envelope}
	}
	runGWT(t, []gwt{
		{
			name: "request a models probe", given: provider, when: requestOf("p", MeasurementProbe, models, "ollama", ""),
			want: []NewEvent{{Stream: "measurement-p", Type: TypeMeasurementRequested, Data: MeasurementRequested{
				MeasurementID: "p", Host: host, Argv: models, Kind: MeasurementProbe, Timeout: D(15 * time.Second),
				OutputCapBytes: 16 << 10, Provider: "ollama", At: t0}}},
		},
		{name: "request a probe of an undeclared provider", when: requestOf("p", MeasurementProbe, models, "ollama", ""), code: CodeProviderUnknown},
		{name: "request a probe of another endpoint than the provider's", given: provider,
			when: requestOf("p", MeasurementProbe, []string{ProbeModels, "http://127.0.0.1:8080/v1"}, "ollama", ""), code: CodeProbeTargetMismatch},
		{name: "request a smoke probe of an alias", given: provider,
			when: requestOf("p", MeasurementProbe, []string{ProbeSmoke, probeEndpoint, "qwen3-coder:latest"}, "ollama", ""), code: CodeProbeTargetMismatch},
		{
			name: "a probe listing the exact tag is the provider's probe", given: claimed, when: signed(probeResult("p", models, listed), 1),
			want: []NewEvent{recorded(probeResult("p", models, listed)), probeEvent(listed, true, t0)},
		},
		{
			name: "a probe listing only an alias is recorded, not exact", given: claimed, when: signed(probeResult("p", models, alias), 1),
			want: []NewEvent{recorded(probeResult("p", models, alias)), probeEvent(alias, false, t0)},
		},
		{
			name:  "a smoke probe",
			given: []step{provider, registered(gpu1, 1), requestOf("p", MeasurementProbe, smoke, "ollama", ""), claim("p", gpu1)},
			when:  signed(probeResult("p", smoke, smokeOK), 1),
			want:  []NewEvent{recorded(probeResult("p", smoke, smokeOK)), probeEvent(smokeOK, true, t0)},
		},
		{
			name: "a probe the host refused is the provider's refused probe", given: claimed, when: signed(refusedResult(refusedReading), 1),
			want: []NewEvent{recorded(refusedResult(refusedReading)), refusedProbe},
		},
		{
			name: "a refused result whose reading lists the tag is refused all the same", given: claimed, when: signed(refusedResult(listed), 1),
			want: []NewEvent{recorded(refusedResult(listed)), refusedProbe},
		},
		{name: "a probe's result without its reading", given: claimed, when: signed(func() MeasurementResult {
			r := probeResult("p", models, listed)
			r.Probe = nil
			return r
		}(), 1), code: CodeResultKindMismatch},
		{name: "a probe's reading of another endpoint", given: claimed, when: signed(probeResult("p", models, otherEndpoint), 1), code: CodeResultKindMismatch},
		{name: "a run's result carrying a probe reading", given: []step{registered(gpu1, 1), requestProbe("x"), claim("x", gpu1)},
			when: signed(func() MeasurementResult { r := resources("x"); r.Probe = &listed; return r }(), 1), code: CodeResultKindMismatch},
		{
			name: "a late probe derives nothing", given: []step{claimed, advance(2 * time.Minute)}, when: signed(probeResult("p", models, listed), 1),
			want: []NewEvent{
				{Stream: "measurement-p", Type: TypeMeasurementUncertain, Data: MeasurementUncertain{MeasurementID: "p", ExecutorID: gpu1,
					LeaseUntil: t0.Add(time.Minute), Reason: "lease expired without a result", At: t0.Add(2 * time.Minute)}},
				recorded(probeResult("p", models, listed)),
			},
		},
	})
}

func TestMeasurement_Hash(t *testing.T) {
	arts := artifacts()
	argv := []string{string(RoleWeights + "=" + arts[0].Path), string(RoleServer + "=" + arts[1].Path)}
	reading := func(a BindingArtifact, sha string) ArtifactReading {
		return ArtifactReading{Path: string(a.Path), Role: string(a.Role), Size: int64(a.Size), MtimeNS: 1_757_000_000_000_000_000, SHA256: sha}
	}
	same := hashResult("h", argv, reading(arts[0], string(arts[0].SHA256)), reading(arts[1], string(arts[1].SHA256)))
	missing := hashResult("h", argv, reading(arts[0], string(arts[0].SHA256)), ArtifactReading{Path: string(arts[1].Path), Role: string(arts[1].Role), Error: "no such file or directory"})
	changed := hashResult("h", argv, reading(arts[0], hexOf("other weights")), reading(arts[1], string(arts[1].SHA256)))
	swapped := hashResult("h", argv, reading(arts[1], string(arts[1].SHA256)), reading(arts[0], string(arts[0].SHA256)))
	base := []step{registered(gpu1, 1), requestOf("h", MeasurementHash, argv, "", "b1"), claim("h", gpu1)}
	hashed := func(a ArtifactReading) ArtifactHashed {
		return ArtifactHashed{BindingID: "b1", Path: a.Path, Size: a.Size, MtimeNS: a.MtimeNS, SHA256: a.SHA256, Role: a.Role,
			VerifiedBy: gpu1, Principal: AnonymousName, VerifierRole: VerifierSupervisor, MeasurementID: "h", At: t0}
	}
	recorded := func(r MeasurementResult) NewEvent {
		s := signed(r, 1)
		return NewEvent{Stream: "measurement-h", Type: TypeMeasurementRecorded, Data: json.RawMessage(s.Payload), Envelope: &s.Envelope}
	}
	runGWT(t, []gwt{
		{
			name: "every file hashed becomes the binding's hash", given: base, when: signed(same, 1),
			want: []NewEvent{recorded(same),
				{Stream: "binding-b1", Type: TypeArtifactHashed, Data: hashed(same.Artifacts[0])},
				{Stream: "binding-b1", Type: TypeArtifactHashed, Data: hashed(same.Artifacts[1])}},
		},
		{
			name: "a file that could not be read is recorded in the measurement only", given: base, when: signed(missing, 1),
			want: []NewEvent{recorded(missing), {Stream: "binding-b1", Type: TypeArtifactHashed, Data: hashed(missing.Artifacts[0])}},
		},
		{
			name: "a changed weight hash invalidates the verified binding", given: []step{verifiedBinding("b1", "qwen", "qwen3.8:27b", arts), base},
			when: signed(changed, 1),
			wantFn: func(l *ledger) []NewEvent {
				was := l.state(BindingStream("b1")).(Binding).VerifiedHashes[string(arts[0].Path)]
				now := hashed(changed.Artifacts[0])
				return []NewEvent{recorded(changed),
					{Stream: "binding-b1", Type: TypeArtifactHashed, Data: now},
					{Stream: "binding-b1", Type: TypeBindingInvalidated, Data: BindingInvalidated{BindingID: "b1", Reason: InvalidatedArtifactChanged,
						Path: string(arts[0].Path), Was: &was, Now: &now, At: t0}},
					{Stream: "binding-b1", Type: TypeArtifactHashed, Data: hashed(changed.Artifacts[1])}}
			},
		},
		{
			// Issue #20: a refusal read nothing, whatever its readings say.
			name: "a hash the host refused derives no hash", given: []step{verifiedBinding("b1", "qwen", "qwen3.8:27b", arts), base},
			when: signed(func() MeasurementResult {
				r := changed
				r.Outcome, r.ExitCode, r.Error = ResultRefusedByHost, -1, "hash_path_not_allowed: … (host policy: hash_paths)"
				return r
			}(), 1),
			wantFn: func(*ledger) []NewEvent {
				r := changed
				r.Outcome, r.ExitCode, r.Error = ResultRefusedByHost, -1, "hash_path_not_allowed: … (host policy: hash_paths)"
				return []NewEvent{recorded(r)}
			},
		},
		{name: "a hash of other files than approved", given: base, when: signed(swapped, 1), code: CodeArgvNotApproved},
		{name: "a hash's result carrying a probe reading", given: base, when: signed(func() MeasurementResult {
			r := same
			r.Probe = &ProbeReading{Kind: ProbeModels, Endpoint: probeEndpoint, Outcome: ProbeOK}
			return r
		}(), 1), code: CodeResultKindMismatch},
	})
}

func TestMeasurement_RenewLease(t *testing.T) {
	kid1 := events.KeyID(pubOf(executorKey(1)))
	base := []step{registered(gpu1, 1), requestProbe("x")}
	claimed := []step{base, claim("x", gpu1)}
	renew := func(exec string, until time.Duration) *RenewMeasurementLease {
		return &RenewMeasurementLease{MeasurementID: "x", ExecutorID: ID(exec), LeaseUntil: t0.Add(until)}
	}
	runGWT(t, []gwt{
		{
			name: "renew", given: claimed, when: renew(gpu1, 70*time.Second),
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementLeaseRenewed, Data: MeasurementLeaseRenewed{
				MeasurementID: "x", ExecutorID: gpu1, LeaseUntil: t0.Add(70 * time.Second), At: t0}}},
		},
		{name: "a renewal never shortens the lease", given: claimed, when: renew(gpu1, 30*time.Second), want: nil},
		{name: "renew past the timeout and grace", given: claimed, when: renew(gpu1, 76*time.Second), code: CodeLeaseInvalid},
		{name: "renew after the lease expired", given: []step{claimed, advance(time.Minute)}, when: renew(gpu1, 75*time.Second), code: CodeLeaseExpired},
		{name: "renew an uncertain measurement", given: []step{claimed, advance(61 * time.Second), &MarkMeasurementUncertain{MeasurementID: "x"}},
			when: renew(gpu1, 75*time.Second), code: CodeLeaseExpired},
		{name: "renew another executor's claim", given: []step{claimed, registered("gpu2", 2)}, when: renew("gpu2", 70*time.Second), code: CodeNotClaimedByExecutor},
		{name: "renew with a revoked key", given: []step{claimed, &RevokeExecutorKey{ExecutorID: gpu1, KeyID: ShortText(kid1), Reason: "r"}},
			when: renew(gpu1, 70*time.Second), code: CodeExecutorKeyUnknown},
		{name: "renew an unclaimed request", given: base, when: renew(gpu1, 70*time.Second), code: CodeMeasurementNotClaimed},
		{name: "renew an unknown request", when: renew(gpu1, 70*time.Second), code: CodeMeasurementUnknown},
		{name: "renew a recorded measurement", given: []step{claimed, signed(resources("x"), 1)}, when: renew(gpu1, 70*time.Second), code: CodeMeasurementAlreadyRecorded},
		{name: "a renewed lease holds uncertainty off", given: []step{claimed, renew(gpu1, 75*time.Second), advance(70 * time.Second)},
			when: &MarkMeasurementUncertain{MeasurementID: "x"}, code: CodeLeaseHeld},
		{
			name: "a result within the renewed lease is not late", given: []step{claimed, renew(gpu1, 75*time.Second), advance(70 * time.Second)},
			when: func() *RecordMeasurement {
				r := resources("x")
				r.EndedAt = t0.Add(69 * time.Second)
				return signed(r, 1)
			}(),
			want: func() []NewEvent {
				r := resources("x")
				r.EndedAt = t0.Add(69 * time.Second)
				s := signed(r, 1)
				return []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementRecorded, Data: json.RawMessage(s.Payload), Envelope: &s.Envelope}}
			}(),
		},
	})
}

func TestRequestMeasurement_Validate(t *testing.T) {
	cases := []struct {
		name string
		data string
		path string // "" for valid
	}{
		{name: "a run", data: `{"measurement_id":"m","host":"h","kind":"run","argv":["python3","bench.py"],"timeout":"10s","output_cap_bytes":16384}`},
		{name: "a models probe", data: `{"measurement_id":"m","host":"h","kind":"probe","provider":"p","argv":["models","http://127.0.0.1:11434/v1"],"timeout":"10s","output_cap_bytes":16384}`},
		{name: "a smoke probe", data: `{"measurement_id":"m","host":"h","kind":"probe","provider":"p","argv":["smoke","https://gpu.lan:8080","qwen3:8b"],"timeout":"10s","output_cap_bytes":16384}`},
		{name: "a hash", data: `{"measurement_id":"m","host":"h","kind":"hash","binding_id":"b","argv":["weights=/m/w.gguf","server=/opt/llama-server"],"timeout":"10s","output_cap_bytes":16384}`},
		{name: "a run naming a provider", data: `{"measurement_id":"m","host":"h","kind":"run","provider":"p","argv":["true"],"timeout":"10s","output_cap_bytes":1}`, path: "data.provider"},
		{name: "a run naming a binding", data: `{"measurement_id":"m","host":"h","kind":"run","binding_id":"b","argv":["true"],"timeout":"10s","output_cap_bytes":1}`, path: "data.binding_id"},
		{name: "a probe without provider", data: `{"measurement_id":"m","host":"h","kind":"probe","argv":["models","http://x"],"timeout":"10s","output_cap_bytes":1}`, path: "data.provider"},
		{name: "a probe that is a command", data: `{"measurement_id":"m","host":"h","kind":"probe","provider":"p","argv":["curl","http://x"],"timeout":"10s","output_cap_bytes":1}`, path: "data.argv[0]"},
		{name: "a probe of a file URL", data: `{"measurement_id":"m","host":"h","kind":"probe","provider":"p","argv":["models","file:///etc/passwd"],"timeout":"10s","output_cap_bytes":1}`, path: "data.argv[1]"},
		{name: "a probe URL with a query", data: `{"measurement_id":"m","host":"h","kind":"probe","provider":"p","argv":["models","http://x/v1?a=b"],"timeout":"10s","output_cap_bytes":1}`, path: "data.argv[1]"},
		{name: "a smoke probe without its tag", data: `{"measurement_id":"m","host":"h","kind":"probe","provider":"p","argv":["smoke","http://x"],"timeout":"10s","output_cap_bytes":1}`, path: "data.argv"},
		{name: "a hash without binding", data: `{"measurement_id":"m","host":"h","kind":"hash","argv":["weights=/w"],"timeout":"10s","output_cap_bytes":1}`, path: "data.binding_id"},
		{name: "a hash of an unknown role", data: `{"measurement_id":"m","host":"h","kind":"hash","binding_id":"b","argv":["model=/w"],"timeout":"10s","output_cap_bytes":1}`, path: "data.argv[0]"},
		{name: "a hash of a relative path", data: `{"measurement_id":"m","host":"h","kind":"hash","binding_id":"b","argv":["weights=/w","server=llama-server"],"timeout":"10s","output_cap_bytes":1}`, path: "data.argv[1]"},
		{name: "a hash of one path twice", data: `{"measurement_id":"m","host":"h","kind":"hash","binding_id":"b","argv":["weights=/w","config=/w"],"timeout":"10s","output_cap_bytes":1}`, path: "data.argv[1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCommand("RequestMeasurement", []byte(tc.data))
			got := ""
			if err != nil {
				var ie *InvalidCommandError
				if !errors.As(err, &ie) {
					t.Fatalf("not an InvalidCommandError: %v", err)
				}
				got = ie.Path
			}
			if diff := cmp.Diff(tc.path, got); diff != "" {
				t.Errorf("path (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
}

// TestRecordMeasurement_ValidateReadings: a probe's and a hash's readings
// are shape-checked before any state is read.
func TestRecordMeasurement_ValidateReadings(t *testing.T) {
	badOutcome := probeResult("p", []string{ProbeModels, probeEndpoint}, ProbeReading{Kind: ProbeModels, Endpoint: probeEndpoint, Outcome: "fine"})
	badHash := hashResult("h", []string{"weights=/w"}, ArtifactReading{Path: "/w", Role: RoleWeights, SHA256: "abc"})
	unread := hashResult("h", []string{"weights=/w"}, ArtifactReading{Path: "/w", Role: RoleWeights, Error: "permission denied"})
	refusedReading := ProbeReading{Kind: ProbeModels, Endpoint: probeEndpoint, Outcome: ProbeRefused, Error: "probe_host_not_allowed: …"}
	refusedInCompleted := probeResult("p", []string{ProbeModels, probeEndpoint}, refusedReading)
	refused := refusedInCompleted
	refused.Outcome = ResultRefusedByHost
	for _, tc := range []struct {
		name string
		cmd  *RecordMeasurement
		path string
	}{
		{"a probe outcome outside the enumeration", signed(badOutcome, 1), "data.payload.probe.outcome"},
		{"an artifact digest that is not one", signed(badHash, 1), "data.payload.artifacts[0].sha256"},
		{"an artifact not read carries its error, no digest", signed(unread, 1), ""},
		{"a refused probe reading in a result that is not a refusal", signed(refusedInCompleted, 1), "data.payload.probe.outcome"},
		{"a refused probe reading in a refused result", signed(refused, 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := Validate(tc.cmd); err != nil {
				var ie *InvalidCommandError
				if !errors.As(err, &ie) {
					t.Fatalf("not an InvalidCommandError: %v", err)
				}
				got = ie.Path
			}
			if diff := cmp.Diff(tc.path, got); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
		})
	}
}
