package api_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// TestSigned_FailsClosedWithoutKeyRing: a server given no key ring
// (api.Server.UseKeyRing never called) knows no key, so it refuses every
// signed append; unsigned appends are unaffected. node/keyring_test.go
// covers the node's ring.
func TestSigned_FailsClosedWithoutKeyRing(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.SignData(t.Context(), "application/vnd.greffe.test+json", []byte(`{"v":1}`), priv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.AppendMulti(t.Context(), wire.AppendIn{Appends: []wire.StreamAppendIn{
		{Stream: "plain", Events: []wire.EventIn{{Type: "T"}}},
		{Stream: "signed", Events: []wire.EventIn{{Type: "T", Data: json.RawMessage(`{"v":1}`), Envelope: env}}},
	}})
	var ae *wire.Error
	if !errors.As(err, &ae) || ae.Code != wire.CodeSignatureInvalid || ae.Status != 422 ||
		ae.Field != "appends[1].events[0].envelope" || ae.Details["reason"] != events.SigUnknownKey {
		t.Fatalf("signed append without a key ring: %v", err)
	}
	if n.store.Head().Size != 0 {
		t.Fatal("a refused append wrote something")
	}
	if _, err := c.Append(t.Context(), "plain", events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
		t.Fatalf("unsigned append: %v", err)
	}
}
