package kurrentgrpc

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/greffe/greffe/bench"
	"github.com/greffe/greffe/events"
)

// BenchmarkStalledStreams holds stalled subscribers against the gRPC
// surface over a real store: subscriptions to $all from the start, over a
// log of 16 MB, whose client never calls Recv (a fixed 64 KiB stream
// window, so each one stalls once it holds that), 100 to a connection,
// spread over 16 principals. It reports the process's memory once they
// have stalled (Go heap in use after a collection, RSS), how many Reads
// the surface took and refused, and the latency of appends to the store
// (one 256-byte event each, fsynced) made meanwhile; stalled=0 is the same
// surface without them. The write timeout is 10 minutes, so that none is
// dropped during the run: the memory is what the caps bound (issue #20:
// 80 such streams on one connection added 2.4 GB).
//
//	go test ./api/kurrentgrpc -run '^$' -bench StalledStreams -benchtime 1000x
func BenchmarkStalledStreams(b *testing.B) {
	for _, stalled := range []int{0, 80, 300} {
		b.Run(fmt.Sprintf("stalled=%d", stalled), func(b *testing.B) { benchStalledStreams(b, stalled) })
	}
}

func benchStalledStreams(b *testing.B, stalled int) {
	_, st, addr := startWith(b, Config{WriteTimeout: 10 * time.Minute, Authenticate: func(user, password string) (Principal, bool) {
		return Principal{Name: user}, password == user+"-token"
	}})
	pad := strings.Repeat("q", 8000)
	for i := 0; i < 2000; i += 300 {
		var ps []events.Proposed
		for j := i; j < min(i+300, 2000); j++ {
			ps = append(ps, events.Proposed{ID: uuid.New(), Type: "Large", Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, j, pad)), Metadata: json.RawMessage(`{}`)})
		}
		if _, err := st.Append(context.Background(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: "seed", Events: ps}}}); err != nil {
			b.Fatal(err)
		}
	}
	heap0, _ := bench.Memory()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var conns []streams.StreamsClient
	held, refused := 0, 0
	for i := range stalled {
		if i%100 == 0 {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<20))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { conn.Close() })
			conns = append(conns, streams.NewStreamsClient(conn))
		}
		if _, _, err := subscribeAll(as(ctx, fmt.Sprintf("r%d", i%16)), conns[len(conns)-1], true); err != nil {
			refused++
			continue
		}
		held++
	}
	// Settle: the subscribers' windows fill within moments; wait until
	// the heap stops growing.
	last, _ := bench.Memory()
	for range 120 {
		time.Sleep(500 * time.Millisecond) // a benchmark's settling, not a test's synchronisation
		now, _ := bench.Memory()
		if now-last < 1 {
			break
		}
		last = now
	}
	heap1, rss1 := bench.Memory()
	payload := json.RawMessage(`{"pad":"` + strings.Repeat("x", 240) + `"}`)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		_, err := st.Append(context.Background(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: "bench",
			Events: []events.Proposed{{ID: uuid.New(), Type: "BenchEvent", Data: payload, Metadata: json.RawMessage(`{}`)}}}}})
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	heap2, rss2 := bench.Memory()
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(float64(held), "held")
	b.ReportMetric(float64(refused), "refused")
	b.ReportMetric(max(heap1, heap2), "heap-MiB")
	b.ReportMetric(max(heap1, heap2)-heap0, "heap-growth-MiB")
	b.ReportMetric(max(rss1, rss2), "rss-MiB")
	b.ReportMetric(0, "ns/op")
}
