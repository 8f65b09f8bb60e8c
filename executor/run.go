package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/greffe/greffe/aggregates"
)

// DefaultEnvAllowlist names the variables a run inherits from the
// executor's environment; every other variable is dropped, so a request
// cannot depend on (or leak) whatever the executor's shell happened to
// hold. PATH resolves tools; HOME, USER, LANG, LC_ALL and TZ keep ordinary
// programs sane; CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES and
// LD_LIBRARY_PATH select the GPU and its libraries. TMPDIR is not
// inherited: it is set to the run's own temporary directory.
func DefaultEnvAllowlist() []string {
	return []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH"}
}

// allowedEnv returns the executor's values of the allowlisted variables,
// in allowlist order; unset ones are left out.
func allowedEnv(allow []string) []string {
	var env []string
	for _, k := range allow {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// runSpec is one bounded process run.
type runSpec struct {
	Argv    []string
	Env     []string // the whole environment of the process
	Dir     string   // working directory; "" makes a fresh one under TempRoot
	Timeout time.Duration
	// OutputCap bounds each excerpt, in bytes.
	OutputCap int64
	// TempRoot is where a fresh working directory is made ("" = os.TempDir).
	TempRoot string
	// Metrics parses stdout's metric lines.
	Metrics bool
	// KillGrace bounds how long, after the process ends (or is killed), the
	// run waits for descendants that escaped its group to release its
	// output pipes.
	KillGrace time.Duration
}

// runResult is what a run observed.
type runResult struct {
	Outcome  string // aggregates.Result…
	ExitCode int    // -1 unless ResultExited
	Error    string
	// startErr is why the program could not start (start_failed).
	startErr error
	Started  time.Time
	Ended    time.Time
	Duration time.Duration
	Stdout   *capture
	Stderr   *capture
	Metrics  *metricParser
}

// errStopped reports a run killed because the executor itself was
// stopping: its outcome is no measurement, and nothing is reported.
var errStopped = errors.New("executor: stopped while running")

// runProcess runs spec.Argv without a shell, in its own process group, and
// kills the whole group (grandchildren too) at the timeout, at ctx's end,
// and once the process exits (leftovers do not outlive the measurement).
// It returns errStopped when ctx ended first; any other failure to run is
// a result (start_failed), not an error.
func runProcess(ctx context.Context, spec runSpec) (runResult, error) {
	res := runResult{ExitCode: -1, Stdout: newCapture(spec.OutputCap, nil), Stderr: newCapture(spec.OutputCap, nil)}
	if spec.Metrics {
		res.Metrics = newMetricParser()
		res.Stdout.metrics = res.Metrics
	}
	res.Started = time.Now().UTC()
	started := time.Now()
	finish := func() (runResult, error) {
		res.Duration = time.Since(started)
		res.Ended = res.Started.Add(res.Duration)
		if res.Metrics != nil {
			res.Metrics.flush()
		}
		return res, nil
	}
	path, err := resolveArgv0(spec.Argv[0], spec.Env)
	if err != nil {
		res.Outcome, res.Error, res.startErr = aggregates.ResultStartFailed, err.Error(), err
		return finish()
	}
	dir := spec.Dir
	if dir == "" {
		d, err := os.MkdirTemp(spec.TempRoot, "greffe-measure-")
		if err != nil {
			return res, fmt.Errorf("working directory: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	runCtx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, path, spec.Argv[1:]...)
	cmd.Args[0] = spec.Argv[0] // the program sees the approved argv[0]
	cmd.Env = append(append([]string(nil), spec.Env...), "TMPDIR="+dir)
	cmd.Dir = dir
	cmd.Stdin = nil // /dev/null: a measurement reads no input
	cmd.Stdout, cmd.Stderr = res.Stdout, res.Stderr
	// The run and its descendants form one process group, killed as one;
	// on Linux the kernel also kills the leader if the executor dies, a
	// signal tied to the starting thread, locked until Wait returns
	// (proc_*.go).
	cmd.SysProcAttr = groupAttr()
	if deathSignalNeedsThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = spec.KillGrace
	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return res, errStopped
		}
		res.Outcome, res.Error, res.startErr = aggregates.ResultStartFailed, err.Error(), err
		return finish()
	}
	waitErr := cmd.Wait()
	// Whatever the leader did, nothing of its group outlives the run.
	_ = killGroup(cmd.Process.Pid)
	if ctx.Err() != nil {
		return res, errStopped
	}
	st := cmd.ProcessState
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case runCtx.Err() != nil:
		res.Outcome = aggregates.ResultTimeout
		res.Error = fmt.Sprintf("killed with its process group at the timeout of %s", spec.Timeout)
	case ws.Signaled():
		res.Outcome, res.Error = aggregates.ResultSignaled, "killed by "+ws.Signal().String()
	case st.Exited():
		res.Outcome, res.ExitCode = aggregates.ResultExited, st.ExitCode()
		if errors.Is(waitErr, exec.ErrWaitDelay) {
			res.Error = "a descendant kept the output open after the process exited; it was killed"
		}
	default:
		res.Outcome, res.Error = aggregates.ResultSignaled, fmt.Sprintf("ended without an exit status: %v", waitErr)
	}
	return finish()
}

// resolveArgv0 finds the program: a bare name on the run's PATH, or an
// absolute path. A relative path with a slash is refused: it would resolve
// against a working directory that is fresh and empty.
func resolveArgv0(name string, env []string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return name, nil
	}
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("argv[0] %q is a relative path; use a name on PATH or an absolute path", name)
	}
	pathVar := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, d := range strings.Split(pathVar, ":") {
		if d == "" || !strings.HasPrefix(d, "/") {
			continue // "" and relative entries would mean the fresh working directory
		}
		p := d + "/" + name
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q: %w in PATH %q", name, exec.ErrNotFound, pathVar)
}
