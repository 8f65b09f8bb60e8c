// Package bench is greffe's load generator: concurrent writers appending
// fixed-size events to a target for a duration, reporting throughput and
// latency percentiles, next to the disk's own fsync rate measured the same
// way (write a small record, fdatasync, repeat) as the baseline.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// Target receives the appends: a store in process, or a node over HTTP.
type Target interface {
	Append(ctx context.Context, stream string, evs []events.Proposed) error
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
}

func (r Result) String() string {
	return fmt.Sprintf("%d writers × %d events/append, %d-byte payloads: %d events in %s = %.0f events/s; append latency p50 %s p99 %s p99.9 %s; errors %d",
		r.Writers, r.EventsPerAppend, r.PayloadBytes, r.Events, r.Elapsed.Round(time.Millisecond), r.EventsPerSec,
		r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.P999.Round(time.Microsecond), r.Errors)
}

// Payload returns a JSON object of exactly n bytes (n >= 8).
func Payload(n int) json.RawMessage {
	n = max(n, 8)
	return json.RawMessage(`{"p":"` + strings.Repeat("x", n-8) + `"}`)
}

// Run drives the target for cfg.Duration or until ctx ends.
func Run(ctx context.Context, t Target, cfg Config) Result {
	if cfg.Writers <= 0 {
		cfg.Writers = 1
	}
	if cfg.EventsPerAppend <= 0 {
		cfg.EventsPerAppend = 1
	}
	if cfg.PayloadBytes <= 0 {
		cfg.PayloadBytes = 256
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	payload := Payload(cfg.PayloadBytes)
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var done, errs atomic.Uint64
	var firstErr atomic.Value
	lat := make([][]time.Duration, cfg.Writers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("bench-%s-%d", uuid.NewString()[:8], w)
			for ctx.Err() == nil {
				evs := make([]events.Proposed, cfg.EventsPerAppend)
				for i := range evs {
					evs[i] = events.Proposed{ID: uuid.New(), Type: "BenchEvent", Data: payload, Metadata: json.RawMessage(`{}`)}
				}
				t0 := time.Now()
				err := t.Append(ctx, stream, evs)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
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
					cfg.Progress(done.Load(), time.Since(start))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(float64(len(all))*p))]
	}
	r := Result{Writers: cfg.Writers, EventsPerAppend: cfg.EventsPerAppend, PayloadBytes: cfg.PayloadBytes,
		Events: done.Load(), Appends: uint64(len(all)), Elapsed: elapsed, EventsPerSec: float64(done.Load()) / elapsed.Seconds(),
		P50: pct(0.50), P99: pct(0.99), P999: pct(0.999), Errors: errs.Load()}
	if e, ok := firstErr.Load().(string); ok {
		r.FirstError = e
	}
	return r
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
		if err := f.Sync(); err != nil {
			return 0, err
		}
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
