package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
)

// TestServe_Policy: `serve --policy FILE` runs the node on the defaults
// overridden by the file (GET /v1/policy shows them), and a file with an
// unknown field or an invalid value stops serve before it opens anything,
// with exit 2 and the field's path.
func TestServe_Policy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ name, body, errText string }{
		{"unknown field", `{"budgets": {"correction": 2}}`, "policy.budgets.correction: unknown field"},
		{"invalid value", `{"budgets": {"attempts": -1}}`, "budgets.attempts is -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(dir, "data-"+strings.ReplaceAll(tc.name, " ", "-"))
			code, _, errs := runCLI(t, "", "serve", "--data", data, "--http", "127.0.0.1:0", "--policy", write(tc.name+".json", tc.body))
			if code != exitCannot || !strings.Contains(errs, tc.errText) {
				t.Fatalf("exit %d stderr %q, want %d containing %q", code, errs, exitCannot, tc.errText)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("serve created %s before refusing its policy", data)
			}
		})
	}

	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--json", "--data", filepath.Join(dir, "data"), "--http", "127.0.0.1:0",
			"--policy", write("policy.json", `{"budgets": {"corrections": 2}}`)}, strings.NewReader(""), pw, io.Discard)
		pw.Close()
	}()
	defer func() {
		cancel()
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d", code)
		}
	}()
	var start struct {
		URL string `json:"url"`
	}
	if err := json.NewDecoder(pr).Decode(&start); err != nil {
		t.Fatalf("start line: %v", err)
	}
	raw, err := client.New(start.URL, "").Policy(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got aggregates.Policy
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := aggregates.DefaultPolicy()
	want.Budgets.Corrections = 2
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("served policy (-want +got):\n%s", diff)
	}
}

// TestServe_AmbiguousTokens: `serve --tokens FILE` with one token under two
// names (the last entry used to win) stops before the node opens anything,
// with exit 2, the entries named by index and name and the token itself
// not printed.
func TestServe_AmbiguousTokens(t *testing.T) {
	dir := t.TempDir()
	const secret = "shared-token-0123456789"
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"name":"audit","role":"reader","token":"`+secret+`"},`+
		`{"name":"root","role":"admin","token":"`+secret+`"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	// Bounded: a serve that accepted the file would run until cancelled.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var outb, errb bytes.Buffer
	code := run(ctx, []string{"serve", "--data", data, "--http", "127.0.0.1:0", "--tokens", tokens}, strings.NewReader(""), &outb, &errb)
	out, errs := outb.String(), errb.String()
	if code != exitCannot || !strings.Contains(errs, `tokens[0] ("audit", reader) and tokens[1] ("root", admin) hold the same token`) {
		t.Fatalf("exit %d stderr %q, want %d naming both entries", code, errs, exitCannot)
	}
	if strings.Contains(errs+out, secret) {
		t.Errorf("serve printed the token: %q", errs+out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("serve created %s before refusing its tokens", data)
	}
}
