package api_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/greffe/greffe/bench"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// BenchmarkHTTPAppend measures acknowledged appends over HTTP on loopback:
// 16 clients × 100 events of 256 bytes per append, client and server in one
// process on the same 2 cores (issue #2's HTTP target).
//
//	go test ./api -run '^$' -bench HTTPAppend -benchtime 300000x
func BenchmarkHTTPAppend(b *testing.B) {
	n := startNode(b, nil)
	c := client.New(n.url, "")
	payload := bench.Payload(256)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(100) <= int64(b.N) {
				in := make([]wire.EventIn, 100)
				for i := range in {
					in[i] = wire.EventIn{Type: "BenchEvent", Data: payload}
				}
				if _, err := c.Append(context.Background(), fmt.Sprintf("bench-%d", w), events.ExpectAny, in); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
