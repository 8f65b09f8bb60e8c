package client

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
)

// The digests a client computes before sending a command, each as the node
// recomputes it (docs/COMMANDS.md, "Digests"). They are written here from
// their published definitions, not imported from the node's packages, so
// that they are what an integrator in another language writes; tests hold
// them equal to the node's (cmd/greffe/digest_test.go). A digest greffe
// defines is spelled "sha256:" and 64 lowercase hex characters; a content
// hash (a file's, a patch's) is the 64 hex characters alone, as sha256sum
// prints it.

// DigestPrefix starts every digest greffe defines.
const DigestPrefix = "sha256:"

// BindingArtifact is one artifact of a binding, as its identity covers it.
type BindingArtifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Role   string `json:"role"`
}

// Binding is what a binding's identity covers: the fields of ProposeBinding's
// data that name what serves (its id, provider, tag, family and context
// size are not part of it).
type Binding struct {
	ConfigSHA256   string            `json:"config_sha256"`
	SourceCommit   string            `json:"source_commit"`
	TemplateSHA256 string            `json:"template_sha256"`
	ModelMetadata  map[string]string `json:"model_metadata"`
	Artifacts      []BindingArtifact `json:"artifacts"`
}

// BindingIdentity returns the identity ProposeBinding's "identity" must
// carry: "sha256:" and the hex SHA-256 of the JSON object
//
//	{"config_sha256":…,"source_commit":…,"template_sha256":…,
//	 "model_metadata":{…keys sorted…},
//	 "artifacts":[{"path":…,"size":…,"sha256":…,"role":…},…]}
//
// written without spaces and without HTML escaping (<, > and & as
// themselves), members in that order, artifacts in the binding's order,
// absent metadata as {} and absent artifacts as [].
func BindingIdentity(b Binding) string {
	if b.ModelMetadata == nil {
		b.ModelMetadata = map[string]string{}
	}
	if b.Artifacts == nil {
		b.Artifacts = []BindingArtifact{}
	}
	return DigestPrefix + hexSHA256(compactJSON(b))
}

// BindingIdentityOfData returns the identity of ProposeBinding's data
// (a JSON object, as sent with the command; its other fields, identity
// included, are ignored).
func BindingIdentityOfData(data []byte) (string, error) {
	var b Binding
	if err := json.Unmarshal(data, &b); err != nil {
		return "", fmt.Errorf("the binding is not ProposeBinding's data: %w", err)
	}
	return BindingIdentity(b), nil
}

// ArgvHash returns the argv_hash of an exact command line (RecordCheck's
// "argv_hash"): "sha256:" and the hex SHA-256 of argv written as a JSON
// array of strings without spaces or HTML escaping (["bash","t.sh"]).
func ArgvHash(argv []string) string {
	if argv == nil {
		argv = []string{}
	}
	return DigestPrefix + hexSHA256(compactJSON(argv))
}

// ExecutorKeyID returns the key id of an executor's ed25519 public key, as
// a measurement's signature names it: "ed25519:" and the hex of the first
// 16 bytes of SHA-256(public key).
func ExecutorKeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:16])
}

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

// compactJSON encodes v without spaces and without HTML escaping.
func compactJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // strings, ints and string maps always encode
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
