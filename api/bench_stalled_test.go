package api_test

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/bench"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// BenchmarkStalledReaders holds stalled subscribers against a real node
// (its store on disk, its HTTP server on loopback): raw connections, with
// a 4 KiB receive buffer, that send GET /v1/subscribe?from=0 over a log of
// 16 MB and never read, spread over 16 reader tokens. It reports the
// process's memory (Go heap in use after a collection, RSS) once they have
// stalled, how many subscriptions the node took and refused, and the
// latency of appends (one 256-byte event each, fsynced) made meanwhile;
// stalled=0 is the same node without them. The write timeout is set to 10
// minutes so that no stalled subscriber is dropped during the run: the
// memory is what the caps alone bound (issue #20: before them 40 such
// subscribers took a node from 0.85 to 2.9 GB).
//
//	go test ./api -run '^$' -bench StalledReaders -benchtime 1000x
func BenchmarkStalledReaders(b *testing.B) {
	for _, stalled := range []int{0, 100, 400} {
		b.Run(fmt.Sprintf("stalled=%d", stalled), func(b *testing.B) { benchStalled(b, stalled) })
	}
}

func benchStalled(b *testing.B, stalled int) {
	var names []string
	for i := range 16 {
		names = append(names, fmt.Sprintf("r%d", i))
	}
	n, srv := startServer(b, api.Config{Tokens: readerTokens(b, names...), WriteTimeout: 10 * time.Minute})
	w := client.New(n.url, "writer-token-0123456789")
	appendLarge(b, w, "seed", 2000, 8000) // 16 MB for every subscriber to be sent
	heap0, rss0 := bench.Memory()

	accepted, refused := 0, 0
	for i := range stalled {
		conn := dialStalled(b, n.url, "GET /v1/subscribe?from=0 HTTP/1.1\r\nHost: HOST\r\nAuthorization: Bearer "+names[i%len(names)]+"-token-0123456789\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReaderSize(conn, 16).ReadString('\n') // the status line only
		switch {
		case err != nil:
			b.Fatalf("subscriber %d: %v", i, err)
		case strings.HasPrefix(line, "HTTP/1.1 200"):
			accepted++
		case strings.HasPrefix(line, "HTTP/1.1 429"):
			refused++
		default:
			b.Fatalf("subscriber %d: %q", i, line)
		}
	}
	settle(b, srv)
	heap1, rss1 := bench.Memory()

	payload := bench.Payload(256)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := w.Append(context.Background(), "bench", events.ExpectAny, []wire.EventIn{{Type: "BenchEvent", Data: payload}}); err != nil {
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
	b.ReportMetric(float64(accepted), "held")
	b.ReportMetric(float64(refused), "refused")
	b.ReportMetric(max(heap1, heap2), "heap-MiB")
	b.ReportMetric(max(heap1, heap2)-heap0, "heap-growth-MiB")
	b.ReportMetric(max(rss1, rss2), "rss-MiB")
	b.ReportMetric(max(rss1, rss2)-rss0, "rss-growth-MiB")
	b.ReportMetric(0, "ns/op") // the latencies above say it
}

// settle waits until the subscriptions stop advancing: each one's client
// has stalled, its socket buffers are full, and what the node holds for
// it is what it keeps holding.
func settle(b *testing.B, srv *api.Server) {
	b.Helper()
	sum := func() (s uint64) {
		for _, p := range srv.SubscriptionPositions() {
			s += p
		}
		return s
	}
	deadline := time.Now().Add(60 * time.Second)
	last := sum()
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond) // a benchmark's settling, not a test's synchronisation
		now := sum()
		if now == last {
			return
		}
		last = now
	}
	b.Fatal("the subscriptions kept advancing for 60 s")
}
