package node_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// serveNode runs a real node in process on a loopback port.
func serveNode(t *testing.T, data string) *node.Node {
	t.Helper()
	cfg := node.Config{DataDir: data, API: api.Config{Addr: "127.0.0.1:0"}}
	cfg.Store.CheckpointInterval = -1
	n, err := node.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return n
}

type execKey struct {
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
	id   string
}

func newExecKey(t *testing.T) execKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return execKey{pub, priv, events.KeyID(pub)}
}

// storeAppend writes a key event straight to the store, as the Measurement
// aggregate does through the commands layer (executor streams are reserved
// at the raw API).
func storeAppend(t *testing.T, n *node.Node, stream, typ string, data any) {
	t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Store.Append(t.Context(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: stream,
		Events: []events.Proposed{{ID: uuid.New(), Type: typ, Data: b, Metadata: json.RawMessage(`{}`)}}}}}); err != nil {
		t.Fatal(err)
	}
}

// TestKeyRing_EdgeRefusesBadEnvelopes: the node checks every envelope of a
// raw append against the key ring at its head, kept current by its own
// subscription, and refuses what does not verify with signature_invalid
// and the reason.
func TestKeyRing_EdgeRefusesBadEnvelopes(t *testing.T) {
	n := serveNode(t, t.TempDir())
	c := client.New(n.URL(), "")
	ctx := t.Context()
	k1, k2, stranger := newExecKey(t), newExecKey(t), newExecKey(t)
	storeAppend(t, n, "executor-gpu1", events.TypeExecutorKeyRegistered, events.KeyRegisteredData{ExecutorID: "gpu1", KeyID: k1.id, PublicKey: k1.pub})
	storeAppend(t, n, "executor-gpu1", events.TypeExecutorKeyRegistered, events.KeyRegisteredData{ExecutorID: "gpu1", KeyID: k2.id, PublicKey: k2.pub})
	// The same type on a stream that is not an executor's registers nothing.
	storeAppend(t, n, "notes", events.TypeExecutorKeyRegistered, events.KeyRegisteredData{ExecutorID: "x", KeyID: stranger.id, PublicKey: stranger.pub})

	signed := func(k execKey, data string) wire.EventIn {
		env, err := events.SignData(ctx, "application/vnd.greffe.test+json", []byte(data), k.priv)
		if err != nil {
			t.Fatal(err)
		}
		return wire.EventIn{Type: "Measured", Data: json.RawMessage(data), Envelope: env}
	}
	badSig := signed(k2, `{"v":2}`)
	badSig.Data = json.RawMessage(`{"v":3}`)
	noSig := signed(k1, `{"v":4}`)
	noSig.Envelope.Signatures = nil

	type outcome struct {
		Code   string
		Reason any
		Field  string
	}
	run := func(ev wire.EventIn) outcome {
		_, err := c.Append(ctx, "measurements", events.ExpectAny, []wire.EventIn{ev})
		if err == nil {
			return outcome{}
		}
		var ae *wire.Error
		if !asError(err, &ae) {
			t.Fatalf("not an API error: %v", err)
		}
		return outcome{ae.Code, ae.Details["reason"], ae.Field}
	}
	tests := []struct {
		name string
		ev   wire.EventIn
		want outcome
	}{
		{"a registered key", signed(k1, `{"v":1}`), outcome{}},
		{"an unknown key", signed(stranger, `{"v":1}`), outcome{wire.CodeSignatureInvalid, events.SigUnknownKey, "events[0].envelope"}},
		{"another data's signature", badSig, outcome{wire.CodeSignatureInvalid, events.SigBadSignature, "events[0].envelope"}},
		{"an envelope without signatures", noSig, outcome{events.CodeInvalidSignature, nil, "events[0].envelope.signatures"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, run(tc.ev)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	// A revocation is seen by the next append: the ring follows the log.
	storeAppend(t, n, "executor-gpu1", events.TypeExecutorKeyRevoked, events.KeyRevokedData{ExecutorID: "gpu1", KeyID: k1.id})
	if diff := cmp.Diff(outcome{wire.CodeSignatureInvalid, events.SigRevokedKey, "events[0].envelope"}, run(signed(k1, `{"v":5}`))); diff != "" {
		t.Errorf("revoked key (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(outcome{}, run(signed(k2, `{"v":6}`))); diff != "" {
		t.Errorf("the other key still signs (-want +got):\n%s", diff)
	}
}
