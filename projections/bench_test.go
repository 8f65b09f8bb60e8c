package projections_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/projections"
)

// benchLog returns a store holding n events: the fixture histories (every
// event type of the domain, in the seeds' proportions: missions and their
// checks dominate), copied over and over with their streams and
// correlation ids renamed, so every copy is a new set of providers,
// missions, bindings, approvals, measurements and trails.
//
// GREFFE_BENCH_DIR keeps the built log in that folder and reuses it when it
// already holds n events, so that a measurement does not share the machine
// with the compactions of a log just written.
func benchLog(b *testing.B, n int) *pebblelog.Store {
	b.Helper()
	dir := os.Getenv("GREFFE_BENCH_DIR")
	if dir != "" {
		dir = filepath.Join(dir, strconv.Itoa(n))
		if st, err := pebblelog.Open(pebblelog.Config{Dir: dir, CheckpointInterval: -1}); err == nil {
			if st.Head().Size == uint64(n) {
				b.Cleanup(func() { _ = st.Close() })
				return st
			}
			_ = st.Close()
		}
		_ = os.RemoveAll(dir)
	} else {
		dir = b.TempDir()
	}
	src := openStore(b)
	fill(b, src)
	base, err := src.ReadAll(context.Background(), events.ReadOptions{Limit: events.MaxReadLimit})
	if err != nil {
		b.Fatal(err)
	}
	dst, err := pebblelog.Open(pebblelog.Config{Dir: dir, CheckpointInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dst.Close() })
	// One writer: the copies must keep the log's order within each stream.
	// The channel lets the next batch be built while one is fsynced.
	const perAppend = events.MaxEventsPerAppend
	batches := make(chan []events.StreamAppend, 2)
	var wg sync.WaitGroup
	var failed error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for sas := range batches {
			if _, err := dst.Append(context.Background(), events.AppendRequest{Streams: sas}); err != nil && failed == nil {
				failed = err
			}
		}
	}()
	var sas []events.StreamAppend
	idx := map[string]int{}
	count, pending := 0, 0
	for copyN := 0; count < n; copyN++ {
		suffix := "-" + strconv.Itoa(copyN)
		for i := range base {
			if count == n {
				break
			}
			e := &base[i]
			p := events.Proposed{ID: uuid.New(), Type: e.Type, Data: e.Data, Metadata: e.Metadata, CausationID: e.CausationID,
				Actor: e.Actor, Envelope: e.Envelope}
			if e.CorrelationID != "" {
				p.CorrelationID = e.CorrelationID + suffix
			}
			stream := e.Stream + suffix
			j, ok := idx[stream]
			if !ok {
				j = len(sas)
				idx[stream] = j
				sas = append(sas, events.StreamAppend{Stream: stream})
			}
			sas[j].Events = append(sas[j].Events, p)
			count++
			if pending++; pending == perAppend {
				batches <- sas
				sas, idx, pending = nil, map[string]int{}, 0
			}
		}
	}
	if pending > 0 {
		batches <- sas
	}
	close(batches)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	return dst
}

// BenchmarkRebuild folds every read model from position 0 in memory, the
// way verify and as-of renders do. Target (issue #4): 1,000,000 events in
// at most 5 s.
//
//	go test ./projections -run '^$' -bench Rebuild -benchtime 3x
//
// GREFFE_BENCH_EVENTS sets the log's size (default 1,000,000).
func BenchmarkRebuild(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("GREFFE_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	log := benchLog(b, n)
	var targets []projections.Target
	for _, name := range projections.Names() {
		targets = append(targets, projections.Target{Name: name, Upto: log.Head().Size})
	}
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for b.Loop() {
		if _, err := projections.Rebuild(context.Background(), log, projections.Env{Policy: policy()}, targets); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/rebuild")
	// CPU seconds too: on a shared machine the wall clock also counts other
	// processes' turns.
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/rebuild")
	b.Log(fmt.Sprintf("%d events, %d models", n, len(targets)))
}

// BenchmarkFold folds 100,000 events held in memory into each model alone:
// the models' own cost, without reading the log.
//
//	go test ./projections -run '^$' -bench Fold
func BenchmarkFold(b *testing.B) {
	log := benchLog(b, 100_000)
	var evs []events.Event
	for from := uint64(0); from < log.Head().Size; {
		page, err := log.ReadAll(context.Background(), events.ReadOptions{From: from, Limit: events.MaxReadLimit})
		if err != nil {
			b.Fatal(err)
		}
		evs = append(evs, page...)
		from += uint64(len(page))
	}
	for _, spec := range projections.Specs() {
		b.Run(spec.Name, func(b *testing.B) {
			for b.Loop() {
				m := spec.New(projections.Env{Policy: policy()})
				for i := range evs {
					if err := m.Apply(&evs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
		})
	}
}
