package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/aggregates"
)

// plan plans targets under a policy allowing only dir, failing on a
// refusal.
func plan(t *testing.T, dir string, targets []aggregates.HashTarget) []hashSource {
	t.Helper()
	p := &HostPolicy{HashPaths: []string{dir}}
	src, _, ref := p.planHash(targets, false)
	if ref != nil {
		t.Fatalf("refused: %v", ref)
	}
	return src
}

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
	got := hashFiles(t.Context(), plan(t, dir, targets))
	want := []aggregates.ArtifactReading{
		{Path: weights, Role: "weights", Size: int64(len(content)), MtimeNS: fi.ModTime().UnixNano(), SHA256: hex.EncodeToString(sum[:])},
		{Path: empty, Role: "template", Size: 0, MtimeNS: fe.ModTime().UnixNano(), SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{Path: filepath.Join(dir, "missing"), Role: "server", Error: "openat " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{Path: dir, Role: "engine", Error: dir + " is not a regular file (d---------)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readings (-want +got):\n%s", diff)
	}

	// A timeout leaves every file not read with its error, never a digest.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, r := range hashFiles(ctx, plan(t, dir, targets[:2])) {
		if r.SHA256 != "" || r.Error == "" {
			t.Errorf("after the timeout: %+v", r)
		}
	}
}

// TestPlanHash: the hash_paths rule, resolved through symlinks.
func TestPlanHash(t *testing.T) {
	root := t.TempDir()
	allowed, outside := filepath.Join(root, "models"), filepath.Join(root, "etc")
	for _, d := range []string{allowed, outside, filepath.Join(allowed, "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) string {
		if err := os.WriteFile(p, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(target, p string) string {
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inside := write(filepath.Join(allowed, "sub", "w.gguf"))
	secret := write(filepath.Join(outside, "shadow"))
	escape := link(secret, filepath.Join(allowed, "shadow"))
	escapeDir := link(outside, filepath.Join(allowed, "etc"))
	within := link(inside, filepath.Join(allowed, "alias.gguf"))
	dangling := link(filepath.Join(outside, "gone"), filepath.Join(allowed, "dangling"))
	alias := link(allowed, filepath.Join(root, "models-link")) // a prefix that is a symlink
	single := write(filepath.Join(outside, "tokenizer.json"))

	cases := []struct {
		name     string
		prefixes []string
		path     string
		approved bool
		refused  string // "" allowed; else a substring of the reason
		read     string // a substring of the reading's error; "" hashed
	}{
		{"a file under the prefix", []string{allowed}, inside, false, "", ""},
		{"a file outside", []string{allowed}, secret, false, "under none of the host's 1 hash_paths", ""},
		{"a symlink inside leading outside", []string{allowed}, escape, false, "through a symlink", ""},
		{"a directory symlink leading outside", []string{allowed}, filepath.Join(escapeDir, "shadow"), false, "through a symlink", ""},
		{"a symlink inside leading inside", []string{allowed}, within, false, "", ""},
		{"a missing file inside: judged by name", []string{allowed}, filepath.Join(allowed, "nope"), false, "", "no such file"},
		{"a missing file outside", []string{allowed}, filepath.Join(outside, "nope"), false, "under none", ""},
		{"a dangling symlink leading outside", []string{allowed}, dangling, false, "", "escapes"},
		{"..", []string{allowed}, allowed + "/../etc/shadow", false, `contains ".."`, ""},
		{"a prefix that is a symlink", []string{alias}, inside, false, "", ""},
		{"through the symlinked prefix", []string{alias}, filepath.Join(alias, "sub", "w.gguf"), false, "", ""},
		{"a prefix that is a file", []string{single}, single, false, "", ""},
		{"nothing allowed", nil, inside, false, "under none of the host's 0 hash_paths", ""},
		{"an approval covers a path outside", nil, secret, true, "", ""},
		{"an approval never covers ..", nil, allowed + "/../etc/shadow", true, `contains ".."`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &HostPolicy{HashPaths: tc.prefixes}
			targets := []aggregates.HashTarget{{Role: aggregates.RoleWeights, Path: tc.path}}
			src, at, ref := p.planHash(targets, tc.approved)
			if tc.refused != "" {
				if ref == nil || ref.Code != CodeHashPathNotAllowed || ref.Rule != "hash_paths" || !strings.Contains(ref.Reason, tc.refused) || at != 0 {
					t.Fatalf("got %v at %d, want %s: …%s…", ref, at, CodeHashPathNotAllowed, tc.refused)
				}
				if strings.Contains(ref.Reason, secret) && tc.path != secret {
					t.Errorf("the refusal names where the symlink leads: %s", ref.Reason)
				}
				return
			}
			if ref != nil {
				t.Fatalf("refused: %v", ref)
			}
			r := hashFiles(t.Context(), src)[0]
			if tc.read == "" && (r.SHA256 == "" || r.Error != "") || tc.read != "" && (r.SHA256 != "" || !strings.Contains(r.Error, tc.read)) {
				t.Fatalf("reading %+v, want error …%s…", r, tc.read)
			}
		})
	}
}

// TestHashFiles_SwappedAfterThePlan: a directory under the prefix replaced
// by a symlink leading outside between the check and the read (a race an
// attacker who can write under the prefix may win): the os.Root refuses to
// follow it; nothing outside is read.
func TestHashFiles_SwappedAfterThePlan(t *testing.T) {
	root := t.TempDir()
	allowed, outside := filepath.Join(root, "models"), filepath.Join(root, "etc")
	for _, d := range []string{filepath.Join(allowed, "sub"), outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(allowed, "sub", "w"), filepath.Join(outside, "w")} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := plan(t, allowed, []aggregates.HashTarget{{Role: aggregates.RoleWeights, Path: filepath.Join(allowed, "sub", "w")}})
	if err := os.RemoveAll(filepath.Join(allowed, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(allowed, "sub")); err != nil {
		t.Fatal(err)
	}
	r := hashFiles(t.Context(), src)[0]
	if r.SHA256 != "" || !strings.Contains(r.Error, "escapes") {
		t.Fatalf("reading %+v: the swapped symlink was followed", r)
	}
}
