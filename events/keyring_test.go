package events

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
)

// TestKeyRing_OnlyExecutorStreams: a key event counts only in an executor
// stream; the same event elsewhere registers or revokes nothing.
func TestKeyRing_OnlyExecutorStreams(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	reg, _ := json.Marshal(KeyRegisteredData{ExecutorID: "gpu1", KeyID: KeyID(pub), PublicKey: pub})
	rev, _ := json.Marshal(KeyRevokedData{ExecutorID: "gpu1", KeyID: KeyID(pub)})
	tests := []struct {
		name        string
		events      []Event
		known, gone bool
	}{
		{"registered in its stream", []Event{{Stream: "executor-gpu1", Type: TypeExecutorKeyRegistered, Data: reg}}, true, false},
		{"registered elsewhere", []Event{{Stream: "raw-stream", Type: TypeExecutorKeyRegistered, Data: reg}}, false, false},
		{"revoked in its stream", []Event{{Stream: "executor-gpu1", Type: TypeExecutorKeyRegistered, Data: reg}, {Stream: "executor-gpu1", Type: TypeExecutorKeyRevoked, Data: rev}}, true, true},
		{"revoked elsewhere", []Event{{Stream: "executor-gpu1", Type: TypeExecutorKeyRegistered, Data: reg}, {Stream: "forged", Type: TypeExecutorKeyRevoked, Data: rev}}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewKeyRing()
			for i := range tc.events {
				r.Apply(&tc.events[i])
			}
			_, revoked, ok := r.Lookup(KeyID(pub))
			if ok != tc.known || revoked != tc.gone {
				t.Fatalf("known %v revoked %v, want %v %v", ok, revoked, tc.known, tc.gone)
			}
		})
	}
}
