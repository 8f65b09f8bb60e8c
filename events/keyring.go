package events

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
)

// Event types that register and revoke the keys allowed to sign events. They
// are written by the Measurement aggregate (stream "executor-<id>") after its
// gates; verify folds them with a KeyRing to check every envelope against the
// keys valid at that position.
const (
	TypeExecutorKeyRegistered = "ExecutorKeyRegistered"
	TypeExecutorKeyRevoked    = "ExecutorKeyRevoked"
)

// KeyStreamPrefix is the prefix of the streams whose key events count: the
// executor streams, written only by the Measurement aggregate after its
// gates (the raw append API refuses them as reserved).
const KeyStreamPrefix = "executor-"

// IsKeyEvent reports whether an event of stream and typ registers or revokes
// a key allowed to sign events. An event of the same type in another stream
// registers nothing, so the node's edge check, the auditor and the executor
// fold exactly the same events.
func IsKeyEvent(stream, typ string) bool {
	return strings.HasPrefix(stream, KeyStreamPrefix) && (typ == TypeExecutorKeyRegistered || typ == TypeExecutorKeyRevoked)
}

// KeyRegisteredData is the data of ExecutorKeyRegistered. PublicKey is the raw
// 32-byte ed25519 key (base64 in JSON); KeyID must equal KeyID(PublicKey).
type KeyRegisteredData struct {
	// ExecutorID is the executor the key belongs to.
	ExecutorID string `json:"executor_id"`
	// Host is the host the executor runs on; its claims and results must name
	// it.
	Host string `json:"host"`
	// KeyID is the key's id: "ed25519:" and the hex of the first 16 bytes of
	// SHA-256 of the public key (greffe digest executor-key).
	KeyID string `json:"key_id"`
	// PublicKey is the ed25519 public key: 32 bytes, base64.
	PublicKey []byte `json:"public_key"`
	// ApprovalID is the approval spent to register the key.
	ApprovalID string `json:"approval_id,omitempty"`
	// Role is what the key may sign (issue #20): empty (or "executor") for
	// an executor's measurements, "check_runner" for an independent check
	// runner's checks. The ring verifies a signature whatever the role;
	// the deciders accept each kind of signed fact only from its role.
	Role string `json:"role,omitempty"`
}

// KeyRevokedData is the data of ExecutorKeyRevoked.
type KeyRevokedData struct {
	// ExecutorID is the executor whose key was revoked.
	ExecutorID string `json:"executor_id"`
	// KeyID is the revoked key's id.
	KeyID string `json:"key_id"`
	// Reason says why the key was revoked.
	Reason string `json:"reason,omitempty"`
}

// KeyRing folds key registrations and revocations in log order. Not safe for
// concurrent use.
type KeyRing struct {
	keys map[string]*ringKey
}

type ringKey struct {
	pub        ed25519.PublicKey
	executorID string
	revoked    bool
}

// NewKeyRing returns an empty key ring.
func NewKeyRing() *KeyRing { return &KeyRing{keys: map[string]*ringKey{}} }

// Apply folds e if it registers or revokes a key (IsKeyEvent), and reports
// whether it did. A registration whose key id does not match its key is
// ignored (the aggregate refuses it; a tampered log shows up as an unknown
// key).
func (k *KeyRing) Apply(e *Event) bool {
	if !IsKeyEvent(e.Stream, e.Type) {
		return false
	}
	switch e.Type {
	case TypeExecutorKeyRegistered:
		var d KeyRegisteredData
		if json.Unmarshal(e.Data, &d) != nil || len(d.PublicKey) != ed25519.PublicKeySize || KeyID(d.PublicKey) != d.KeyID {
			return false
		}
		if _, exists := k.keys[d.KeyID]; exists {
			return false // a key id is registered once; revocation is final
		}
		k.keys[d.KeyID] = &ringKey{pub: ed25519.PublicKey(d.PublicKey), executorID: d.ExecutorID}
		return true
	case TypeExecutorKeyRevoked:
		var d KeyRevokedData
		if json.Unmarshal(e.Data, &d) != nil {
			return false
		}
		if rk, ok := k.keys[d.KeyID]; ok {
			rk.revoked = true
			return true
		}
	}
	return false
}

// Lookup implements KeyLookup.
func (k *KeyRing) Lookup(keyID string) (ed25519.PublicKey, bool, bool) {
	rk, ok := k.keys[keyID]
	if !ok {
		return nil, false, false
	}
	return rk.pub, rk.revoked, true
}

// Executor returns the executor id a key was registered for.
func (k *KeyRing) Executor(keyID string) (string, bool) {
	rk, ok := k.keys[keyID]
	if !ok {
		return "", false
	}
	return rk.executorID, true
}
