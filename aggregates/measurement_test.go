package aggregates

import (
	"context"
	"encoding/json"
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
		{name: "revoke", given: registered(gpu1, 1), when: &RevokeExecutorKey{ExecutorID: gpu1, KeyID: kid, Reason: "host reinstalled"},
			want: []NewEvent{{Stream: "executor-gpu1", Type: events.TypeExecutorKeyRevoked, Data: events.KeyRevokedData{ExecutorID: gpu1, KeyID: kid, Reason: "host reinstalled"}}}},
		{name: "revoke twice appends nothing", given: []step{registered(gpu1, 1), &RevokeExecutorKey{ExecutorID: gpu1, KeyID: kid, Reason: "r"}},
			when: &RevokeExecutorKey{ExecutorID: gpu1, KeyID: kid, Reason: "r"}, want: nil},
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
	l.given(&RevokeExecutorKey{ExecutorID: gpu1, KeyID: kid1, Reason: "r"})
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
	if diff := cmp.Diff([]string{kid2}, x.ActiveKeys()); diff != "" {
		t.Errorf("active keys (-want +got):\n%s", diff)
	}
}

func TestMeasurement_Decide(t *testing.T) {
	big := requestProbe("x")
	big.OutputCapBytes = 1 << 20
	long := requestProbe("x")
	long.Timeout = D(2 * time.Hour)
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
	sig2 := signed(resources("x"), 2) // executorKey(2) is registered for gpu2
	kid1 := events.KeyID(pubOf(executorKey(1)))
	base := []step{registered(gpu1, 1), requestProbe("x")}
	claimed := []step{base, claim("x", gpu1)}
	runGWT(t, []gwt{
		{
			name: "request", when: requestProbe("x"),
			want: []NewEvent{{Stream: "measurement-x", Type: TypeMeasurementRequested, Data: MeasurementRequested{
				MeasurementID: "x", Host: host, Argv: probeArgv, Kind: MeasurementProbe, Timeout: D(15 * time.Second),
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
		{name: "claim by an executor whose key is revoked", given: []step{base, &RevokeExecutorKey{ExecutorID: gpu1, KeyID: kid1, Reason: "r"}}, when: claim("x", gpu1), code: CodeExecutorKeyUnknown},
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
		{name: "signed by a revoked key", given: []step{claimed, &RevokeExecutorKey{ExecutorID: gpu1, KeyID: kid1, Reason: "r"}}, when: signed(resources("x"), 1), code: CodeExecutorKeyRevoked},
		{name: "a signed result replayed onto another request", given: claimed, when: replayed, code: CodeResultNotForRequest},
		{name: "a result for another argv", given: claimed, when: signed(otherArgv, 1), code: CodeArgvNotApproved},
		{name: "a result from another host", given: claimed, when: signed(otherHost, 1), code: CodeHostMismatch},
		{name: "a result from the future", given: claimed, when: signed(future, 1), code: CodeMeasurementTimeInvalid},
		{name: "an excerpt over the output cap", given: claimed, when: signed(chatty, 1), code: CodeOutputCapExceeded},
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
		", \"started_at\": \"2026-09-06T09:59:59Z\", \"ended_at\": \"2026-09-06T10:00:00Z\", \"exit_code\": 0, \"resident_models_observed\": true}")
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
