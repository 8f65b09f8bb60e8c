package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/bench"
	"github.com/greffe/greffe/events"
)

// The fsync check: each system's shape A (one writer, one event per
// append) with strace attached to the server process, counting the
// fsync and fdatasync calls of all its threads for a fixed number of
// acknowledged appends, then for as long again with no load (what the
// server syncs on its own: timers, background commits). One fsync or more
// per acknowledgement, and few when idle, says the acknowledgement waits
// for the disk.

// syncCalls is what strace traces.
const syncCalls = "fsync,fdatasync"

// fsyncCount is one system's check.
type fsyncCount struct {
	System  string `json:"system"`
	Appends int    `json:"appends"`
	// Load is the calls counted while the appends ran, by syscall; Idle
	// is the same for as long with no load.
	Load        map[string]int `json:"load"`
	Idle        map[string]int `json:"idle"`
	LoadSeconds float64        `json:"load_seconds"`
	// PerAck is all calls of Load divided by Appends.
	PerAck float64 `json:"fsyncs_per_ack"`
	// Error says why the check failed; err is the same error.
	Error string `json:"error,omitempty"`
	err   error
}

// fail records err as the check's failure, with what was being done.
func (c *fsyncCount) fail(doing string, err error) {
	c.err = fmt.Errorf("%s: %w", doing, err)
	c.Error = c.err.Error()
}

// errNotAttached is returned when strace cannot attach to a server (not
// installed, or ptrace not permitted).
var errNotAttached = errors.New("strace did not attach")

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// checkFsyncs runs the check for each system, each on a fresh server.
func checkFsyncs(ctx context.Context, systems []system, appends int, dir string) []fsyncCount {
	var out []fsyncCount
	for _, sys := range systems {
		c := checkOne(ctx, sys, appends, dir)
		out = append(out, c)
	}
	return out
}

func checkOne(ctx context.Context, sys system, appends int, parent string) (c fsyncCount) {
	c = fsyncCount{System: sys.Name(), Appends: appends}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp(parent, "peers-fsyncs-"+sys.Name()+"-")
	if err != nil {
		c.fail("temporary folder", err)
		return c
	}
	defer os.RemoveAll(dir)
	inst, err := sys.Start(ctx, dir)
	if err != nil {
		c.fail("start", err)
		return c
	}
	defer func() {
		if err := inst.Close(); err != nil && c.err == nil {
			c.fail("stop", err)
		}
	}()
	payload := bench.Payload(payloadBytes)
	// One append before tracing: the first request opens connections and
	// files that later ones reuse.
	if err := inst.Append(ctx, "fsyncs", []events.Proposed{{ID: uuid.New(), Type: "BenchEvent", Data: payload, Metadata: json.RawMessage(`{}`)}}); err != nil {
		c.fail("first append", err)
		return c
	}
	var elapsed time.Duration
	c.Load, err = traceSyncs(ctx, inst.PID(), dir, func() error {
		start := time.Now()
		defer func() { elapsed = time.Since(start) }()
		for range appends {
			ev := events.Proposed{ID: uuid.New(), Type: "BenchEvent", Data: payload, Metadata: json.RawMessage(`{}`)}
			if err := inst.Append(ctx, "fsyncs", []events.Proposed{ev}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		c.fail("under load", err)
		return c
	}
	c.LoadSeconds = elapsed.Seconds()
	c.PerAck = float64(total(c.Load)) / float64(appends)
	c.Idle, err = traceSyncs(ctx, inst.PID(), dir, func() error {
		select {
		case <-time.After(elapsed):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		c.fail("idle", err)
	}
	return c
}

// traceSyncs attaches `strace -f -c -e trace=fsync,fdatasync` to every
// thread of pid, runs fn once strace says it is attached, then detaches it
// (SIGINT) and returns the calls it counted, by syscall.
func traceSyncs(ctx context.Context, pid int, dir string, fn func() error) (map[string]int, error) {
	out := filepath.Join(dir, fmt.Sprintf("strace-%d.txt", time.Now().UnixNano()))
	cmd := exec.Command("strace", "-f", "-c", "-e", "trace="+syncCalls, "-o", out, "-p", strconv.Itoa(pid))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %w (apt-get install strace)", errNotAttached, err)
	}
	attached := make(chan error, 1)
	var rest tail
	rest.max = stderrTail
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "attached") {
				attached <- nil
				signalled = true
				continue
			}
			fmt.Fprintln(&rest, sc.Text())
		}
		if !signalled {
			attached <- fmt.Errorf("%w to %d: %s", errNotAttached, pid, rest.String())
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var fnErr error
	select {
	case err := <-attached:
		if err != nil {
			_ = cmd.Wait()
			return nil, err
		}
		fnErr = fn()
	case <-ctx.Done():
		fnErr = ctx.Err()
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	waitErr := cmd.Wait()
	if fnErr != nil {
		return nil, fnErr
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return nil, fmt.Errorf("strace: %w", waitErr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("strace's summary: %w", err)
	}
	return parseStraceSummary(string(b))
}

// parseStraceSummary reads the table `strace -c` prints:
//
//	% time     seconds  usecs/call     calls    errors syscall
//	------ ----------- ----------- --------- --------- ----------------
//	100.00    0.412345         206      2001           fdatasync
//	------ ----------- ----------- --------- --------- ----------------
//	100.00    0.412345         206      2001           total
//
// The errors column is empty when there were none, so calls is the
// fourth field and the syscall the last. Syscalls never called have no
// row and count 0.
func parseStraceSummary(s string) (map[string]int, error) {
	counts := map[string]int{}
	for _, name := range strings.Split(syncCalls, ",") {
		counts[name] = 0
	}
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] == "%" || strings.HasPrefix(f[0], "-") {
			continue
		}
		name := f[len(f)-1]
		if name == "total" {
			continue
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			return nil, fmt.Errorf("strace summary line %q: %w", strings.TrimSpace(line), err)
		}
		counts[name] = n
	}
	return counts, nil
}

func writeFsyncsText(w io.Writer, cs []fsyncCount) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tappends\tfsync\tfdatasync\tper acknowledgement\tidle for as long (fsync+fdatasync)\tload time")
	for _, c := range cs {
		if c.Error != "" {
			fmt.Fprintf(tw, "%s\tFAILED: %s\n", c.System, c.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%d\t%.1fs\n", c.System, c.Appends, c.Load["fsync"], c.Load["fdatasync"],
			c.PerAck, total(c.Idle), c.LoadSeconds)
	}
	return tw.Flush()
}
