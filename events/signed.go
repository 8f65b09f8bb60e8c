package events

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// Signed events carry a DSSE envelope over their Data. The payload of the
// envelope is exactly the event's stored Data bytes; the signature is ed25519
// over DSSE's PAE(payloadType, data). Key ids are "ed25519:" followed by the
// first 16 bytes of SHA-256(public key) in hex, so a key id names exactly one
// key (KeyID, digest.go).

// DSSESigner adapts an ed25519 private key to dsse.Signer.
type DSSESigner struct{ Key ed25519.PrivateKey }

var _ dsse.SignerVerifier = DSSESigner{}

// Sign signs the PAE bytes.
func (s DSSESigner) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.Key, data), nil
}

// Verify checks sig over data with the key's public half.
func (s DSSESigner) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(s.Key.Public().(ed25519.PublicKey), data, sig) {
		return errors.New("ed25519: signature does not verify")
	}
	return nil
}

// KeyID returns the key id of the public half.
func (s DSSESigner) KeyID() (string, error) { return KeyID(s.Key.Public().(ed25519.PublicKey)), nil }

// Public returns the public half.
func (s DSSESigner) Public() crypto.PublicKey { return s.Key.Public() }

// SignData signs data with the DSSE library and returns the envelope to attach
// to the event whose Data is data.
func SignData(ctx context.Context, payloadType string, data []byte, key ed25519.PrivateKey) (*Envelope, error) {
	es, err := dsse.NewEnvelopeSigner(DSSESigner{Key: key})
	if err != nil {
		return nil, fmt.Errorf("sign data: %w", err)
	}
	env, err := es.SignPayload(ctx, payloadType, data)
	if err != nil {
		return nil, fmt.Errorf("sign data: %w", err)
	}
	out := &Envelope{PayloadType: env.PayloadType}
	for _, s := range env.Signatures {
		raw, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil {
			return nil, fmt.Errorf("sign data: %w", err)
		}
		out.Signatures = append(out.Signatures, Signature{KeyID: s.KeyID, Sig: raw})
	}
	return out, nil
}

// DSSE returns the standard DSSE envelope for data and env, as a third-party
// verifier would receive it.
func (env *Envelope) DSSE(data []byte) *dsse.Envelope {
	out := &dsse.Envelope{PayloadType: env.PayloadType, Payload: base64.StdEncoding.EncodeToString(data)}
	for _, s := range env.Signatures {
		out.Signatures = append(out.Signatures, dsse.Signature{KeyID: s.KeyID, Sig: base64.StdEncoding.EncodeToString(s.Sig)})
	}
	return out
}

// SignatureError says why an envelope does not verify.
type SignatureError struct {
	KeyID  string
	Reason string // "unknown_key", "revoked_key", "bad_signature", "no_signature"
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("signature by %q: %s", e.KeyID, e.Reason)
}

// Signature failure reasons.
const (
	SigUnknownKey   = "unknown_key"
	SigRevokedKey   = "revoked_key"
	SigBadSignature = "bad_signature"
	SigNoSignature  = "no_signature"
)

// KeyLookup returns the public key registered under id and whether it is
// revoked at the position being verified. ok is false for an unknown key.
type KeyLookup func(keyID string) (pub ed25519.PublicKey, revoked bool, ok bool)

// VerifyEnvelope checks every signature of env over data: each must name a
// known, unrevoked key and verify. It returns the key ids that signed.
func VerifyEnvelope(data []byte, env *Envelope, keys KeyLookup) ([]string, error) {
	if env == nil || len(env.Signatures) == 0 {
		return nil, &SignatureError{Reason: SigNoSignature}
	}
	pae := dsse.PAE(env.PayloadType, data)
	ids := make([]string, 0, len(env.Signatures))
	for _, s := range env.Signatures {
		pub, revoked, ok := keys(s.KeyID)
		switch {
		case !ok:
			return nil, &SignatureError{KeyID: s.KeyID, Reason: SigUnknownKey}
		case revoked:
			return nil, &SignatureError{KeyID: s.KeyID, Reason: SigRevokedKey}
		case len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, pae, s.Sig):
			return nil, &SignatureError{KeyID: s.KeyID, Reason: SigBadSignature}
		}
		ids = append(ids, s.KeyID)
	}
	return ids, nil
}
