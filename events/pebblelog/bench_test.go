package pebblelog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
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

// BenchmarkRestore installs a snapshot of 200,000 events (200 batches of
// 1,000 events of ~250 bytes; a 68 MiB stream) into an empty store: the
// stream's checks, the staged build, the check that it extends the store
// (restorecheck.go: every event hashed, the tree rebuilt), and the swap.
func BenchmarkRestore(b *testing.B) {
	const batches, per = 200, 1000
	src := benchStore(b, pebblelog.WALGreffe)
	for idx := uint64(1); idx <= batches; idx++ {
		ps := make([]events.Proposed, per)
		for j := range ps {
			ps[j] = events.Proposed{ID: uuid.New(), Type: "Bench", Data: payload256, Metadata: json.RawMessage(`{}`)}
		}
		batch := &events.Batch{Appends: []events.AppendRequest{{Streams: []events.StreamAppend{
			{Stream: fmt.Sprintf("bench-%d", idx%16), Expected: events.ExpectAny, Events: ps}}}}}
		if _, err := src.ApplyReplicated(batch, idx); err != nil {
			b.Fatal(err)
		}
	}
	sn, err := src.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	var stream bytes.Buffer
	if _, err := sn.WriteTo(&stream); err != nil {
		b.Fatal(err)
	}
	sn.Release()
	b.SetBytes(int64(stream.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dst, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(b.TempDir(), "ledger"), LedgerID: src.LedgerID(), CheckpointInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := dst.Restore(bytes.NewReader(stream.Bytes())); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = dst.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(batches*per)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
