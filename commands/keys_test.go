package commands_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
)

// key returns a deterministic ed25519 key.
func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

// pub returns the public half of a deterministic ed25519 key.
func pub(seed byte) []byte { return []byte(key(seed).Public().(ed25519.PublicKey)) }

// signedProbe has the executor "prober" (registered under its own
// approval on first use) record an ok models probe of provider, listing
// models: the only kind of probe that makes a provider live (issue #20).
func signedProbe(t testing.TB, h *commands.Handler, provider, endpoint string, models ...string) {
	t.Helper()
	const prober, host, seed = "prober", "probe-host", 9
	at := h.Clock()()
	if _, err := h.Handle(context.Background(), grant("reg-"+prober, aggregates.ActionActivation, aggregates.ExecutorStream(prober), 1)); err == nil {
		mustHandle(t, h, req("RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: prober, Host: host, PublicKey: pub(seed), ApprovalID: "reg-" + prober}))
	}
	id := "probe-" + at.Format("150405.000000000")
	argv := []string{aggregates.ProbeModels, endpoint}
	mustHandle(t, h, req("RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: aggregates.ID(id), Host: host, Argv: argv, Kind: aggregates.MeasurementProbe,
		Provider: aggregates.OptionalID(provider), Timeout: aggregates.PositiveDuration(aggregates.D(time.Minute)), OutputCapBytes: 4096}))
	mustHandle(t, h, req("ClaimMeasurement", aggregates.ClaimMeasurement{MeasurementID: aggregates.ID(id), ExecutorID: prober, LeaseUntil: at.Add(time.Minute)}))
	payload, err := json.Marshal(aggregates.MeasurementResult{MeasurementID: id, ExecutorID: prober, Host: host, Argv: argv, StartedAt: at, EndedAt: at,
		Outcome: aggregates.ResultCompleted, Probe: &aggregates.ProbeReading{Kind: aggregates.ProbeModels, Endpoint: endpoint, Outcome: aggregates.ProbeOK, Models: models}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.SignData(context.Background(), aggregates.MeasurementPayloadType, payload, key(seed))
	if err != nil {
		t.Fatal(err)
	}
	mustHandle(t, h, req("RecordMeasurement", aggregates.RecordMeasurement{MeasurementID: aggregates.ID(id), ExecutorID: prober, Payload: payload, Envelope: *env}))
}
