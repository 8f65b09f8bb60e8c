package replicator

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/bench"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

// BenchmarkAppend compares, in one run, a single store with the leader of a
// 3-node cluster on loopback (real Pebble, real raft over TCP, default
// timeouts): 64 concurrent writers, 256-byte payloads, and 1 or 100 events
// per append. It reports acknowledged events/s; the ratio is the cost of
// replication on this machine (three replicas share its cores).
//
//	go test ./replicator -run '^$' -bench Append -benchtime 200000x
func BenchmarkAppend(b *testing.B) {
	for _, perAppend := range []int{1, 100} {
		var single float64
		for _, nodes := range []int{1, 3} {
			b.Run(fmt.Sprintf("nodes=%d/events=%d", nodes, perAppend), func(b *testing.B) {
				st := benchLeader(b, nodes)
				rate := runWriters(b, st, 64, perAppend)
				b.ReportMetric(rate, "events/s")
				if nodes == 1 {
					single = rate
				} else if single > 0 {
					b.ReportMetric(100*rate/single, "%single")
				}
			})
		}
	}
}

// benchLeader returns the store to append to: a lone store, or the leader
// of a fresh n-node cluster.
func benchLeader(b *testing.B, n int) *pebblelog.Store {
	b.Helper()
	if n == 1 {
		st, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(b.TempDir(), "ledger"), LedgerID: testLedger, CheckpointInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		return st
	}
	var nodes []*testNode
	for i := range n {
		node := &testNode{id: fmt.Sprintf("n%d", i+1), dir: b.TempDir()}
		cfg := Config{NodeID: node.id, RaftAddr: "127.0.0.1:0", Bootstrap: i == 0}
		openBenchNode(b, node, cfg)
		nodes = append(nodes, node)
		if i == 0 {
			waitFor(b, func() bool { return node.rep.raft.State() == raft.Leader })
			continue
		}
		if err := nodes[0].rep.Join(context.Background(), wire.JoinRequest{NodeID: node.id, RaftAddr: node.addr, LedgerID: testLedger}); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, func() bool {
		f := nodes[0].rep.raft.GetConfiguration()
		if f.Error() != nil {
			return false
		}
		for _, s := range f.Configuration().Servers {
			if s.Suffrage != raft.Voter {
				return false
			}
		}
		return true
	})
	return nodes[0].store
}

func openBenchNode(b *testing.B, n *testNode, cfg Config) {
	st, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(n.dir, "ledger"), LedgerID: testLedger, CheckpointInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Dir = filepath.Join(n.dir, "raft")
	cfg.Info = func() NodeInfo { return NodeInfo{HTTPURL: "http://" + n.id + ".bench"} }
	rep, err := Open(cfg, st)
	if err != nil {
		b.Fatal(err)
	}
	n.store, n.rep, n.addr = st, rep, rep.Addr()
	b.Cleanup(func() {
		_ = rep.Close()
		_ = st.Close()
	})
}

// waitFor polls raft state (another goroutine's) with a deadline.
func waitFor(b *testing.B, cond func() bool) {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("cluster did not form within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runWriters appends b.N events with w concurrent writers, perAppend events
// per append, and returns acknowledged events per second.
func runWriters(b *testing.B, st *pebblelog.Store, w, perAppend int) float64 {
	payload := bench.Payload(256)
	var next atomic.Int64
	total := int64(max(b.N, perAppend))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("bench-%d", i)
			for next.Add(int64(perAppend)) <= total {
				evs := make([]events.Proposed, perAppend)
				for k := range evs {
					evs[k] = events.Proposed{ID: uuid.New(), Type: "BenchEvent", Data: payload, Metadata: json.RawMessage(`{}`)}
				}
				if _, err := st.Append(context.Background(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: stream, Events: evs}}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	return float64(total-total%int64(perAppend)) / time.Since(start).Seconds()
}
