package pebblelog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// payload256 is a 256-byte JSON object, the benchmark payload of issue #2.
var payload256 = json.RawMessage(`{"p":"` + strings.Repeat("x", 256-8) + `"}`)

func benchStore(b *testing.B, wal string) *pebblelog.Store {
	s, err := pebblelog.Open(pebblelog.Config{Dir: b.TempDir(), CheckpointInterval: -1, WAL: wal})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func benchAppend(b *testing.B, wal string, writers, perAppend int) {
	s := benchStore(b, wal)
	ctx := context.Background()
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("bench-%d", w)
			for next.Add(int64(perAppend)) <= int64(b.N) {
				ps := make([]events.Proposed, perAppend)
				for i := range ps {
					ps[i] = events.Proposed{ID: uuid.New(), Type: "Bench", Data: payload256, Metadata: json.RawMessage(`{}`)}
				}
				if _, err := s.Append(ctx, one(stream, events.ExpectAny, ps...)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	st := s.Stats()
	b.ReportMetric(float64(st.Events)/float64(max(st.Batches, 1)), "events/batch")
	b.ReportMetric(float64(st.SyncWait.Microseconds())/float64(max(st.Batches, 1)), "µs-syncwait/batch")
}

// BenchmarkAppend measures acknowledged (fsynced) appends of 256-byte events,
// on the store's own write-ahead log and on Pebble's (wal=pebble).
//
//	go test ./events/pebblelog -run x -bench Append -benchtime 5s
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct{ writers, per int }{{1, 1}, {64, 1}, {64, 10}, {64, 100}, {16, 100}} {
		for _, wal := range []string{pebblelog.WALGreffe, pebblelog.WALPebble} {
			name := fmt.Sprintf("writers=%d/per=%d/wal=%s", c.writers, c.per, wal)
			b.Run(name, func(b *testing.B) { benchAppend(b, wal, c.writers, c.per) })
		}
	}
}

// BenchmarkReadAll measures in-process reads of the global log in pages of
// 10,000 events.
func BenchmarkReadAll(b *testing.B) {
	s := benchStore(b, "")
	ctx := context.Background()
	const n = 200_000
	for i := 0; i < n; i += 1000 {
		ps := make([]events.Proposed, 1000)
		for j := range ps {
			ps[j] = events.Proposed{ID: uuid.New(), Type: "Bench", Data: payload256, Metadata: json.RawMessage(`{}`)}
		}
		if _, err := s.Append(ctx, one(fmt.Sprintf("r-%d", i%97), events.ExpectAny, ps...)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	read := 0
	for read < b.N {
		from := uint64(read % n)
		evs, err := s.ReadAll(ctx, events.ReadOptions{From: from, Limit: events.MaxReadLimit})
		if err != nil {
			b.Fatal(err)
		}
		read += len(evs)
	}
	b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "events/s")
}
