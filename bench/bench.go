// Package bench is greffe's load generator: concurrent writers appending
// fixed-size events to a target for a duration, reporting throughput and
// latency percentiles, next to the disk's own fsync rate measured the same
// way (write a small record, fdatasync, repeat) as the baseline.
package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/pebbleslog"
)

// Target receives the appends: a store in process, or a node over HTTP.
type Target interface {
	Append(ctx context.Context, stream string, evs []events.Proposed) error
}

// Appender is a store in process (events/pebblelog.Store).
type Appender interface {
	Append(ctx context.Context, r events.AppendRequest) (events.Outcome, error)
}

// InProcess is the Target of a store in process: each call is one append
// to one stream.
func InProcess(a Appender) Target { return inProcess{a} }

type inProcess struct{ a Appender }

func (t inProcess) Append(ctx context.Context, stream string, evs []events.Proposed) error {
	_, err := t.a.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: stream, Events: evs}}})
	return err
}

// Config of a run. Zero values mean defaults.
type Config struct {
	Writers         int           // concurrent writers; default 1
	EventsPerAppend int           // default 1
	PayloadBytes    int           // size of each event's data object; default 256
	Duration        time.Duration // default 10 s
	// Progress, when set, is called about once a second with the events
	// acknowledged so far.
	Progress func(done uint64, elapsed time.Duration)
	// Rounds splits the load into that many equal rounds (default 1), and
	// Between, when set, runs before each round and after the last one,
	// with no load: greffe bench measures the disk's fsync rate there, so
	// that a baseline that drifts over the run is sampled all along it
	// rather than only before it.
	Rounds  int
	Between func() error
	// WarmUp is how many events to append before the measured load, with
	// 16 writers of 100 events each on streams of their own; they are not
	// counted. A fresh store writes its first write-ahead log files by
	// extending them, and on ext4 every fdatasync of a file that grew also
	// commits the file's new size to the journal; Pebble recycles its log
	// files after a few memtable flushes, and from then on a sync rewrites
	// blocks in place. A store that has been running is in that second
	// state: warming up measures it instead of the first minutes of a new
	// store (docs/PERFORMANCE.md has both).
	WarmUp int
}

// Result of a run.
type Result struct {
	Writers         int           `json:"writers"`
	EventsPerAppend int           `json:"events_per_append"`
	PayloadBytes    int           `json:"payload_bytes"`
	Events          uint64        `json:"events"`
	Appends         uint64        `json:"appends"`
	Elapsed         time.Duration `json:"elapsed_ns"`
	EventsPerSec    float64       `json:"events_per_sec"`
	P50             time.Duration `json:"p50_ns"`
	P99             time.Duration `json:"p99_ns"`
	P999            time.Duration `json:"p999_ns"`
	Errors          uint64        `json:"errors"`
	FirstError      string        `json:"first_error,omitempty"`
	// PeakRSS is the process's peak resident set (VmHWM) in bytes, 0 where
	// /proc is unavailable. With an embedded store it bounds the store's
	// memory.
	PeakRSS uint64 `json:"peak_rss_bytes"`
	// WarmedUp is how many events were appended before the load (Config.WarmUp).
	WarmedUp int `json:"warmed_up_events"`
}

func (r Result) String() string {
	return fmt.Sprintf("%d writers × %d events/append, %d-byte payloads: %d events in %s = %.0f events/s; append latency p50 %s p99 %s p99.9 %s; errors %d; peak RSS %d MiB",
		r.Writers, r.EventsPerAppend, r.PayloadBytes, r.Events, r.Elapsed.Round(time.Millisecond), r.EventsPerSec,
		r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.P999.Round(time.Microsecond), r.Errors, r.PeakRSS>>20)
}

// Payload returns a JSON object of exactly n bytes (n >= 8).
func Payload(n int) json.RawMessage {
	n = max(n, 8)
	return json.RawMessage(`{"p":"` + strings.Repeat("x", n-8) + `"}`)
}

// setDefaults gives the fields left zero or negative their defaults.
// Config has no Validate: every value it keeps is valid, and Run reports
// what went wrong in its Result.
func (c *Config) setDefaults() {
	if c.Writers <= 0 {
		c.Writers = 1
	}
	if c.EventsPerAppend <= 0 {
		c.EventsPerAppend = 1
	}
	if c.PayloadBytes <= 0 {
		c.PayloadBytes = 256
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	c.Rounds = max(c.Rounds, 1)
}

// Run drives the target for cfg.Duration or until ctx ends.
func Run(ctx context.Context, t Target, cfg Config) Result {
	cfg.setDefaults()
	var res Result
	if cfg.WarmUp > 0 {
		if err := warmUp(ctx, t, cfg.WarmUp, Payload(cfg.PayloadBytes)); err != nil {
			res.FirstError = "warm-up: " + err.Error()
			res.Errors = 1
			return res
		}
		res.WarmedUp = cfg.WarmUp
	}
	var r runState
	r.lat = make([]histogram, cfg.Writers)
	r.streams = make([]string, cfg.Writers)
	for w := range r.streams {
		r.streams[w] = fmt.Sprintf("bench-%s-%d", uuid.NewString()[:8], w)
	}
	var between error
	for range cfg.Rounds {
		if cfg.Between != nil && between == nil {
			between = cfg.Between()
		}
		r.round(ctx, t, cfg, cfg.Duration/time.Duration(cfg.Rounds))
	}
	if cfg.Between != nil && between == nil {
		between = cfg.Between()
	}
	var all histogram
	for i := range r.lat {
		all.merge(&r.lat[i])
	}
	done := r.done.Load()
	res = Result{Writers: cfg.Writers, EventsPerAppend: cfg.EventsPerAppend, PayloadBytes: cfg.PayloadBytes,
		Events: done, Appends: all.n, Elapsed: r.elapsed, EventsPerSec: float64(done) / r.elapsed.Seconds(),
		P50: all.quantile(0.50), P99: all.quantile(0.99), P999: all.quantile(0.999), Errors: r.errs.Load(),
		WarmedUp: res.WarmedUp}
	if e, ok := r.firstErr.Load().(string); ok {
		res.FirstError = e
	}
	if between != nil && res.FirstError == "" {
		res.FirstError = "between rounds: " + between.Error()
	}
	res.PeakRSS = peakRSS()
	return res
}

// warmUp appends n events (rounded up to whole appends of 100) with 16
// writers and stops at the first error.
func warmUp(ctx context.Context, t Target, n int, payload json.RawMessage) error {
	const writers, per = 16, 100
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	tag := uuid.NewString()[:8]
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("warmup-%s-%d", tag, w)
			for next.Add(per)-per < int64(n) && first.Load() == nil {
				evs := make([]events.Proposed, per)
				for i := range evs {
					evs[i] = events.Proposed{ID: uuid.New(), Type: "WarmUp", Data: payload, Metadata: json.RawMessage(`{}`)}
				}
				if err := t.Append(ctx, stream, evs); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		return err
	}
	return ctx.Err()
}

// runState is what the rounds of one Run share: counters, per-writer
// latency histograms and streams, and the loaded time.
type runState struct {
	done, errs atomic.Uint64
	firstErr   atomic.Value
	lat        []histogram
	streams    []string
	elapsed    time.Duration
}

// roundOver reports whether an append that failed at now failed because
// the round ended: ctx is done, or its deadline has passed although ctx
// does not say so yet. The second case is real: a peer given the deadline
// (gRPC sends it to etcd, whose server then answers "request timed out")
// can answer before this process's timer has run, on a loaded machine;
// counted as a failure, it failed a whole run of bench/peers in CI.
func roundOver(ctx context.Context, now time.Time) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && !now.Before(deadline)
}

// round loads t with cfg.Writers writers for d (or until ctx ends).
func (r *runState) round(ctx context.Context, t Target, cfg Config, d time.Duration) {
	payload := Payload(cfg.PayloadBytes)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done, errs, firstErr, lat := &r.done, &r.errs, &r.firstErr, r.lat
	start := time.Now()
	defer func() { r.elapsed += time.Since(start) }()
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := r.streams[w]
			for ctx.Err() == nil {
				evs := make([]events.Proposed, cfg.EventsPerAppend)
				for i := range evs {
					evs[i] = events.Proposed{ID: uuid.New(), Type: "BenchEvent", Data: payload, Metadata: json.RawMessage(`{}`)}
				}
				t0 := time.Now()
				err := t.Append(ctx, stream, evs)
				if err != nil {
					if roundOver(ctx, time.Now()) {
						return
					}
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lat[w].record(time.Since(t0))
				done.Add(uint64(cfg.EventsPerAppend))
			}
		}()
	}
	if cfg.Progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := time.NewTicker(time.Second)
			defer tk.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tk.C:
					cfg.Progress(done.Load(), r.elapsed+time.Since(start))
				}
			}
		}()
	}
	wg.Wait()
}

// peakRSS reads VmHWM from /proc/self/status (Linux), in bytes.
func peakRSS() uint64 { return procStatus("VmHWM") }

// Memory returns what a benchmark of held resources reports: the Go heap
// in use after a collection, and the process's resident set (VmRSS), in
// MiB (0 where /proc is not there).
func Memory() (heapMiB, rssMiB float64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20), float64(procStatus("VmRSS")) / (1 << 20)
}

// procStatus reads a size field ("VmHWM", "VmRSS") of /proc/self/status
// (Linux), in bytes; 0 when it cannot.
func procStatus(field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kb uint64
			if _, err := fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// FsyncRate measures the disk under dir: how many (write 300 bytes, fdatasync)
// rounds it completes per second over d. This is the ceiling of a single
// writer appending one event at a time with fsync before acknowledgement.
func FsyncRate(dir string, d time.Duration) (float64, error) {
	f, err := os.CreateTemp(dir, "greffe-fsync-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 300)
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := fdatasync(f); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// InPlaceFsyncRate is FsyncRate for a file that does not grow: it first
// writes and syncs 16 MiB of zeros, then rewrites it from the start, 300
// bytes and an fdatasync at a time, for d. On ext4 (and most journaling
// file systems) a sync that does not change the file's size commits no
// metadata, so this is the disk's best rate for small synced writes: what
// a recycled write-ahead log file gets.
func InPlaceFsyncRate(dir string, d time.Duration) (float64, error) {
	f, err := os.CreateTemp(dir, "greffe-fsync-inplace-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const size = 16 << 20
	if _, err := f.Write(make([]byte, size)); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	buf := make([]byte, 300)
	n, off := 0, int64(0)
	start := time.Now()
	for time.Since(start) < d {
		if off+int64(len(buf)) > size {
			off = 0
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			return 0, err
		}
		if err := fdatasync(f); err != nil {
			return 0, err
		}
		off += int64(len(buf))
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// TempDir returns a fresh folder for an embedded run under parent.
func TempDir(parent string) (string, error) {
	if parent != "" {
		if err := os.MkdirAll(parent, 0o700); err != nil {
			return "", err
		}
	}
	d, err := os.MkdirTemp(parent, "greffe-bench-*")
	if err != nil {
		return "", err
	}
	return filepath.Clean(d), nil
}

// PebbleSyncRate measures the storage engine alone under dir: a bare Pebble
// database committing one 500-byte batch at a time with Sync, for d. The
// gap between FsyncRate and this is Pebble's write-ahead log (its own
// flush goroutine and record framing); the gap between this and a single
// writer's events/s is greffe's.
func PebbleSyncRate(dir string, d time.Duration) (float64, error) {
	db, err := pebble.Open(filepath.Join(dir, "pebble-baseline"), &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: pebbleslog.Logger{}})
	if err != nil {
		return 0, err
	}
	defer func() {
		_ = db.Close()
		_ = os.RemoveAll(filepath.Join(dir, "pebble-baseline"))
	}()
	val := make([]byte, 500)
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		key := binary.BigEndian.AppendUint64([]byte("k"), uint64(n))
		if err := db.Set(key, val, pebble.Sync); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
