package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/greffe/greffe/bench"
	"github.com/greffe/greffe/events"
)

// system is one of the compared servers: greffe (one node, or three as a
// raft cluster), etcd or NATS JetStream. Start is called once per round
// and shape, so that every measurement starts from an empty server.
type system interface {
	// Name is the system's column in the table: greffe, etcd, nats,
	// greffe-3.
	Name() string
	// Start starts a fresh server (separate processes) with its data
	// under dir, an empty folder the caller removes after Close, and
	// returns a client of it. ctx bounds the start only.
	Start(ctx context.Context, dir string) (instance, error)
}

// instance is a running server of a system and the client that drives it.
// Append may be called from many goroutines at once; ReadInOrder and
// Close are called alone.
type instance interface {
	// Append writes evs to stream in one request (one append for greffe,
	// one Put or a Txn of Puts for etcd, a batch of publishes for NATS)
	// and returns once the server has acknowledged all of them as durable.
	bench.Target
	// ReadInOrder reads the first n events the server stores, in the
	// server's order, checks that they come in that order, and returns
	// how many it read (fewer when the server holds fewer).
	ReadInOrder(ctx context.Context, n int) (int, error)
	// PID is the server process's id (the leader's for a cluster): the
	// fsync check attaches strace to it.
	PID() int
	// Close closes the client and stops the server's processes, waiting
	// for them to exit; the error says if one had died before.
	Close() error
}

// settler is an instance with background work after writes (greffe's
// projections folding what was appended). Shape D settles it between the
// fill and the timed read, so that the read is measured on a quiet server,
// as etcd and NATS are (they do nothing after acknowledging).
type settler interface {
	// Settle returns once the server's background work has caught up
	// with everything acknowledged so far, or ctx ends.
	Settle(ctx context.Context) error
}

// fillWriters and fillPerAppend are the shape of the load that fills a
// server before shape D reads it back: shape C's, the fastest write shape
// of every system.
const (
	fillWriters   = 16
	fillPerAppend = 100
)

// fill appends n events (rounded up to whole appends of fillPerAppend)
// to t with fillWriters writers, and stops at the first error.
func fill(ctx context.Context, t bench.Target, n, payloadBytes int) error {
	payload := bench.Payload(payloadBytes)
	var next atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	for w := range fillWriters {
		stream := fmt.Sprintf("fill-%d", w)
		g.Go(func() error {
			for next.Add(fillPerAppend)-fillPerAppend < int64(n) {
				evs := make([]events.Proposed, fillPerAppend)
				for i := range evs {
					evs[i] = events.Proposed{ID: uuid.New(), Type: "BenchFill", Data: payload, Metadata: json.RawMessage(`{}`)}
				}
				if err := t.Append(ctx, stream, evs); err != nil {
					return fmt.Errorf("fill: %w", err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}
