package events

import (
	"crypto/ed25519"
	"testing"
)

// The stored-format digests pinned by test vectors: a change to a formula
// breaks every stored binding, check and key id. Each vector is
// reproducible with sha256sum over the JSON written out in its comment, so
// a client in another language can check itself against the same bytes.
// The inputs tell the spellings apart: HTML characters (never escaped),
// non-ASCII text, metadata keys out of order (sorted), absent and empty
// lists (both written []).

func TestBindingIdentity_Vectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   BindingContent
		// printf '%s' '<json>' | sha256sum
		json, want string
	}{
		{
			name: "metadata out of order, HTML characters",
			in: BindingContent{ConfigSHA256: "c", SourceCommit: "s", TemplateSHA256: "t", ModelMetadata: map[string]string{"b": "<2>", "a": "1"},
				Artifacts: []BindingArtifact{{Path: "/w", Size: 1, SHA256: "x", Role: "weights"}}},
			json: `{"config_sha256":"c","source_commit":"s","template_sha256":"t","model_metadata":{"a":"1","b":"<2>"},"artifacts":[{"path":"/w","size":1,"sha256":"x","role":"weights"}]}`,
			want: "sha256:2e5293067a2942815639636f2d1047a8dfae8f90d1a943c16a3c6436cd4fdca2",
		},
		{
			name: "absent metadata and artifacts",
			json: `{"config_sha256":"","source_commit":"","template_sha256":"","model_metadata":{},"artifacts":[]}`,
			want: "sha256:16c9da69961caab7e1e919f4e81f8fb7635fdc260231598bd6c5e14419fc9484",
		},
		{
			name: "empty metadata and artifacts",
			in:   BindingContent{ModelMetadata: map[string]string{}, Artifacts: []BindingArtifact{}},
			json: `{"config_sha256":"","source_commit":"","template_sha256":"","model_metadata":{},"artifacts":[]}`,
			want: "sha256:16c9da69961caab7e1e919f4e81f8fb7635fdc260231598bd6c5e14419fc9484",
		},
		{
			name: "non-ASCII text, an ampersand, a large size",
			in: BindingContent{ConfigSHA256: "c", SourceCommit: "s&co", TemplateSHA256: "t", ModelMetadata: map[string]string{"z": "1", "a": "é", "m": "<x>"},
				Artifacts: []BindingArtifact{{Path: "/models/q/weights <1>.gguf", Size: 16 << 30, SHA256: "w", Role: "weights"}}},
			json: `{"config_sha256":"c","source_commit":"s&co","template_sha256":"t","model_metadata":{"a":"é","m":"<x>","z":"1"},"artifacts":[{"path":"/models/q/weights <1>.gguf","size":17179869184,"sha256":"w","role":"weights"}]}`,
			want: "sha256:1d46554841fdfe9647635b5343478261d986661514788bdd0d254ffe5bb38cff",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BindingIdentity(tc.in); got != tc.want {
				t.Errorf("identity = %s, want %s (the SHA-256 of %s)", got, tc.want, tc.json)
			}
			if got := string(compactJSON(withDefaults(tc.in))); got != tc.json {
				t.Errorf("hashed %s, want %s", got, tc.json)
			}
		})
	}
}

func withDefaults(b BindingContent) BindingContent {
	if b.ModelMetadata == nil {
		b.ModelMetadata = map[string]string{}
	}
	if b.Artifacts == nil {
		b.Artifacts = []BindingArtifact{}
	}
	return b
}

func TestArgvHash_Vectors(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		// printf '%s' '<json>' | sha256sum
		json, want string
	}{
		{[]string{"bash", "tests/run_case.sh", "<c01>"}, `["bash","tests/run_case.sh","<c01>"]`,
			"sha256:15b9e33b81d4a36ee7182bf4d0f28dde42339e55e39c41891f3fa60ad3288175"},
		{nil, `[]`, "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"},
		{[]string{}, `[]`, "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"},
		{[]string{"python3", "-c", "print('<&>')", "é"}, `["python3","-c","print('<&>')","é"]`,
			"sha256:de7e036448b0eb0145fd3770c0577650b7e92868986739c9957561da84ff1c20"},
	} {
		if got := ArgvHash(tc.argv); got != tc.want {
			t.Errorf("ArgvHash(%q) = %s, want %s (the SHA-256 of %s)", tc.argv, got, tc.want, tc.json)
		}
	}
}

// TestKeyID_Vector: the key 00 01 … 1f, reproducible with
//
//	python3 -c 'import hashlib; print(hashlib.sha256(bytes(range(32))).hexdigest()[:32])'
func TestKeyID_Vector(t *testing.T) {
	pub := make(ed25519.PublicKey, ed25519.PublicKeySize)
	for i := range pub {
		pub[i] = byte(i)
	}
	if got, want := KeyID(pub), "ed25519:630dcd2966c4336691125448bbb25b4f"; got != want {
		t.Errorf("KeyID = %s, want %s", got, want)
	}
}
