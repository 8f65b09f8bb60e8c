package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/fixtures"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/wire"
)

// greffe runs the CLI in process and returns its exit code and outputs.
func greffe(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// syncBuffer is a bytes.Buffer safe for the demo's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDemo_AndTheDomainCommands runs greffe demo (every fixture history
// through HTTP, then serving), then drives it with greffe cmd, apply,
// matrix and verify-projections, then stops it and verifies its data
// folder offline.
func TestDemo_AndTheDomainCommands(t *testing.T) {
	data := filepath.Join(t.TempDir(), "demo")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	urlc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runDemo(ctx, demoConfig{Data: data, Addr: "127.0.0.1:0", ProbeInterval: time.Second}, &out, func(u string) { urlc <- u })
	}()
	var url string
	select {
	case url = <-urlc:
	case err := <-done:
		t.Fatalf("demo ended before serving: %v\n%s", err, out.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("demo not serving within 2 minutes:\n%s", out.String())
	}
	all, _ := fixtures.All()
	for _, h := range all {
		if !strings.Contains(out.String(), h.Name) {
			t.Errorf("the demo output does not mention %s", h.Name)
		}
	}
	if !strings.Contains(out.String(), "PROVIDER") || !strings.Contains(out.String(), "serving "+url) {
		t.Errorf("the demo printed no matrix or URL:\n%s", out.String())
	}
	srv := "--server=" + url

	t.Run("matrix", func(t *testing.T) {
		code, text, errs := greffe(t, "", "matrix", srv)
		for _, want := range []string{"glm-local", "dorm-local (dormant)", "✗ not_probed", "✗ failed", "✗ limits_unknown", "✗ stale", "no proving event"} {
			if !strings.Contains(text, want) {
				t.Errorf("matrix lacks %q (exit %d, %s):\n%s", want, code, errs, text)
			}
		}
		// When the first history ended, its provider was fresh.
		code, text, _ = greffe(t, "", "matrix", "--time", "2026-03-01T09:00:40Z", srv)
		row := ""
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "glm-local ") {
				row = l
				break
			}
		}
		if code != exitOK || strings.Count(row, "✓") != 4 || !strings.Contains(row, "✓ activation_ready") {
			t.Errorf("matrix at 09:00:40: row %q\n%s", row, text)
		}
		code, js, _ := greffe(t, "", "matrix", "--json", "--at", "3", srv)
		var o projections.Output
		if err := json.Unmarshal([]byte(js), &o); code != exitOK || err != nil || o.Position != 3 {
			t.Errorf("matrix --json --at 3: %d %v %s", code, err, js)
		}
		if code, _, errs := greffe(t, "", "matrix", "--at", "soon", srv); code != exitCannot || !strings.Contains(errs, "--at") {
			t.Errorf("a bad --at: %d %s", code, errs)
		}
	})

	t.Run("cmd", func(t *testing.T) {
		id := uuid.NewString()
		// The live demo runs on the wall clock: the grant expires after it.
		data := `{"approval_id":"cli-1","approver":"owner","action":"startup","subject":"provider-glm-local","uses":1,"expires_at":"` +
			time.Now().Add(30*24*time.Hour).UTC().Format(time.RFC3339) + `"}`
		code, text, errs := greffe(t, "", "cmd", "GrantApproval", "--data", data, "--id", id, srv)
		if code != exitOK || !strings.Contains(text, "ApprovalGranted") {
			t.Fatalf("cmd: %d %s %s", code, text, errs)
		}
		if code, text, _ = greffe(t, "", "cmd", "GrantApproval", "--data", data, "--id", id, srv); code != exitOK || !strings.Contains(text, "already applied") {
			t.Errorf("re-sent: %d %s", code, text)
		}
		file := filepath.Join(t.TempDir(), "grant.json")
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errs = greffe(t, "", "cmd", "GrantApproval", "--data", "@"+file, srv)
		if code != exitRefused || !strings.Contains(errs, "approval_exists") || !strings.Contains(errs, `details: {"approval_id":"cli-1"}`) {
			t.Errorf("refused: %d %s", code, errs)
		}
		code, _, errs = greffe(t, "", "cmd", "GrantApproval", "--data", `{"approval_id":"x","uses":"one"}`, srv)
		if code != exitRefused || !strings.Contains(errs, "field data.uses") {
			t.Errorf("malformed: %d %s", code, errs)
		}
		code, js, _ := greffe(t, data, "cmd", "GrantApproval", "--data", "@-", "--id", id, "--json", srv)
		var co wire.CommandOut
		if err := json.Unmarshal([]byte(js), &co); code != exitOK || err != nil || !co.Duplicate || len(co.Events) != 1 {
			t.Errorf("--json from stdin: %d %v %s", code, err, js)
		}
	})

	t.Run("apply", func(t *testing.T) {
		// The live demo runs on the wall clock and refuses "at": the history
		// is decided now, and its checks are judged at times after now.
		exp := time.Now().Add(24 * time.Hour).UTC()
		h := `{"fixture":{"name":"cli"}}
{"command":"GrantApproval","id":"` + uuid.NewString() + `","data":{"approval_id":"cli-2","approver":"owner","action":"release","subject":"mission-x","uses":2,"expires_at":"` + exp.Format(time.RFC3339) + `"},"expect":{"events":["ApprovalGranted"]}}
{"at":"` + exp.Add(-time.Hour).Format(time.RFC3339) + `","projection":"approvals","key":"cli-2","row":{"status":"active","remaining":2}}
{"at":"` + exp.Add(time.Hour).Format(time.RFC3339) + `","projection":"approvals","key":"cli-2","row":{"status":"expired"}}
`
		file := filepath.Join(t.TempDir(), "h.jsonl")
		if err := os.WriteFile(file, []byte(h), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, text, errs := greffe(t, "", "apply", file, srv); code != exitOK || !strings.Contains(text, "1 appended") {
			t.Errorf("apply: %d %s %s", code, text, errs)
		}
		wrong := strings.Replace(h, `"cli-2"`, `"cli-3"`, 1)
		wrong = strings.Replace(wrong, `["ApprovalGranted"]`, `["ApprovalConsumed"]`, 1)
		if code, _, errs := greffe(t, wrong, "apply", "-", srv); code != exitRefused || !strings.Contains(errs, "line 2") {
			t.Errorf("an unexpected outcome: %d %s", code, errs)
		}
		if code, _, errs := greffe(t, "", "apply", "no_such_history", srv); code != exitCannot {
			t.Errorf("an unknown history: %d %s", code, errs)
		}
	})

	t.Run("verify-projections", func(t *testing.T) {
		code, text, errs := greffe(t, "", "verify-projections", "--time", "2026-03-01T10:00:00Z", srv)
		if code != exitOK || !strings.Contains(text, "VERIFIED") {
			t.Errorf("verify-projections: %d %s %s", code, text, errs)
		}
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not stop within 30s")
	}
	code, text, errs := greffe(t, "", "verify-projections", "--data", data, "--json")
	var rep projectionsReport
	if err := json.Unmarshal([]byte(text), &rep); code != exitOK || err != nil || !rep.Verified || len(rep.Projections) != len(projections.Names()) {
		t.Errorf("offline verify-projections: %d %v %s %s", code, err, text, errs)
	}
}

// TestVerifyProjections_FindsADifference: a live projection whose bytes
// differ from the rebuild is reported, with where they differ.
func TestVerifyProjections_FindsADifference(t *testing.T) {
	live := []byte(`{"name":"audit","position":1,"rows":[{"key":"a"}]}`)
	rebuilt := []byte(`{"name":"audit","position":1,"rows":[{"key":"b"}]}`)
	if d := firstDifference(live, rebuilt); !strings.Contains(d, "at byte 45") {
		t.Errorf("difference: %s", d)
	}
}
