package kurrentgrpc

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/greffe/greffe/internal/quota"
)

// What a client of this surface can make the node hold, and its bounds
// (issue #20: 80 streams on one connection added 2.4 GB to the node):
//
//   - streams per connection: Config.MaxConcurrentStreams, HTTP/2's own
//     limit, which the client honours by waiting;
//   - Read calls (reads and subscriptions), each a page of the log and a
//     send window: Config.MaxReadsPerPrincipal and MaxReads, refused with
//     RESOURCE_EXHAUSTED and CodeTooManyStreams;
//   - a page read from the log: readPage events and readPageBytes bytes;
//   - a send to a client that takes nothing (its stream's window full)
//     waits at most Config.WriteTimeout, then the call is ended and its
//     page released (boundedSender); a connection that takes no bytes for
//     as long is closed (internal/progress).
//
// Appends are not counted here: only a principal that may append gets
// past its first message, and what one buffers is bounded by the append's
// limits (4 MiB) and the connection's streams.

// Quotas returns the counts of the surface's caps, for the metrics
// (greffe_quota_*): its Read calls.
func (s *Server) Quotas() []quota.Stats { return []quota.Stats{s.reads.Stats()} }

// readMethod is the full name of Streams.Read.
const readMethod = "/event_store.client.streams.Streams/Read"

// cancelKey carries, in a Read call's context, the function that ends the
// call's stream (cancellableStream).
type cancelKey struct{}

// cancellableStream is the server's tap handle: it gives every Read call
// a stream context that the call itself can cancel. A send blocked on a
// full window waits on that context only (grpc's transport selects on its
// Done), and nothing else ends it while the client stays connected; a
// context derived inside the handler would not reach it.
func cancellableStream(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName != readMethod {
		return ctx, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	return context.WithValue(ctx, cancelKey{}, cancel), nil
}

// acquireRead takes one of the Read calls for the call's principal, or
// returns the refusal.
func (s *Server) acquireRead(ctx context.Context) (release func(), err error) {
	who := s.principal(ctx).Name
	release, refused := s.reads.Acquire(who)
	if release != nil {
		return release, nil
	}
	if refused == quota.ScopeTotal {
		return nil, refusef(CodeTooManyStreams, "the node serves %d reads and subscriptions at once, the most it may (kurrentgrpc.Config.MaxReads); retry later", s.reads.Limit(refused))
	}
	return nil, refusef(CodeTooManyStreams, "%s holds %d reads and subscriptions at once, the most one principal may (kurrentgrpc.Config.MaxReadsPerPrincipal); close one, or retry later", who, s.reads.Limit(refused))
}

// boundedSender is a Read call's stream whose every Send must complete
// within timeout: a client that takes nothing (it does not read, and its
// stream's flow-control window is full) has the call's stream cancelled,
// which ends the blocked Send with an error. Used by the call's goroutine
// only.
type boundedSender struct {
	streams.Streams_ReadServer
	timeout time.Duration
	timer   *time.Timer
	stalled atomic.Bool // the timer ended the call
}

// boundSends returns out with its sends bounded by the write timeout, and
// the function that stops the bound when the call ends; out itself when
// there is no bound (a negative WriteTimeout, or a stream without its
// cancel).
func (s *Server) boundSends(out streams.Streams_ReadServer) (streams.Streams_ReadServer, *boundedSender) {
	cancel, ok := out.Context().Value(cancelKey{}).(context.CancelFunc)
	if !ok || s.cfg.WriteTimeout <= 0 {
		return out, nil
	}
	b := &boundedSender{Streams_ReadServer: out, timeout: s.cfg.WriteTimeout}
	b.timer = time.AfterFunc(time.Hour, func() {
		b.stalled.Store(true)
		cancel()
	})
	b.timer.Stop()
	return b, b
}

// Send sends m, or fails once it has waited the timeout.
func (b *boundedSender) Send(m *streams.ReadResp) error {
	b.timer.Reset(b.timeout)
	err := b.Streams_ReadServer.Send(m)
	b.timer.Stop()
	return err
}

// stop ends the bound; it reports whether the bound ended the call.
func (b *boundedSender) stop() bool {
	if b == nil {
		return false
	}
	b.timer.Stop()
	return b.stalled.Load()
}

// errStalled is the status of a call ended for not reading (its client
// sees the stream's end when it reads again).
var errStalled = status.Error(codes.DeadlineExceeded, "the client took no message for the write timeout: the read was ended; read again from the last position received")
