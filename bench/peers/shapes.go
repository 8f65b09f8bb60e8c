package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/greffe/greffe/bench"
)

// shape is one of the loads (#14). Every event carries a
// payloadBytes payload and every write waits for a durable
// acknowledgement.
type shape struct {
	// Name is A, B, C, D or E.
	Name string
	// What says the load in a few words, for the table.
	What string
	// Writers and PerAppend shape a write load: that many concurrent
	// writers, each appending PerAppend events per request.
	Writers, PerAppend int
	// Read marks shape D: fill the server with readEvents events, then
	// time reading them back in order.
	Read bool
	// Cluster marks shape E: shape C against the leader of three greffe
	// nodes, compared with one node's C.
	Cluster bool
	// Target is the least greffe ÷ etcd ratio of medians the issue asks
	// for (for E: E ÷ one node's C).
	Target float64
}

// payloadBytes is the size of every event's data: a JSON object
// (bench.Payload).
const payloadBytes = 256

// shapes returns the shapes in order.
func shapes() []shape {
	return []shape{
		{Name: "A", What: "1 writer × 1 event", Writers: 1, PerAppend: 1, Target: 1.0},
		{Name: "B", What: "16 writers × 1 event", Writers: 16, PerAppend: 1, Target: 1.5},
		{Name: "C", What: "16 writers × 100 events", Writers: 16, PerAppend: 100, Target: 1.5},
		{Name: "D", What: "read in order", Read: true, Target: 2.0},
		{Name: "E", What: "3 greffe nodes, C at the leader", Writers: 16, PerAppend: 100, Cluster: true, Target: 0.6},
	}
}

// settings are what a run of the shapes is given.
type settings struct {
	// Rounds is how many times every (shape, system) pair runs; the
	// systems' order rotates from round to round.
	Rounds int
	// Duration is each write run's length.
	Duration time.Duration
	// ReadEvents is how many events shape D writes, then reads.
	ReadEvents int
	// Dir is the parent of every server's temporary folder ("" is the
	// system's temporary folder).
	Dir string
	// Log, when set, gets one line per run as it ends.
	Log io.Writer
}

// measurement is one run of one shape against one system.
type measurement struct {
	Round        int     `json:"round"`
	Shape        string  `json:"shape"`
	System       string  `json:"system"`
	Events       uint64  `json:"events"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	// P50Ms and P99Ms are the write latency percentiles in milliseconds
	// (0 for shape D).
	P50Ms float64 `json:"p50_ms,omitempty"`
	P99Ms float64 `json:"p99_ms,omitempty"`
	// SettleSeconds is, for shape D, how long the server's background
	// work (greffe's projections) took to catch up after the fill, before
	// the timed read.
	SettleSeconds float64 `json:"settle_seconds,omitempty"`
	// Load is the machine's load averages (/proc/loadavg) as the run
	// ended: with the harness's own client and server on the cores, about
	// 2 on a machine that is otherwise quiet.
	Load string `json:"load_average"`
	// Error, when set, says why the run failed; its rate is not used.
	Error string `json:"error,omitempty"`
}

// runTimeout bounds one run beyond its own length: a start, a fill, a
// read or a stop that hangs ends the run as failed.
const runTimeout = 3 * time.Minute

// runShapes runs every shape against every system that takes part in it,
// rounds times, alternating the systems, and returns one measurement per
// run. A failed run is recorded with its error and the others go on; only
// ctx ending stops early.
func runShapes(ctx context.Context, st settings, shs []shape, singles []system, cluster system) []measurement {
	var out []measurement
	for r := range st.Rounds {
		for _, sh := range shs {
			systems := singles
			if sh.Cluster {
				systems = nil
				if cluster != nil {
					systems = []system{cluster}
				}
			}
			for i := range systems {
				if ctx.Err() != nil {
					return out
				}
				sys := systems[(i+r)%len(systems)]
				m := runOne(ctx, st, sh, sys)
				m.Round, m.Load = r+1, loadAverage()
				if st.Log != nil {
					fmt.Fprintln(st.Log, m)
				}
				out = append(out, m)
			}
		}
	}
	return out
}

func (m measurement) String() string {
	if m.Error != "" {
		return fmt.Sprintf("round %d shape %s %s: FAILED: %s", m.Round, m.Shape, m.System, m.Error)
	}
	s := fmt.Sprintf("round %d shape %s %s: %d events in %.2fs = %.0f events/s", m.Round, m.Shape, m.System, m.Events, m.Seconds, m.EventsPerSec)
	if m.SettleSeconds > 0 {
		s += fmt.Sprintf(" (after %.2fs for background work to settle)", m.SettleSeconds)
	}
	if m.P50Ms > 0 {
		s += fmt.Sprintf(" (p50 %.2f ms, p99 %.2f ms)", m.P50Ms, m.P99Ms)
	}
	return s + "; load " + m.Load
}

// runOne starts a fresh server of sys in a temporary folder, runs sh
// against it, stops it and removes the folder.
func runOne(ctx context.Context, st settings, sh shape, sys system) (m measurement) {
	m = measurement{Shape: sh.Name, System: sys.Name()}
	ctx, cancel := context.WithTimeout(ctx, st.Duration+runTimeout)
	defer cancel()
	dir, err := os.MkdirTemp(st.Dir, "peers-"+sys.Name()+"-"+sh.Name+"-")
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer os.RemoveAll(dir)
	inst, err := sys.Start(ctx, dir)
	if err != nil {
		m.Error = "start: " + err.Error()
		return m
	}
	defer func() {
		if err := inst.Close(); err != nil && m.Error == "" {
			m.Error = "stop: " + err.Error()
		}
	}()
	if sh.Read {
		return measureRead(ctx, st, inst, m)
	}
	res := bench.Run(ctx, inst, bench.Config{Writers: sh.Writers, EventsPerAppend: sh.PerAppend,
		PayloadBytes: payloadBytes, Duration: st.Duration})
	m.Events, m.Seconds, m.EventsPerSec = res.Events, res.Elapsed.Seconds(), res.EventsPerSec
	m.P50Ms, m.P99Ms = ms(res.P50), ms(res.P99)
	switch {
	case res.Errors > 0:
		m.Error = fmt.Sprintf("%d appends failed, the first: %s", res.Errors, res.FirstError)
	case res.Events == 0:
		m.Error = "no append was acknowledged"
	case ctx.Err() != nil:
		m.Error = ctx.Err().Error()
	}
	return m
}

// measureRead fills inst with st.ReadEvents events (not timed), lets it
// settle (not timed), then times one read of all of them in order.
func measureRead(ctx context.Context, st settings, inst instance, m measurement) measurement {
	if err := fill(ctx, inst, st.ReadEvents, payloadBytes); err != nil {
		m.Error = err.Error()
		return m
	}
	if s, ok := inst.(settler); ok {
		start := time.Now()
		if err := s.Settle(ctx); err != nil {
			m.Error = "settle: " + err.Error()
			return m
		}
		m.SettleSeconds = time.Since(start).Seconds()
	}
	start := time.Now()
	got, err := inst.ReadInOrder(ctx, st.ReadEvents)
	el := time.Since(start)
	m.Events, m.Seconds = uint64(got), el.Seconds()
	m.EventsPerSec = float64(got) / el.Seconds()
	switch {
	case err != nil:
		m.Error = fmt.Sprintf("read: %v (after %d events)", err, got)
	case got != st.ReadEvents:
		m.Error = fmt.Sprintf("read %d events of the %d written", got, st.ReadEvents)
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// errNoSystems is returned when the flags leave nothing to run.
var errNoSystems = errors.New("no system to run: --systems names none of greffe, etcd, nats")
