package commands_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
)

// BenchmarkHandle runs GrantApproval commands in process (no HTTP) from 16
// goroutines on distinct approvals, against a real store that fsyncs every
// batch: the commands layer's own throughput. BenchmarkCommands (package
// api) measures the same through HTTP.
//
//	go test ./commands -run '^$' -bench Handle -benchtime 20000x
func BenchmarkHandle(b *testing.B) {
	s := openStore(b)
	h, _ := newHandler(b, s, nil)
	data, _ := json.Marshal(aggregates.GrantApproval{Approver: "owner", Action: aggregates.ActionStartup, Subject: "provider-p", Uses: 1,
		ExpiresAt: t0.Add(time.Hour)})
	tmpl := string(data)
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			d := strings.Replace(tmpl, `"approval_id":""`, `"approval_id":"bench-`+strconv.FormatInt(i, 10)+`"`, 1)
			if _, err := h.Handle(context.Background(), commands.Request{Command: "GrantApproval", ID: uuid.NewString(), Principal: aggregates.Anonymous, Data: json.RawMessage(d)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
	st := s.Stats()
	b.ReportMetric(float64(st.Events)/float64(max(st.Batches, 1)), "events/batch")
}
