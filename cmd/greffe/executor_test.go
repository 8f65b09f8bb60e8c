package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/executor"
	"github.com/greffe/greffe/wire"
)

// TestExecutorCmd_KilledMidRun drives the executor as an operator would,
// with real subprocesses: `greffe serve`, the key and registration
// commands, then `greffe executor` killed with SIGKILL while it runs a
// request. The node marks the request uncertain, the run's process is
// killed with its executor, and a restarted executor never runs it again
// but goes on with new requests.
func TestExecutorCmd_KilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs subprocesses")
	}
	srv := startServe(t, t.TempDir())
	t.Cleanup(srv.kill9)
	c := client.New(srv.url, "")
	dir := t.TempDir()
	key := filepath.Join(dir, "keys", "gpu1.key")
	flags := []string{"--server", srv.url, "--key", key, "--host-id", "spark-1", "--id", "gpu1"}

	out, code := executorCLI(t, append([]string{"executor", "key"}, flags...)...)
	if code != exitOK || !strings.Contains(out, "status   not_registered") {
		t.Fatalf("executor key: exit %d\n%s", code, out)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}

	exposed := filepath.Join(dir, "exposed.key")
	b, _ := os.ReadFile(key)
	if err := os.WriteFile(exposed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(exposed, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := executorCLI(t, "executor", "key", "--key", exposed, "--host-id", "spark-1", "--server", srv.url); code != exitCannot || !strings.Contains(out, "accessible to others") {
		t.Fatalf("a key readable by others: exit %d\n%s", code, out)
	}

	if out, code := executorCLI(t, append([]string{"executor", "register", "--approval", "reg-gpu1"}, flags...)...); code != exitRefused || !strings.Contains(out, aggregates.CodeApprovalMissing) {
		t.Fatalf("register without approval: exit %d\n%s", code, out)
	}
	executorCommand(t, c, "GrantApproval", aggregates.GrantApproval{ApprovalID: "reg-gpu1", Approver: "owner", Action: aggregates.ActionActivation,
		Subject: "executor-gpu1", Uses: 1, ExpiresAt: time.Now().Add(time.Hour)})
	if out, code := executorCLI(t, append([]string{"executor", "register", "--approval", "reg-gpu1"}, flags...)...); code != exitOK {
		t.Fatalf("register: exit %d\n%s", code, out)
	}

	fake, err := filepath.Abs(filepath.Join("..", "..", "fixtures", "fake-gpu", "present"))
	if err != nil {
		t.Fatal(err)
	}
	// The host's policy: exactly the two runs below (and runs as root when
	// the test runs as root); anything else is refused, approved or not
	// (the executor package's tests hold and approve requests).
	pidFile := filepath.Join(dir, "pid")
	argv := []string{"sh", "-c", "echo $$ > " + pidFile + "; while [ ! -e " + filepath.Join(dir, "never") + " ]; do sleep 0.02; done"}
	policy := filepath.Join(dir, "host-policy.json")
	if err := executor.WriteHostPolicy(policy, executor.HostPolicy{Runs: []executor.RunTemplate{executor.Exact("wait", argv...),
		executor.Exact("metric", "sh", "-c", "echo metric ok 1")}, AllowRootRuns: os.Geteuid() == 0, IgnoreApprovals: true}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad-policy.json")
	if err := os.WriteFile(bad, []byte(`{"runs": [{"argv": [{"one_of": ["sh"]}, "-c", "id"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := executorCLI(t, append([]string{"executor", "--host-policy", bad}, flags...)...); code != exitCannot || !strings.Contains(out, "runs[0].argv[0] must be the program itself") {
		t.Fatalf("an invalid host policy: exit %d\n%s", code, out)
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(greffeBin, append([]string{"executor", "--lease", "600ms", "--log-level", "warn", "--host-policy", policy}, flags...)...)
		cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"))
		cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	x := start()
	executorCommand(t, c, "RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: "m1", Host: "spark-1", Kind: aggregates.MeasurementRun,
		Argv: argv, Timeout: aggregates.PositiveDuration(aggregates.D(time.Minute)), OutputCapBytes: 1024})
	executorWaitFor(t, c, "measurement-m1", aggregates.TypeMeasurementClaimed)
	pid := executorReadPid(t, pidFile)
	if err := x.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = x.Wait()
	executorWaitFor(t, c, "measurement-m1", aggregates.TypeMeasurementUncertain)
	executorWaitExited(t, pid)

	x = start()
	executorCommand(t, c, "RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: "m2", Host: "spark-1", Kind: aggregates.MeasurementRun,
		Argv: []string{"sh", "-c", "echo metric ok 1"}, Timeout: aggregates.PositiveDuration(aggregates.D(10 * time.Second)), OutputCapBytes: 1024})
	executorWaitFor(t, c, "measurement-m2", aggregates.TypeMeasurementRecorded)
	page, err := c.ReadStream(t.Context(), "measurement-m1", events.ReadOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range page.Events {
		types = append(types, e.Type)
	}
	if diff := cmp.Diff([]string{aggregates.TypeMeasurementRequested, aggregates.TypeMeasurementClaimed, aggregates.TypeMeasurementUncertain}, types); diff != "" {
		t.Errorf("the killed run is uncertain, never retried (-want +got):\n%s", diff)
	}
	if out, code := executorCLI(t, "executor", "verify", "m2", "--server", srv.url); code != exitOK || !strings.Contains(out, "signature   verified: [ed25519:") || !strings.Contains(out, "metric      ok 1") {
		t.Errorf("verify m2: exit %d\n%s", code, out)
	}
	if out, code := executorCLI(t, "executor", "verify", "m1", "--server", srv.url); code != exitCannot || !strings.Contains(out, "no recorded result") {
		t.Errorf("verify m1 (uncertain, no result): exit %d\n%s", code, out)
	}
	// A run the policy does not list (issue #20: a writer's root shell):
	// not run, answered refused_by_host, signed.
	marker := filepath.Join(dir, "pwned")
	executorCommand(t, c, "RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: "m3", Host: "spark-1", Kind: aggregates.MeasurementRun,
		Argv: []string{"/bin/sh", "-c", "id > " + marker}, Timeout: aggregates.PositiveDuration(aggregates.D(10 * time.Second)), OutputCapBytes: 1024})
	executorWaitFor(t, c, "measurement-m3", aggregates.TypeMeasurementRecorded)
	if out, code := executorCLI(t, "executor", "verify", "m3", "--server", srv.url); code != exitOK || !strings.Contains(out, "outcome     refused_by_host, exit -1") ||
		!strings.Contains(out, "error       run_not_allowed: ") {
		t.Errorf("verify m3: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the refused run ran: %s exists", marker)
	}
	// The first signal stops the executor gracefully: exit 0.
	if err := x.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := x.Wait(); err != nil {
		t.Fatalf("executor after SIGTERM: %v", err)
	}

	// Without --host-policy nothing is done, approved or not (issue #20):
	// a hash approved before the executor starts (a hash, not a run, so
	// that an executor running as root is refused for the same reason) is
	// refused_by_host, nothing read.
	weights := filepath.Join(dir, "w.gguf")
	if err := os.WriteFile(weights, []byte("weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	executorCommand(t, c, "RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: "m4", Host: "spark-1", Kind: aggregates.MeasurementHash,
		BindingID: "b-approved", Argv: []string{"weights=" + weights}, Timeout: aggregates.PositiveDuration(aggregates.D(10 * time.Second)), OutputCapBytes: 1024})
	executorCommand(t, c, "ApproveMeasurement", aggregates.ApproveMeasurement{MeasurementID: "m4"})
	bare := exec.Command(greffeBin, append([]string{"executor", "--log-level", "warn"}, flags...)...)
	bare.Stdout, bare.Stderr = t.Output(), t.Output()
	if err := bare.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bare.Process.Kill(); _ = bare.Wait() })
	executorWaitFor(t, c, "measurement-m4", aggregates.TypeMeasurementRecorded)
	if out, code := executorCLI(t, "executor", "verify", "m4", "--server", srv.url); code != exitOK || !strings.Contains(out, "outcome     refused_by_host, exit -1") ||
		!strings.Contains(out, "error       "+executor.CodeHashPathNotAllowed+": ") {
		t.Errorf("verify m4 (approved, no host policy): exit %d\n%s", code, out)
	}
	if page, err := c.ReadStream(t.Context(), "binding-b-approved", events.ReadOptions{Limit: 10}); err == nil && len(page.Events) > 0 {
		t.Errorf("an approved hash was read by an executor without a host policy: %d binding events", len(page.Events))
	}
	if err := bare.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := bare.Wait(); err != nil {
		t.Fatalf("the executor without a policy after SIGTERM: %v", err)
	}
}

func executorCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	code := run(ctx, args, strings.NewReader(""), &out, &out)
	return out.String(), code
}

func executorCommand(t *testing.T, c *client.Client, name string, data any) {
	t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Command(t.Context(), wire.CommandIn{Command: name, ID: uuid.NewString(), Data: b}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// executorWaitFor follows the log (bounded) until an event of typ on stream.
func executorWaitFor(t *testing.T, c *client.Client, stream, typ string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	found := errors.New("found")
	err := c.Subscribe(ctx, 0, events.Filter{StreamPrefix: stream, Types: []string{typ}}, func(e events.Event) error {
		if e.Stream == stream {
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("no %s on %s: %v", typ, stream, err)
	}
}

// executorReadPid polls (the run writes it) until path holds a pid, with a deadline.
func executorReadPid(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
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

// executorWaitExited polls (an external process, with a deadline) until pid is gone
// or a zombie.
func executorWaitExited(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run (pid %d) outlived its killed executor: %s", pid, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
