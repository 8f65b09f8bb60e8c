package executor

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/greffe/greffe/aggregates"
)

// fakeGPU returns the folder of a fake nvidia-smi under fixtures/fake-gpu.
func fakeGPU(t *testing.T, variant string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "fixtures", "fake-gpu", variant))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nvidia-smi")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// testSnapshotter looks nvidia-smi up on a PATH whose first folder is dir
// and reads a meminfo file holding availKB.
func testSnapshotter(t *testing.T, dir string, timeout time.Duration) *snapshotter {
	t.Helper()
	mem := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(mem, []byte("MemTotal:       131072000 kB\nMemFree:         1000000 kB\nMemAvailable:   8388608 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &snapshotter{nvidiaSMI: "nvidia-smi", timeout: timeout, meminfo: mem,
		env: []string{"PATH=" + dir + ":/usr/bin:/bin"}, version: "test"}
}

func u64p(v uint64) *uint64   { return &v }
func f64p(v float64) *float64 { return &v }

func TestSnapshot(t *testing.T) {
	host, _ := os.Hostname()
	base := aggregates.ResourceSnapshot{Hostname: host, CPUCount: runtime.NumCPU(), ExecutorVersion: "test", RAMAvailableBytes: u64p(8 << 30)}
	gb10 := aggregates.GPUSample{Name: "NVIDIA GB10", Driver: "580.95.05", MemoryTotalBytes: u64p(122880 << 20), MemoryUsedBytes: u64p(4096 << 20), UtilizationPercent: f64p(3)}
	with := func(f func(s *aggregates.ResourceSnapshot)) aggregates.ResourceSnapshot {
		s := base
		f(&s)
		return s
	}
	cases := []struct {
		name string
		dir  string
		want aggregates.ResourceSnapshot
	}{
		{"a GPU", fakeGPU(t, "present"), with(func(s *aggregates.ResourceSnapshot) {
			s.GPUStatus, s.GPUs, s.GPUProcessesObserved = aggregates.GPUPresent, []aggregates.GPUSample{gb10}, true
		})},
		{"a busy GPU", fakeGPU(t, "busy"), with(func(s *aggregates.ResourceSnapshot) {
			g := gb10
			g.MemoryUsedBytes, g.UtilizationPercent = u64p(12288<<20), f64p(41)
			s.GPUStatus, s.GPUs, s.GPUProcesses, s.GPUProcessesObserved = aggregates.GPUPresent, []aggregates.GPUSample{g}, []string{"4242 /opt/llama/llama-server"}, true
		})},
		{"memory reported unavailable is absent, not zero", fakeGPU(t, "unified"), with(func(s *aggregates.ResourceSnapshot) {
			g := gb10
			g.MemoryTotalBytes, g.MemoryUsedBytes, g.UtilizationPercent = nil, nil, f64p(0)
			s.GPUStatus, s.GPUs, s.GPUProcessesObserved = aggregates.GPUPresent, []aggregates.GPUSample{g}, true
		})},
		{"no device", fakeGPU(t, "absent"), with(func(s *aggregates.ResourceSnapshot) {
			s.GPUStatus, s.GPUError = aggregates.GPUAbsent, "No devices were found"
		})},
		{"no nvidia-smi at all", t.TempDir(), with(func(s *aggregates.ResourceSnapshot) {
			s.GPUStatus, s.GPUError = aggregates.GPUAbsent, "nvidia-smi is not on PATH"
		})},
		{"a hanging nvidia-smi is bounded", fakeGPU(t, "hang"), with(func(s *aggregates.ResourceSnapshot) {
			s.GPUStatus, s.GPUError = aggregates.GPUTimeout, "nvidia-smi did not answer within 300ms; its process group was killed"
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got := testSnapshotter(t, tc.dir, 300*time.Millisecond).take(t.Context())
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the snapshot took %s", d)
			}
			if got.At.IsZero() {
				t.Error("no time")
			}
			if diff := cmp.Diff(tc.want, *got, cmpopts.IgnoreFields(aggregates.ResourceSnapshot{}, "At")); diff != "" {
				t.Errorf("snapshot (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSnapshot_MeminfoUnreadable(t *testing.T) {
	s := testSnapshotter(t, t.TempDir(), time.Second)
	s.meminfo = filepath.Join(t.TempDir(), "missing")
	got := s.take(t.Context())
	if got.RAMAvailableBytes != nil || got.RAMError == "" {
		t.Fatalf("unreadable meminfo: ram %v, error %q", got.RAMAvailableBytes, got.RAMError)
	}
}

// TestScreened: the admission readings are the worse of the two
// snapshots, and anything missing from either is missing.
func TestScreened(t *testing.T) {
	gpu := func(used uint64) aggregates.GPUSample {
		return aggregates.GPUSample{Name: "G", Driver: "d", MemoryTotalBytes: u64p(100), MemoryUsedBytes: u64p(used)}
	}
	snap := func(ram *uint64, gpus []aggregates.GPUSample, procs ...string) *aggregates.ResourceSnapshot {
		s := &aggregates.ResourceSnapshot{RAMAvailableBytes: ram, GPUStatus: aggregates.GPUAbsent}
		if gpus != nil {
			s.GPUStatus, s.GPUs, s.GPUProcesses, s.GPUProcessesObserved = aggregates.GPUPresent, gpus, procs, true
		}
		return s
	}
	type readings struct {
		GPU      *aggregates.GPUReading
		RAM      *uint64
		Models   []string
		Observed bool
	}
	cases := []struct {
		name          string
		before, after *aggregates.ResourceSnapshot
		want          readings
	}{
		{"the worse of both", snap(u64p(10), []aggregates.GPUSample{gpu(5)}, "1 a"), snap(u64p(7), []aggregates.GPUSample{gpu(9)}, "1 a", "2 b"),
			readings{&aggregates.GPUReading{Name: "G", Driver: "d", MemoryTotalBytes: 100, MemoryUsedBytes: 9}, u64p(7), []string{"1 a", "2 b"}, true}},
		{"no GPU in one snapshot", snap(u64p(10), []aggregates.GPUSample{gpu(5)}), snap(u64p(10), nil),
			readings{RAM: u64p(10)}},
		{"GPU memory unknown", snap(nil, []aggregates.GPUSample{{Name: "G"}}), snap(u64p(1), []aggregates.GPUSample{gpu(1)}),
			readings{Observed: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r aggregates.MeasurementResult
			screened(&r, tc.before, tc.after)
			if diff := cmp.Diff(tc.want, readings{r.GPU, r.RAMAvailableBytes, r.ResidentModels, r.ResidentModelsObserved}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
