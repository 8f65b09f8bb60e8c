package client

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/greffe/greffe/events"
)

// The digests a client computes before sending a command, each as the node
// recomputes it (docs/COMMANDS.md, "Digests"): the node's own formulas,
// which live in package events (events/digest.go, with their test vectors
// for an integrator in another language). A digest greffe defines is
// spelled "sha256:" and 64 lowercase hex characters; a content hash (a
// file's, a patch's) is the 64 hex characters alone, as sha256sum prints
// it.

// DigestPrefix starts every digest greffe defines (events.DigestPrefix).
const DigestPrefix = events.DigestPrefix

// BindingArtifact is one artifact of a binding, as its identity covers it.
type BindingArtifact = events.BindingArtifact

// Binding is what a binding's identity covers: the fields of ProposeBinding's
// data that name what serves (its id, provider, tag, family and context
// size are not part of it).
type Binding = events.BindingContent

// BindingIdentity returns the identity ProposeBinding's "identity" must
// carry (events.BindingIdentity).
func BindingIdentity(b Binding) string { return events.BindingIdentity(b) }

// BindingIdentityOfData returns the identity of ProposeBinding's data
// (a JSON object, as sent with the command; its other fields, identity
// included, are ignored).
func BindingIdentityOfData(data []byte) (string, error) {
	var b Binding
	if err := json.Unmarshal(data, &b); err != nil {
		return "", fmt.Errorf("the binding is not ProposeBinding's data: %w", err)
	}
	return events.BindingIdentity(b), nil
}

// ArgvHash returns the argv_hash of an exact command line (RecordCheck's
// "argv_hash"; events.ArgvHash).
func ArgvHash(argv []string) string { return events.ArgvHash(argv) }

// ExecutorKeyID returns the key id of an executor's ed25519 public key, as
// a measurement's signature names it (events.KeyID).
func ExecutorKeyID(pub ed25519.PublicKey) string { return events.KeyID(pub) }

// ParseExecutorPublicKey reads an ed25519 public key file: a PEM "PUBLIC
// KEY" block (PKIX, as openssl pkey -pubout writes it), the standard base64
// of its 32 bytes (as greffe executor init prints it), or the 32 bytes.
func ParseExecutorPublicKey(b []byte) (ed25519.PublicKey, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the PEM block is not a public key: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("the PEM public key is a %T, not ed25519", k)
		}
		return pub, nil
	}
	if len(b) == ed25519.PublicKeySize {
		return ed25519.PublicKey(bytes.Clone(b)), nil
	}
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, errors.New("not an ed25519 public key: want a PEM PUBLIC KEY block, the base64 of 32 bytes, or 32 bytes")
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("the base64 holds %d bytes; an ed25519 public key is %d", len(raw), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}
