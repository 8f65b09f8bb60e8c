package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

func hexOf(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }

// TestCLI_Digest: greffe digest prints what the node recomputes, so that
// a binding proposed with the identity it prints verifies (no
// identity_mismatch), an executor key registered on a node gets the key id
// it prints, and a bare-hex identity is refused with the spelling it wants.
func TestCLI_Digest(t *testing.T) {
	n := startNode(t)
	c := client.New(n.URL(), "")
	dir := t.TempDir()
	send := func(name string, data any) (wire.CommandOut, error) {
		b, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		return c.Command(t.Context(), wire.CommandIn{Command: name, ID: uuid.NewString(), Data: b})
	}

	// A binding: identity by the CLI, then hashed by an executor and verified.
	arts := []aggregates.BindingArtifact{
		{Path: "/m/weights.gguf", Size: 1 << 30, SHA256: aggregates.Hex64(hexOf("weights")), Role: aggregates.RoleWeights},
		{Path: "/o/llama-server", Size: 9 << 20, SHA256: aggregates.Hex64(hexOf("server")), Role: aggregates.RoleServer},
		{Path: "/o/libggml-cuda.so", Size: 80 << 20, SHA256: aggregates.Hex64(hexOf("engine")), Role: aggregates.RoleEngine},
		{Path: "/m/tokenizer.json", Size: 7 << 20, SHA256: aggregates.Hex64(hexOf("tokenizer")), Role: aggregates.RoleTokenizer},
		{Path: "/m/template.jinja", Size: 4 << 10, SHA256: aggregates.Hex64(hexOf("template")), Role: aggregates.RoleTemplate},
	}
	pb := aggregates.ProposeBinding{BindingID: "b1", Provider: "p1", ModelTag: "qwen:27b", Family: "coder",
		ConfigSHA256: aggregates.Hex64(hexOf("config")), SourceCommit: "7695859a", TemplateSHA256: aggregates.Hex64(hexOf("template")), ContextTokens: 65536,
		ModelMetadata: map[string]string{"quantization": "Q4_K_M", "architecture": "qwen35"}, Artifacts: arts}
	file := filepath.Join(dir, "binding.json")
	b, _ := json.MarshalIndent(pb, "", "  ")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "", "digest", "binding", file)
	identity := strings.TrimSpace(out)
	if code != exitOK || !strings.HasPrefix(identity, "sha256:") || len(identity) != 71 {
		t.Fatalf("digest binding: %d %q %q", code, out, errs)
	}
	// The bare-hex spelling of the same digest is refused, naming the one it wants.
	pb.Identity = aggregates.Digest(strings.TrimPrefix(identity, "sha256:"))
	_, err := send("ProposeBinding", pb)
	var ae *wire.Error
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Field != "data.identity" || !strings.Contains(ae.Message, `"sha256:" and 64 lowercase hex`) {
		t.Fatalf("bare-hex identity: %v", err)
	}
	pb.Identity = aggregates.Digest(identity)
	if _, err := send("ProposeBinding", pb); err != nil {
		t.Fatal(err)
	}
	// The hashes an executor signs (issue #20: a writer's verify nothing).
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	var argv []string
	var readings []aggregates.ArtifactReading
	for _, a := range arts {
		argv = append(argv, string(a.Role)+"="+string(a.Path))
		readings = append(readings, aggregates.ArtifactReading{Path: string(a.Path), Role: string(a.Role), Size: int64(a.Size), MtimeNS: 1_772_000_000_000_000_000, SHA256: string(a.SHA256)})
	}
	for _, cmd := range []struct {
		name string
		data any
	}{
		{"GrantApproval", aggregates.GrantApproval{ApprovalID: "reg-hasher", Approver: "owner", Action: aggregates.ActionActivation,
			Subject: aggregates.ShortText(aggregates.ExecutorStream("hasher")), Uses: 1, ExpiresAt: time.Now().Add(time.Hour)}},
		{"RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: "hasher", Host: "h1", PublicKey: aggregates.Ed25519PublicKey(key.Public().(ed25519.PublicKey)), ApprovalID: "reg-hasher"}},
		{"RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: "hash-b1", Host: "h1", Argv: argv, Kind: aggregates.MeasurementHash, BindingID: "b1",
			Timeout: aggregates.PositiveDuration(aggregates.D(time.Minute)), OutputCapBytes: 4096}},
		{"ClaimMeasurement", aggregates.ClaimMeasurement{MeasurementID: "hash-b1", ExecutorID: "hasher", LeaseUntil: time.Now().Add(time.Minute)}},
	} {
		if _, err := send(cmd.name, cmd.data); err != nil {
			t.Fatalf("%s: %v", cmd.name, err)
		}
	}
	now := time.Now().UTC()
	payload, _ := json.Marshal(aggregates.MeasurementResult{MeasurementID: "hash-b1", ExecutorID: "hasher", Host: "h1", Argv: argv, StartedAt: now, EndedAt: now,
		Outcome: aggregates.ResultCompleted, Artifacts: readings})
	env, err := events.SignData(t.Context(), aggregates.MeasurementPayloadType, payload, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send("RecordMeasurement", aggregates.RecordMeasurement{MeasurementID: "hash-b1", ExecutorID: "hasher", Payload: payload, Envelope: *env}); err != nil {
		t.Fatal(err)
	}
	res, err := send("VerifyBinding", aggregates.VerifyBinding{BindingID: "b1", VerifiedBy: "supervisor-1"})
	if err != nil || len(res.Events) != 1 || res.Events[0].Type != aggregates.TypeBindingVerified {
		t.Fatalf("verify a binding whose identity greffe digest computed: %+v, %v", res, err)
	}

	// argv: the hash of the exact command line.
	code, out, _ = runCLI(t, "", "digest", "argv", "--json", "--", "bash", "-c", "test -x t.sh")
	var d struct{ Kind, Digest string }
	if err := json.Unmarshal([]byte(out), &d); code != exitOK || err != nil || d.Digest != events.ArgvHash([]string{"bash", "-c", "test -x t.sh"}) || d.Kind != "argv_hash" {
		t.Fatalf("digest argv: %d %q %v", code, out, err)
	}

	// An executor key in each accepted spelling, then registered.
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	spellings := map[string][]byte{
		"pem": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		"b64": []byte(base64.StdEncoding.EncodeToString(pub) + "\n"),
		"raw": pub,
	}
	var keyID string
	for name, body := range spellings {
		f := filepath.Join(dir, name+".pub")
		if err := os.WriteFile(f, body, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runCLI(t, "", "digest", "executor-key", f)
		if code != exitOK {
			t.Fatalf("digest executor-key %s: %d %q", name, code, errs)
		}
		if keyID != "" && strings.TrimSpace(out) != keyID {
			t.Errorf("%s spelling: %s, want %s", name, out, keyID)
		}
		keyID = strings.TrimSpace(out)
	}
	if _, err := send("GrantApproval", aggregates.GrantApproval{ApprovalID: "reg", Approver: "owner", Action: aggregates.ActionActivation,
		Subject: aggregates.ShortText(aggregates.ExecutorStream("gpu1")), Uses: 1, ExpiresAt: time.Now().Add(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	res, err = send("RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: "gpu1", Host: "spark-1", PublicKey: aggregates.Ed25519PublicKey(pub), ApprovalID: "reg"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.Event(t.Context(), res.Events[0].ID.String())
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		KeyID string `json:"key_id"`
	}
	if err := json.Unmarshal(e.Data, &reg); err != nil || reg.KeyID != keyID {
		t.Errorf("registered key id %q, greffe digest printed %q (%v)", reg.KeyID, keyID, err)
	}
	if code, _, errs := runCLI(t, "", "digest", "executor-key", file); code != exitCannot || !strings.Contains(errs, "ed25519") {
		t.Errorf("a file that is no key: exit %d, %q", code, errs)
	}
}
