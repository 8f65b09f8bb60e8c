package kurrentgrpc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// Issue #20, finding 10: 80 streams on one gRPC connection added 2.4 GB
// to the node: no cap on streams, reads of 512 events of up to 64 KiB
// each held per stream, and a send to a client that does not read waited
// forever. These tests attack a real surface over a real connection with
// grpc's own client, as a reader would.

// startWith runs a store and the surface with cfg on 127.0.0.1:0.
func startWith(t testing.TB, cfg Config) (*Server, *pebblelog.Store, string) {
	t.Helper()
	st, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	srv, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		st.Close()
	})
	return srv, st, addr.String()
}

// rawConn connects grpc's own client, with opts.
func rawConn(t *testing.T, addr string, opts ...grpc.DialOption) streams.StreamsClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return streams.NewStreamsClient(conn)
}

// as adds user's basic credentials to ctx, as the KurrentDB clients send
// them (the password is the user's token in these tests).
func as(ctx context.Context, user string) context.Context {
	if user == "" {
		return ctx
	}
	cred := base64.StdEncoding.EncodeToString([]byte(user + ":" + user + "-token"))
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+cred)
}

// subscribeAll asks for a subscription to $all from where and returns the
// stream once its confirmation arrived (the call is then held on the
// server), or the error that refused it, with the trailer's code.
func subscribeAll(ctx context.Context, sc streams.StreamsClient, start bool) (streams.Streams_ReadClient, string, error) {
	all := &streams.ReadReq_Options_AllOptions{AllOption: &streams.ReadReq_Options_AllOptions_End{End: nil}}
	if start {
		all.AllOption = &streams.ReadReq_Options_AllOptions_Start{}
	}
	var tr metadata.MD
	rc, err := sc.Read(ctx, &streams.ReadReq{Options: &streams.ReadReq_Options{
		StreamOption: &streams.ReadReq_Options_All{All: all},
		CountOption:  &streams.ReadReq_Options_Subscription{Subscription: &streams.ReadReq_Options_SubscriptionOptions{}},
		UuidOption:   &streams.ReadReq_Options_UUIDOption{Content: &streams.ReadReq_Options_UUIDOption_String_{}},
	}}, grpc.Trailer(&tr))
	if err != nil {
		return nil, "", err
	}
	m, err := rc.Recv()
	if err != nil {
		code := ""
		if v := tr.Get(CodeTrailer); len(v) == 1 {
			code = v[0]
		}
		return nil, code, err
	}
	if m.GetConfirmation() == nil {
		return nil, "", fmt.Errorf("first message %v, want a confirmation", m)
	}
	return rc, "", nil
}

// quotaHeld returns how many reads the surface holds, and dropped.
func quotaHeld(t *testing.T, srv *Server) (int, uint64) {
	t.Helper()
	for _, q := range srv.Quotas() {
		if q.Name == "grpc_reads" {
			return q.Held, q.Dropped
		}
	}
	t.Fatalf("no grpc_reads quota in %+v", srv.Quotas())
	return 0, 0
}

// waitHeld waits until the surface holds held reads (and, dropped >= 0,
// dropped that many). A release happens on the server after the client
// has gone, with nothing the client sees, so this one wait polls the
// server's own counts, with a deadline.
func waitHeld(t *testing.T, srv *Server, held int, dropped int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		h, d := quotaHeld(t, srv)
		if h == held && (dropped < 0 || d == uint64(dropped)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reads held, %d dropped after 15 s; want %d, %d", h, d, held, dropped)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServer_ReadCapsPerPrincipalAndInTotal: a principal's Read past its
// cap, and anyone's past the surface's, is refused with RESOURCE_EXHAUSTED
// and too_many_streams; a Read that ends gives its place back. Before the
// fix every one was served.
func TestServer_ReadCapsPerPrincipalAndInTotal(t *testing.T) {
	srv, _, addr := startWith(t, Config{MaxReadsPerPrincipal: 2, MaxReads: 3, Authenticate: func(user, password string) (Principal, bool) {
		return Principal{Name: user}, password == user+"-token"
	}})
	sc := rawConn(t, addr)
	ctx := ctxT(t)
	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	type answer struct {
		GRPC codes.Code
		Code string
	}
	steps := []struct {
		who  string
		ctx  context.Context
		want answer
	}{
		{"r1", first, answer{codes.OK, ""}},
		{"r1", ctx, answer{codes.OK, ""}},
		{"r1", ctx, answer{codes.ResourceExhausted, CodeTooManyStreams}},
		{"r2", ctx, answer{codes.OK, ""}},
		{"r2", ctx, answer{codes.ResourceExhausted, CodeTooManyStreams}},
	}
	for i, st := range steps {
		_, code, err := subscribeAll(as(st.ctx, st.who), sc, false)
		if diff := cmp.Diff(st.want, answer{status.Code(err), code}); diff != "" {
			t.Fatalf("step %d, %s reads (-want +got):\n%s (%v)", i, st.who, diff, err)
		}
		if err != nil && !strings.Contains(err.Error(), "at once") {
			t.Errorf("step %d: the refusal does not say what to do: %v", i, err)
		}
	}
	cancelFirst()
	waitHeld(t, srv, 2, -1)
	if _, _, err := subscribeAll(as(ctx, "r2"), sc, false); err != nil {
		t.Fatalf("after a read ended: %v", err)
	}
}

// TestServer_MaxConcurrentStreamsPerConnection: one connection has at most
// MaxConcurrentStreams calls open; the next waits for one of them to end
// instead of reaching the server. Before the fix the server let a
// connection open any number (grpc's default is no limit).
func TestServer_MaxConcurrentStreamsPerConnection(t *testing.T) {
	srv, _, addr := startWith(t, Config{MaxConcurrentStreams: 2})
	sc := rawConn(t, addr)
	ctx := ctxT(t)
	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	if _, _, err := subscribeAll(first, sc, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := subscribeAll(ctx, sc, false); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, _, err := subscribeAll(short, sc, false); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a third call on the connection: %v, want it kept waiting for a stream (DeadlineExceeded)", err)
	}
	if held, _ := quotaHeld(t, srv); held != 2 {
		t.Fatalf("%d reads on the server, want the first 2", held)
	}
	cancelFirst()
	if _, _, err := subscribeAll(ctx, sc, false); err != nil {
		t.Fatalf("once a stream ended: %v", err)
	}
}

// seedLarge appends n events of about size bytes to stream "big".
func seedLarge(t *testing.T, st *pebblelog.Store, n, size int) {
	t.Helper()
	pad := strings.Repeat("q", size)
	for i := 0; i < n; {
		var ps []events.Proposed
		for ; i < n && len(ps)*size < 3<<20; i++ {
			ps = append(ps, events.Proposed{ID: uuid.New(), Type: "Large", Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad)), Metadata: json.RawMessage(`{}`)})
		}
		if _, err := st.Append(t.Context(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: "big", Events: ps}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServer_StalledReadDropped: a subscriber whose client takes nothing
// (it never calls Recv, so its stream's window fills) is ended once a send
// has waited WriteTimeout, and what it held is released and counted; the
// connection stays up for its other calls. Before the fix the send waited
// forever, holding the read's page.
func TestServer_StalledReadDropped(t *testing.T) {
	srv, st, addr := startWith(t, Config{WriteTimeout: 300 * time.Millisecond})
	const count = 200
	seedLarge(t, st, count, 20_000) // 4 MB: far more than a stream's window
	// A fixed window: without it grpc's client grows it to what the
	// connection carries, and a test would need more data to stall it.
	sc := rawConn(t, addr, grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<20))
	ctx := ctxT(t)
	rc, _, err := subscribeAll(ctx, sc, true)
	if err != nil {
		t.Fatal(err)
	}
	waitHeld(t, srv, 0, 1)
	// Reading now gets what the window held, then the end of the stream.
	got := 0
	for {
		m, err := rc.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				t.Fatal("the stalled read ended cleanly: want it cut")
			}
			break
		}
		if m.GetEvent() != nil {
			got++
		}
	}
	if got >= count {
		t.Fatalf("the stalled subscriber received all %d events: it was not cut", got)
	}
	// The connection serves its other calls: a new subscription catches up.
	if _, _, err := subscribeAll(ctx, sc, false); err != nil {
		t.Fatalf("a new read on the same connection: %v", err)
	}
}

// TestServer_ReadsLargeEventsAcrossBytePages: reads and subscriptions page
// the log in bytes; every event of a log of large events still comes once,
// in order, through the official client.
func TestServer_ReadsLargeEventsAcrossBytePages(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	const count = 100
	seedLarge(t, f.store, count, 50_000) // 5 MB: several pages of 512 KiB
	all, err := f.store.ReadAll(ctx, events.ReadOptions{Limit: count})
	if err != nil || len(all) != count {
		t.Fatalf("%d events, %v", len(all), err)
	}
	rev := func(evs []events.Event) []events.Event {
		out := make([]events.Event, 0, len(evs))
		for i := len(evs) - 1; i >= 0; i-- {
			out = append(out, evs[i])
		}
		return out
	}
	for _, tc := range []struct {
		name string
		read func() (*esdb.ReadStream, error)
		want []events.Event
	}{
		{"$all forwards", func() (*esdb.ReadStream, error) { return f.client.ReadAll(ctx, esdb.ReadAllOptions{}, 1000) }, all},
		{"$all backwards", func() (*esdb.ReadStream, error) {
			return f.client.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1000)
		}, rev(all)},
		{"stream forwards", func() (*esdb.ReadStream, error) {
			return f.client.ReadStream(ctx, "big", esdb.ReadStreamOptions{}, 1000)
		}, all},
		{"stream backwards", func() (*esdb.ReadStream, error) {
			return f.client.ReadStream(ctx, "big", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1000)
		}, rev(all)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := tc.read()
			got, err := collect(t, rs, err)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(rowsOf(tc.want), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct {
		name      string
		subscribe func() (*esdb.Subscription, error)
	}{
		{"$all subscription", func() (*esdb.Subscription, error) {
			return f.client.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: esdb.Start{}})
		}},
		{"stream subscription", func() (*esdb.Subscription, error) {
			return f.client.SubscribeToStream(ctx, "big", esdb.SubscribeToStreamOptions{From: esdb.Start{}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := tc.subscribe()
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			got := eventsOnly(follow(t, sub, countEvents(count)))
			if diff := cmp.Diff(rowsOf(all), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
