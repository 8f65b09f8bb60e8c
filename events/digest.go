package events

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// The stored-format digests: the values greffe defines by a formula and
// stores or compares as strings (docs/COMMANDS.md, "Digests"). Each is
// written once, here: the deciders recompute them (aggregates), a client
// computes them before sending a command (client, greffe digest), and an
// auditor checks them. A change to any formula changes stored bytes, so
// each has a test vector (digest_test.go) reproducible with sha256sum.
//
// A digest greffe defines is spelled DigestPrefix and 64 lowercase hex
// characters; a content hash (a file's, a patch's: the SHA-256 of bytes
// someone else hashed) is the 64 hex characters alone, as sha256sum
// prints it. Key ids are "ed25519:" and 32 hex characters.

// DigestPrefix starts every digest greffe defines.
const DigestPrefix = "sha256:"

// BindingArtifact is one artifact of a binding, as its identity covers it.
type BindingArtifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Role   string `json:"role"`
}

// BindingContent is what a binding's identity covers: the fields of
// ProposeBinding's data that name what serves (its id, provider, tag,
// family and context size are not part of it). Its JSON names are
// ProposeBinding's, so that the data of a ProposeBinding decodes into it.
type BindingContent struct {
	ConfigSHA256   string            `json:"config_sha256"`
	SourceCommit   string            `json:"source_commit"`
	TemplateSHA256 string            `json:"template_sha256"`
	ModelMetadata  map[string]string `json:"model_metadata"`
	Artifacts      []BindingArtifact `json:"artifacts"`
}

// BindingIdentity returns a binding's identity: DigestPrefix and the hex
// SHA-256 of the JSON object
//
//	{"config_sha256":…,"source_commit":…,"template_sha256":…,
//	 "model_metadata":{…keys sorted…},
//	 "artifacts":[{"path":…,"size":…,"sha256":…,"role":…},…]}
//
// written without spaces and without HTML escaping (<, > and & as
// themselves), members in that order, artifacts in the binding's order,
// absent metadata as {} and absent artifacts as []. Mtimes and verifier
// names are left out: the identity is what serves, not when or by whom it
// was hashed. The format never changes; a new one would get a new prefix.
func BindingIdentity(b BindingContent) string {
	if b.ModelMetadata == nil {
		b.ModelMetadata = map[string]string{}
	}
	if b.Artifacts == nil {
		b.Artifacts = []BindingArtifact{}
	}
	return DigestPrefix + hexSHA256(compactJSON(b))
}

// ArgvHash returns the identity of an exact command line (an acceptance
// check's and a check run's argv_hash): DigestPrefix and the hex SHA-256
// of argv written as a JSON array of strings without spaces or HTML
// escaping (["bash","t.sh"]); nil is [].
func ArgvHash(argv []string) string {
	if argv == nil {
		argv = []string{}
	}
	return DigestPrefix + hexSHA256(compactJSON(argv))
}

// KeyID returns the key id of an ed25519 public key, as a signature names
// it (Signature.KeyID): "ed25519:" and the hex of the first 16 bytes of
// SHA-256(public key), so that a key id names exactly one key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:16])
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
