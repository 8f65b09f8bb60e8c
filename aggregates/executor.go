package aggregates

import (
	"crypto/ed25519"
	"errors"
	"maps"

	"github.com/greffe/greffe/events"
)

// Executor keys (stream "executor-<id>"): the ed25519 keys an executor
// signs its measurements with, and (issue #20) the keys an independent
// check runner signs its checks with: a check runner registers a key like
// an executor, with role check_runner. A key signs only the facts of its
// role: a measurement verifies only with an executor key, a check only
// with a check runner's (KeyRole…); the DSSE payload type keeps the two
// kinds of signed bytes apart too. RegisterExecutorKey needs an "activation"
// approval whose subject is the executor's stream, "executor-<id>", spent
// in the same append: registering a key activates an executor. The events
// are events.TypeExecutorKeyRegistered/TypeExecutorKeyRevoked with
// events.KeyRegisteredData/KeyRevokedData, so an auditor folds them with
// events.KeyRing. A key id is registered once; revocation is final. The
// measurements these keys sign are in measurement.go.

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
	KeyID     string
	PublicKey ed25519.PublicKey
	// Role is KeyRoleExecutor or KeyRoleCheckRunner.
	Role       string
	ApprovalID string
	Revoked    bool
	Registered EventRef
	Revocation EventRef
}

// Key roles: what a registered key may sign.
const (
	// KeyRoleExecutor: an executor's measurements (and the probes and
	// hashes derived from them). Registrations before issue #20 carry no
	// role and are executor keys.
	KeyRoleExecutor = "executor"
	// KeyRoleCheckRunner: an independent check runner's checks
	// (RecordSignedCheck).
	KeyRoleCheckRunner = "check_runner"
)

// KeyRole is what a registered key signs; empty is an executor key, as
// registrations before issue #20 are.
type KeyRole string

// Values lists the key roles, empty included.
func (KeyRole) Values() []string { return []string{"", KeyRoleExecutor, KeyRoleCheckRunner} }

// Exists reports whether the executor stream has events.
func (x Executor) Exists() bool { return x.Events > 0 }

// Lookup implements events.KeyLookup over this executor's executor-role
// keys only: a key of another executor, or a check runner's key, is
// unknown here. It is what a measurement verifies with.
func (x Executor) Lookup(keyID string) (ed25519.PublicKey, bool, bool) {
	return x.lookup(KeyRoleExecutor, keyID)
}

// RunnerLookup implements events.KeyLookup over this id's check-runner
// keys only: what a signed check verifies with.
func (x Executor) RunnerLookup(keyID string) (ed25519.PublicKey, bool, bool) {
	return x.lookup(KeyRoleCheckRunner, keyID)
}

func (x Executor) lookup(role, keyID string) (ed25519.PublicKey, bool, bool) {
	k, ok := x.Keys[keyID]
	if !ok || k.Role != role {
		return nil, false, false
	}
	return k.PublicKey, k.Revoked, true
}

// ActiveKeys returns the ids of the unrevoked keys of role, sorted.
func (x Executor) ActiveKeys(role string) []string {
	var out []string
	for _, id := range sortedKeys(x.Keys) {
		if k := x.Keys[id]; !k.Revoked && k.Role == role {
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
		role := d.Role
		if role == "" {
			role = KeyRoleExecutor
		}
		if _, dup := keys[d.KeyID]; !dup { // as events.KeyRing: a key id is registered once
			keys[d.KeyID] = ExecutorKey{KeyID: d.KeyID, PublicKey: ed25519.PublicKey(d.PublicKey), Role: role, ApprovalID: d.ApprovalID, Registered: RefOf(e)}
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

// Refusal codes of the executor-key gates.
const (
	// CodeExecutorHostMismatch: the executor is registered on another host.
	CodeExecutorHostMismatch = "executor_host_mismatch"
	// CodeKeyAlreadyRegistered: this key id is already registered.
	CodeKeyAlreadyRegistered = "key_already_registered"
	// CodeKeyUnknown: the executor has no key under this id.
	CodeKeyUnknown = "key_unknown"
)

// RegisterExecutorKey registers an executor's (or a check runner's)
// ed25519 public key under an "activation" approval for "executor-<id>".
type RegisterExecutorKey struct {
	// ExecutorID is the executor's id, as registered with its key.
	ExecutorID ID `json:"executor_id"`
	// Host is the host's name: where the executor runs and the work is done.
	Host ID `json:"host"`
	// PublicKey is the executor's ed25519 public key: 32 bytes, base64 in
	// JSON.
	PublicKey Ed25519PublicKey `json:"public_key"`
	// ApprovalID is the approval to spend for registering the key (subject
	// executor-<id>); a gate refuses when it is missing.
	ApprovalID OptionalID `json:"approval_id"`
	// Role is what the key signs: executor (the default: measurements) or
	// check_runner (an independent runner's signed checks).
	Role KeyRole `json:"role,omitempty"`
}

// CommandName implements Command.
func (*RegisterExecutorKey) CommandName() string { return "RegisterExecutorKey" }

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
	x := in.States.Executor(string(c.ExecutorID))
	if x.Exists() && x.Host != string(c.Host) {
		return nil, refuse(CodeExecutorHostMismatch, map[string]any{"executor_id": c.ExecutorID, "host": c.Host, "registered_host": x.Host},
			"executor %s is registered on host %s, not %s", c.ExecutorID, x.Host, c.Host)
	}
	keyID := events.KeyID(ed25519.PublicKey(c.PublicKey))
	if _, ok := x.Keys[keyID]; ok {
		return nil, refuse(CodeKeyAlreadyRegistered, map[string]any{"executor_id": c.ExecutorID, "key_id": keyID},
			"key %s is already registered; a key id is registered once and revocation is final", keyID)
	}
	consume, err := in.States.Approval(string(c.ApprovalID)).Authorize(ActionActivation, ExecutorStream(c.ExecutorID), c.CommandName(), in.At)
	if err != nil {
		return nil, err
	}
	// An executor key is registered as before issue #20, without a role:
	// its event is the same bytes.
	role := c.Role
	if role == KeyRoleExecutor {
		role = ""
	}
	return []NewEvent{
		{Stream: ExecutorStream(c.ExecutorID), Type: events.TypeExecutorKeyRegistered, Data: events.KeyRegisteredData{
			ExecutorID: string(c.ExecutorID), Host: string(c.Host), KeyID: keyID, PublicKey: c.PublicKey, ApprovalID: string(c.ApprovalID), Role: string(role),
		}},
		consume,
	}, nil
}

// RevokeExecutorKey revokes a key; revoking it again appends nothing.
type RevokeExecutorKey struct {
	// ExecutorID is the executor's id, as registered with its key.
	ExecutorID ID `json:"executor_id"`
	// KeyID is the key to revoke; empty revokes every key of the executor.
	KeyID ShortText `json:"key_id"`
	// Reason says why the key is revoked.
	Reason LongText `json:"reason"`
}

// CommandName implements Command.
func (*RevokeExecutorKey) CommandName() string { return "RevokeExecutorKey" }

// Streams implements Command: the streams this command reads.
func (c *RevokeExecutorKey) Streams(States) []string { return []string{ExecutorStream(c.ExecutorID)} }

// Decide implements Command: the gates.
func (c *RevokeExecutorKey) Decide(in Inputs) ([]NewEvent, error) {
	x := in.States.Executor(string(c.ExecutorID))
	k, ok := x.Keys[string(c.KeyID)]
	if !ok {
		return nil, refuse(CodeKeyUnknown, map[string]any{"executor_id": c.ExecutorID, "key_id": c.KeyID}, "executor %s has no key %s", c.ExecutorID, c.KeyID)
	}
	if k.Revoked {
		return nil, nil
	}
	return []NewEvent{{Stream: ExecutorStream(c.ExecutorID), Type: events.TypeExecutorKeyRevoked, Data: events.KeyRevokedData{
		ExecutorID: string(c.ExecutorID), KeyID: string(c.KeyID), Reason: string(c.Reason),
	}}}, nil
}
