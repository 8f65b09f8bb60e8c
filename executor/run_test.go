package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/aggregates"
)

// testEnv is the environment of the test runs: the allowlist over the test
// process's own environment.
func testEnv() []string { return allowedEnv(DefaultEnvAllowlist()) }

func testSpec(argv ...string) runSpec {
	return runSpec{Argv: argv, Env: testEnv(), Timeout: 10 * time.Second, OutputCap: 16 << 10, Metrics: true, KillGrace: 200 * time.Millisecond}
}

func TestRunProcess(t *testing.T) {
	t.Setenv("GREFFE_TEST_SECRET", "must not leak")
	root := t.TempDir()
	cases := []struct {
		name  string
		spec  runSpec
		check func(t *testing.T, r runResult)
	}{
		{
			name: "exit code and both streams", spec: testSpec("sh", "-c", "echo out; echo err >&2; exit 3"),
			check: func(t *testing.T, r runResult) {
				want := []string{aggregates.ResultExited, "3", "out\n", "err\n"}
				so, _ := r.Stdout.excerpt()
				se, _ := r.Stderr.excerpt()
				if diff := cmp.Diff(want, []string{r.Outcome, strconv.Itoa(r.ExitCode), so, se}); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "the environment is cleared to the allowlist", spec: testSpec("env"),
			check: func(t *testing.T, r runResult) {
				out, _ := r.Stdout.excerpt()
				var names []string
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					k, _, _ := strings.Cut(l, "=")
					names = append(names, k)
				}
				for _, k := range names {
					if k != "TMPDIR" && !contains(DefaultEnvAllowlist(), k) {
						t.Errorf("the run saw %s, which is not allowlisted:\n%s", k, out)
					}
				}
				if !contains(names, "PATH") || !contains(names, "TMPDIR") {
					t.Errorf("PATH and TMPDIR must be set:\n%s", out)
				}
			},
		},
		{
			name: "a fresh working directory, removed afterwards", spec: func() runSpec {
				s := testSpec("sh", "-c", `pwd; [ -z "$(ls -A)" ] && echo empty; touch left-behind; [ "$TMPDIR" = "$(pwd)" ] && echo tmpdir`)
				s.TempRoot = root
				return s
			}(),
			check: func(t *testing.T, r runResult) {
				out, _ := r.Stdout.excerpt()
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if len(lines) != 3 || lines[1] != "empty" || lines[2] != "tmpdir" || filepath.Dir(lines[0]) != root {
					t.Fatalf("got %q", out)
				}
				if _, err := os.Stat(lines[0]); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("working directory %s still exists: %v", lines[0], err)
				}
			},
		},
		{
			name: "output past the cap is hashed and counted, and recorded truncated", spec: func() runSpec {
				s := testSpec("sh", "-c", "head -c 20000 /dev/zero | tr '\\000' a; echo tail >&2")
				s.OutputCap = 16 << 10
				return s
			}(),
			check: func(t *testing.T, r runResult) {
				so, truncated := r.Stdout.excerpt()
				se, seTrunc := r.Stderr.excerpt()
				want := []any{int64(20000), 16 << 10, true, "tail\n", false}
				if diff := cmp.Diff(want, []any{r.Stdout.n, len(so), truncated, se, seTrunc}); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "metric lines", spec: testSpec("sh", "-c", "echo warming up; echo 'metric tflops 12.5 TFLOP/s'; echo 'metric seconds 0.25'"),
			check: func(t *testing.T, r runResult) {
				if diff := cmp.Diff(map[string]float64{"tflops": 12.5, "seconds": 0.25}, r.Metrics.values); diff != "" {
					t.Errorf("metrics (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(map[string]string{"tflops": "TFLOP/s"}, r.Metrics.units); diff != "" {
					t.Errorf("units (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "a program not on PATH", spec: testSpec("greffe-no-such-program"),
			check: func(t *testing.T, r runResult) {
				if r.Outcome != aggregates.ResultStartFailed || r.ExitCode != -1 || !strings.Contains(r.Error, "not found") {
					t.Errorf("got %s %d %q", r.Outcome, r.ExitCode, r.Error)
				}
			},
		},
		{
			name: "a relative path", spec: testSpec("./bench.sh"),
			check: func(t *testing.T, r runResult) {
				if r.Outcome != aggregates.ResultStartFailed || !strings.Contains(r.Error, "relative path") {
					t.Errorf("got %s %q", r.Outcome, r.Error)
				}
			},
		},
		{
			name: "killed by a signal of its own", spec: testSpec("sh", "-c", "kill -TERM $$"),
			check: func(t *testing.T, r runResult) {
				if r.Outcome != aggregates.ResultSignaled || r.ExitCode != -1 || !strings.Contains(r.Error, "terminated") {
					t.Errorf("got %s %d %q", r.Outcome, r.ExitCode, r.Error)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := runProcess(t.Context(), tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

// TestRunProcess_TimeoutKillsTheGroup: at the timeout the whole process
// group dies, the grandchild too, and the run says timeout.
func TestRunProcess_TimeoutKillsTheGroup(t *testing.T) {
	s := testSpec("sh", "-c", "sleep 30 & echo $!; wait")
	s.Timeout = 300 * time.Millisecond
	start := time.Now()
	r, err := runProcess(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != aggregates.ResultTimeout || r.ExitCode != -1 {
		t.Fatalf("got %s %d %q", r.Outcome, r.ExitCode, r.Error)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the run took %s for a timeout of %s", d, s.Timeout)
	}
	waitGone(t, pidOf(t, r.Stdout))
}

// TestRunProcess_LeftoversAreKilled: a grandchild left running (and
// holding the output) after its parent exited is killed, and the run ends
// within its kill grace, recording why.
func TestRunProcess_LeftoversAreKilled(t *testing.T) {
	r, err := runProcess(t.Context(), testSpec("sh", "-c", "sleep 30 & echo $!"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != aggregates.ResultExited || r.ExitCode != 0 || !strings.Contains(r.Error, "descendant") {
		t.Fatalf("got %s %d %q", r.Outcome, r.ExitCode, r.Error)
	}
	waitGone(t, pidOf(t, r.Stdout))
}

// TestRunProcess_Stopped: an executor that stops kills the run and reports
// nothing (errStopped).
func TestRunProcess_Stopped(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := runProcess(ctx, testSpec("sh", "-c", "echo $$ > "+pidFile+"; sleep 30"))
		done <- err
	}()
	pid := waitPidFile(t, pidFile)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, errStopped) {
			t.Fatalf("got %v, want errStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not stop")
	}
	waitGone(t, pid)
}

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

func pidOf(t *testing.T, c *capture) int {
	t.Helper()
	out, _ := c.excerpt()
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("no pid in %q", out)
	}
	return pid
}

// waitGone polls (an external process, with a deadline) until pid has
// exited: absent from /proc, or a zombie waiting for its reaper.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs: %s", pid, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitPidFile polls (an external process writes it) until path holds a pid.
func waitPidFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
