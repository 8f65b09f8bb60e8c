package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/aggregates"
)

func TestHashFiles(t *testing.T) {
	dir := t.TempDir()
	weights := filepath.Join(dir, "weights.gguf")
	content := make([]byte, 3*hashBufferSize+17) // several buffers and a tail
	for i := range content {
		content[i] = byte(i * 7)
	}
	if err := os.WriteFile(weights, content, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "template.jinja")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(weights)
	fe, _ := os.Stat(empty)
	sum := sha256.Sum256(content)
	targets := []aggregates.HashTarget{
		{Role: aggregates.RoleWeights, Path: weights},
		{Role: aggregates.RoleTemplate, Path: empty},
		{Role: aggregates.RoleServer, Path: filepath.Join(dir, "missing")},
		{Role: aggregates.RoleEngine, Path: dir},
	}
	got := hashFiles(t.Context(), targets)
	want := []aggregates.ArtifactReading{
		{Path: weights, Role: "weights", Size: int64(len(content)), MtimeNS: fi.ModTime().UnixNano(), SHA256: hex.EncodeToString(sum[:])},
		{Path: empty, Role: "template", Size: 0, MtimeNS: fe.ModTime().UnixNano(), SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{Path: filepath.Join(dir, "missing"), Role: "server", Error: "open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{Path: dir, Role: "engine", Error: dir + " is not a regular file (d---------)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readings (-want +got):\n%s", diff)
	}

	// A timeout leaves every file not read with its error, never a digest.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, r := range hashFiles(ctx, targets[:2]) {
		if r.SHA256 != "" || r.Error == "" {
			t.Errorf("after the timeout: %+v", r)
		}
	}
}
