package client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// interimServer is a real TCP server that speaks HTTP/1.1 by hand, so that
// it can send interim (1xx) answers before each final one, as a node
// behind a proxy or a CDN may (100 Continue, 103 Early Hints). Each final
// answer is an append's answer naming the stream of the request it
// answers, so a client that reads a previous request's answer is caught.
//
// A slow server sends its interim answers at once and the final one only
// when the client sent something more on the connection or slowWork has
// passed, as a node still deciding would: a client that took the interim
// answer as final then reads it as the answer to its next request.
type interimServer struct {
	url     string
	interim []string // written before each final answer, raw
	slow    bool
	conns   atomic.Int64
}

// slowWork is how long a slow interimServer works on a request before its
// final answer when the client sends nothing more.
const slowWork = 50 * time.Millisecond

func newInterimServer(t *testing.T, slow bool, interim ...string) *interimServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &interimServer{url: "http://" + ln.Addr().String(), interim: interim, slow: slow}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			wg.Go(func() { s.serve(nc) })
			t.Cleanup(func() { _ = nc.Close() })
		}
	})
	return s
}

func (s *interimServer) serve(nc net.Conn) {
	defer nc.Close()
	br := bufio.NewReader(nc)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		stream := req.URL.Path[len("/v1/streams/"):]
		body := fmt.Sprintf(`{"events":[{"id":"6f1c3a2e-5d4b-4c3a-9e8f-7a6b5c4d3e2f","stream":%q,"version":0,"position":%d,"leaf_hash":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","recorded_at":"2026-12-02T00:00:00Z"}],"duplicate":false}`, stream, n)
		var out []byte
		for _, im := range s.interim {
			out = append(out, im...)
		}
		if s.slow && len(out) > 0 {
			if _, err := nc.Write(out); err != nil {
				return
			}
			out = out[:0]
			// Work until the client sends more (a next request) or
			// slowWork passes, whichever comes first.
			_ = nc.SetReadDeadline(time.Now().Add(slowWork))
			_, _ = br.Peek(1)
			_ = nc.SetReadDeadline(time.Time{})
		}
		out = fmt.Appendf(out, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		if _, err := nc.Write(out); err != nil {
			return
		}
	}
}

const (
	continue100   = "HTTP/1.1 100 Continue\r\n\r\n"
	earlyHints103 = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\nLink: </app.js>; rel=preload\r\n\r\n"
	processing102 = "HTTP/1.1 102 Processing\r\n\r\n"
)

// TestDirect_InterimAnswersAreSkipped: the client's own connections
// (client/direct.go) read past 1xx interim answers to the final one, as
// net/http's Transport does, so that each request gets its own answer.
//
// Regression (#20, finding 14): http.ReadResponse returns a 1xx answer as
// it comes; the direct path took it as final (the append failed with
// "http_100"), gave the connection back with the real answer unread, and
// the next append on it (to s-B) read s-A's answer.
func TestDirect_InterimAnswersAreSkipped(t *testing.T) {
	tests := []struct {
		name    string
		slow    bool
		interim []string
	}{
		{"none", false, nil},
		{"100 Continue", false, []string{continue100}},
		{"100 Continue, the answer later", true, []string{continue100}},
		{"103 Early Hints with headers", false, []string{earlyHints103}},
		{"103 Early Hints, the answer later", true, []string{earlyHints103}},
		{"100, 102 and 103 before one answer", false, []string{continue100, processing102, earlyHints103}},
		{"100, 102 and 103, the answer later", true, []string{continue100, processing102, earlyHints103}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newInterimServer(t, tc.slow, tc.interim...)
			c := New(s.url, "")
			var got []string
			for _, stream := range []string{"s-A", "s-B", "s-C"} {
				out, err := c.Append(t.Context(), stream, events.ExpectAny, []wire.EventIn{{Type: "T"}})
				if err != nil {
					got = append(got, stream+": "+err.Error())
					continue
				}
				for _, e := range out.Events {
					got = append(got, fmt.Sprintf("%s: %s@%d", stream, e.Stream, e.Position))
				}
			}
			if diff := cmp.Diff([]string{"s-A: s-A@0", "s-B: s-B@1", "s-C: s-C@2"}, got); diff != "" {
				t.Errorf("the answers each append got (-want +got):\n%s", diff)
			}
			if n := s.conns.Load(); n != 1 {
				t.Errorf("the server saw %d connections, want 1 (the connection is kept across interim answers)", n)
			}
		})
	}
}

// TestDirect_UnexpectedInterimAnswers: a 101 Switching Protocols the
// client never asked for, or interim answers without end, fail the
// request with their own error, and the connection, whose state is then
// unknown, is not used again (each append dials anew).
func TestDirect_UnexpectedInterimAnswers(t *testing.T) {
	const switching = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
	tests := []struct {
		name      string
		interim   []string
		wantErr   error
		wantConns int64
	}{
		{"101 Switching Protocols", []string{switching}, errSwitchingProtocols, 2},
		{"101 after a 100", []string{continue100, switching}, errSwitchingProtocols, 2},
		{"one interim answer more than directMaxInterim", slices.Repeat([]string{continue100}, directMaxInterim+1), errTooManyInterim, 2},
		{"directMaxInterim interim answers are read past", slices.Repeat([]string{continue100}, directMaxInterim), nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newInterimServer(t, false, tc.interim...)
			c := New(s.url, "")
			for i, stream := range []string{"s-A", "s-B"} {
				out, err := c.Append(t.Context(), stream, events.ExpectAny, []wire.EventIn{{Type: "T"}})
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("append to %s: %v, want %v", stream, err, tc.wantErr)
				}
				if err == nil && (len(out.Events) != 1 || out.Events[0].Stream != stream || out.Events[0].Position != uint64(i)) {
					t.Fatalf("append to %s got the answer %+v", stream, out.Events)
				}
			}
			if n := s.conns.Load(); n != tc.wantConns {
				t.Errorf("the server saw %d connections, want %d", n, tc.wantConns)
			}
		})
	}
}
