package executor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/greffe/greffe/aggregates"
)

// The nvidia-smi queries of a snapshot. The GPU query is the one issue #6
// names; the compute-apps query lists the processes holding GPU memory,
// which is how the executor observes resident models (nvidia-smi cannot say
// which model a process serves, so every such process counts as one: the
// admission screen then refuses, which is the safe side).
const (
	gpuQuery  = "--query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu"
	appsQuery = "--query-compute-apps=pid,process_name,used_memory"
	smiFormat = "--format=csv,noheader,nounits"
)

// snapshotter takes resource snapshots. Safe for concurrent use (it holds
// only configuration).
type snapshotter struct {
	nvidiaSMI string        // program name or absolute path
	timeout   time.Duration // bound on each nvidia-smi call
	meminfo   string        // path of /proc/meminfo
	env       []string
	version   string
}

// take reads the host now. It never fails: each reading it cannot take is
// recorded absent with its reason. It returns early (with what it has) when
// ctx ends.
func (s *snapshotter) take(ctx context.Context) *aggregates.ResourceSnapshot {
	snap := &aggregates.ResourceSnapshot{At: time.Now().UTC(), CPUCount: runtime.NumCPU(), ExecutorVersion: s.version}
	if h, err := os.Hostname(); err == nil {
		snap.Hostname = h
	}
	if v, err := memAvailable(s.meminfo); err != nil {
		snap.RAMError = err.Error()
	} else {
		snap.RAMAvailableBytes = &v
	}
	out, status, reason := s.smi(ctx, gpuQuery)
	snap.GPUStatus, snap.GPUError = status, reason
	if status == aggregates.GPUPresent {
		gpus, err := parseGPUs(out)
		switch {
		case err != nil:
			snap.GPUStatus, snap.GPUError = aggregates.GPUFailed, err.Error()
		case len(gpus) == 0:
			snap.GPUStatus, snap.GPUError = aggregates.GPUAbsent, "nvidia-smi lists no GPU"
		default:
			snap.GPUs = gpus
		}
	}
	if snap.GPUStatus == aggregates.GPUPresent {
		if out, st, _ := s.smi(ctx, appsQuery); st == aggregates.GPUPresent {
			if procs, err := parseApps(out); err == nil {
				snap.GPUProcesses, snap.GPUProcessesObserved = procs, true
			}
		}
	}
	return snap
}

// smi runs nvidia-smi with one query, bounded by s.timeout, and classifies the
// outcome as a GPU status: present (it answered; out is its stdout),
// absent (not installed, or no device), timeout, or error.
func (s *snapshotter) smi(ctx context.Context, query string) (out []byte, status, reason string) {
	res, err := runProcess(ctx, runSpec{
		Argv: []string{s.nvidiaSMI, query, smiFormat}, Env: s.env, Dir: os.TempDir(),
		Timeout: s.timeout, OutputCap: 64 << 10, KillGrace: time.Second,
	})
	switch {
	case err != nil:
		return nil, aggregates.GPUFailed, err.Error()
	case errors.Is(res.startErr, exec.ErrNotFound):
		return nil, aggregates.GPUAbsent, "nvidia-smi is not on PATH"
	case res.Outcome == aggregates.ResultTimeout:
		return nil, aggregates.GPUTimeout, fmt.Sprintf("nvidia-smi did not answer within %s; its process group was killed", s.timeout)
	case res.Outcome != aggregates.ResultExited:
		return nil, aggregates.GPUFailed, "nvidia-smi: " + res.Outcome + ": " + res.Error
	}
	stdout, _ := res.Stdout.excerpt()
	stderr, _ := res.Stderr.excerpt()
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(stdout + " " + stderr)
		// nvidia-smi exits 6 ("No devices were found") on a host whose
		// driver is installed but has no GPU: that is absent, not broken.
		if res.ExitCode == 6 || strings.Contains(msg, "No devices were found") {
			return nil, aggregates.GPUAbsent, msg
		}
		return nil, aggregates.GPUFailed, fmt.Sprintf("nvidia-smi exited %d: %s", res.ExitCode, firstLine(msg))
	}
	return []byte(stdout), aggregates.GPUPresent, ""
}

// parseGPUs reads --query-gpu lines: name, driver, total MiB, used MiB,
// utilization %. "[N/A]" and "[Not Supported]" leave the field nil.
func parseGPUs(out []byte) ([]aggregates.GPUSample, error) {
	var gpus []aggregates.GPUSample
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 5 {
			return nil, fmt.Errorf("nvidia-smi line %q has %d fields, want 5", line, len(f))
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		g := aggregates.GPUSample{Index: len(gpus), Name: f[0], Driver: f[1]}
		var err error
		if g.MemoryTotalBytes, err = mib(f[2]); err != nil {
			return nil, err
		}
		if g.MemoryUsedBytes, err = mib(f[3]); err != nil {
			return nil, err
		}
		if !unavailable(f[4]) {
			u, err := strconv.ParseFloat(f[4], 64)
			if err != nil {
				return nil, fmt.Errorf("nvidia-smi utilization %q: %w", f[4], err)
			}
			g.UtilizationPercent = &u
		}
		gpus = append(gpus, g)
	}
	return gpus, sc.Err()
}

// parseApps reads --query-compute-apps lines into "pid name" strings.
func parseApps(out []byte) ([]string, error) {
	var procs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "No running") {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 2 {
			return nil, fmt.Errorf("nvidia-smi compute-apps line %q", line)
		}
		procs = append(procs, strings.TrimSpace(f[0])+" "+strings.TrimSpace(f[1]))
	}
	return procs, sc.Err()
}

func unavailable(v string) bool { return v == "" || strings.HasPrefix(v, "[") || v == "N/A" }

// mib parses a MiB count into bytes; unavailable is nil.
func mib(v string) (*uint64, error) {
	if unavailable(v) {
		return nil, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi memory %q: %w", v, err)
	}
	b := n << 20
	return &b, nil
}

// memAvailable reads MemAvailable (kB) from a meminfo file, in bytes.
func memAvailable(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("meminfo: MemAvailable line %q", line)
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("meminfo: MemAvailable %q: %w", f[0], err)
		}
		return n << 10, nil
	}
	return 0, fmt.Errorf("meminfo %s has no MemAvailable line", path)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// screened fills r's admission readings with the worse of two snapshots:
// the least RAM available, the GPU with the most memory used, the union of
// GPU processes. A reading missing from either snapshot is missing: the
// screens treat absent as failing.
func screened(r *aggregates.MeasurementResult, before, after *aggregates.ResourceSnapshot) {
	r.Before, r.After = before, after
	r.GPU, r.RAMAvailableBytes, r.ResidentModels, r.ResidentModelsObserved = nil, nil, nil, false
	if before == nil || after == nil {
		return
	}
	if before.RAMAvailableBytes != nil && after.RAMAvailableBytes != nil {
		v := min(*before.RAMAvailableBytes, *after.RAMAvailableBytes)
		r.RAMAvailableBytes = &v
	}
	if before.GPUStatus == aggregates.GPUPresent && after.GPUStatus == aggregates.GPUPresent {
		var worst *aggregates.GPUReading
		complete := true
		for _, g := range append(append([]aggregates.GPUSample(nil), before.GPUs...), after.GPUs...) {
			if g.MemoryTotalBytes == nil || g.MemoryUsedBytes == nil {
				complete = false
				break
			}
			if worst == nil || *g.MemoryUsedBytes > worst.MemoryUsedBytes {
				worst = &aggregates.GPUReading{Name: g.Name, Driver: g.Driver, MemoryTotalBytes: *g.MemoryTotalBytes, MemoryUsedBytes: *g.MemoryUsedBytes}
			}
		}
		if complete {
			r.GPU = worst
		}
	}
	if before.GPUProcessesObserved && after.GPUProcessesObserved {
		r.ResidentModelsObserved = true
		seen := map[string]bool{}
		for _, p := range append(append([]string(nil), before.GPUProcesses...), after.GPUProcesses...) {
			if !seen[p] {
				seen[p] = true
				r.ResidentModels = append(r.ResidentModels, p)
			}
		}
	}
}
