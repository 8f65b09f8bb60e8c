package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// connCountingServer is a real HTTP server that counts the connections
// clients open to it.
type connCountingServer struct {
	*httptest.Server
	conns atomic.Int64
}

func newConnCountingServer(t *testing.T, h http.HandlerFunc) *connCountingServer {
	s := &connCountingServer{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

const appendAnswer = `{"events":[{"id":"6f1c3a2e-5d4b-4c3a-9e8f-7a6b5c4d3e2f","stream":"s","version":0,"position":0,"leaf_hash":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","recorded_at":"2026-12-02T00:00:00Z"}],"duplicate":false}`

func appendOnce(ctx context.Context, c *Client) error {
	_, err := c.Append(ctx, "s", events.ExpectAny, []wire.EventIn{{Type: "T"}})
	return err
}

// TestDirect_Connections: POSTs to an http:// node go over connections the
// client keeps itself (client/direct.go). Each case counts the connections
// the node saw for what the client did.
func TestDirect_Connections(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		do      func(t *testing.T, s *connCountingServer, c *Client)
		want    int64
	}{
		{"twenty appends, one after the other, share one connection", answer(200, appendAnswer), func(t *testing.T, _ *connCountingServer, c *Client) {
			for range 20 {
				if err := appendOnce(t.Context(), c); err != nil {
					t.Fatal(err)
				}
			}
		}, 1},
		{"a refusal's answer is read to its end and the connection kept", answer(409, `{"error":{"code":"wrong_expected_version","message":"no"}}`), func(t *testing.T, _ *connCountingServer, c *Client) {
			for range 3 {
				if err := appendOnce(t.Context(), c); CodeOf(err) != "wrong_expected_version" {
					t.Fatalf("got %v, want wrong_expected_version", err)
				}
			}
		}, 1},
		{"an answer decoded short of its end is drained and the connection kept", answer(200, `{"ok":true}`+"\n\n\n"), func(t *testing.T, _ *connCountingServer, c *Client) {
			for range 3 {
				var out struct{ OK bool }
				if err := c.Do(t.Context(), http.MethodPost, "/v1/commands", map[string]int{}, &out); err != nil || !out.OK {
					t.Fatalf("Do: %+v, %v", out, err)
				}
			}
		}, 1},
		{"an answer whose unread end is too long to drain closes the connection", answer(200, `{"ok":true}`+strings.Repeat(" ", 2*directDrain)), func(t *testing.T, _ *connCountingServer, c *Client) {
			for range 2 {
				var out struct{ OK bool }
				if err := c.Do(t.Context(), http.MethodPost, "/v1/commands", map[string]int{}, &out); err != nil || !out.OK {
					t.Fatalf("Do: %+v, %v", out, err)
				}
			}
		}, 2},
		{"a connection the node closed while idle is not used", answer(200, appendAnswer), func(t *testing.T, s *connCountingServer, c *Client) {
			for range 3 {
				if err := appendOnce(t.Context(), c); err != nil {
					t.Fatal(err)
				}
				s.CloseClientConnections()
			}
		}, 3},
		{"an answer with Connection: close is the connection's last", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			answer(200, appendAnswer)(w, r)
		}, func(t *testing.T, _ *connCountingServer, c *Client) {
			for range 2 {
				if err := appendOnce(t.Context(), c); err != nil {
					t.Fatal(err)
				}
			}
		}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newConnCountingServer(t, tc.handler)
			c := New(s.URL, "")
			tc.do(t, s, c)
			if got := s.conns.Load(); got != tc.want {
				t.Errorf("the node saw %d connections, want %d", got, tc.want)
			}
		})
	}
}

// TestDirect_ContextEndsTheRequest: a context that ends while the node has
// not answered ends the append at once with the context's error, and the
// connection, whose answer may still come, is not used again.
func TestDirect_ContextEndsTheRequest(t *testing.T) {
	var stall atomic.Bool
	stall.Store(true)
	release := make(chan struct{})
	s := newConnCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if stall.Load() {
			<-release // the answer comes after the client gave up
		}
		answer(200, appendAnswer)(w, r)
	})
	c := New(s.URL, "")
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := appendOnce(ctx, c)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("the append returned %v after its context ended", el)
	}
	stall.Store(false)
	close(release)
	if err := appendOnce(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if got := s.conns.Load(); got != 2 {
		t.Errorf("the node saw %d connections, want 2 (the abandoned one, then a new one)", got)
	}
}

// TestDirect_OnlyPlainHTTPPosts: GETs, https:// nodes and a client whose
// HTTP was replaced go through net/http.
func TestDirect_OnlyPlainHTTPPosts(t *testing.T) {
	c := New("http://127.0.0.1:1", "")
	post := func(u string) *http.Request {
		r, err := http.NewRequest(http.MethodPost, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	got := map[string]bool{
		"http":  c.direct.usable(post("http://127.0.0.1:7070/v1/append")),
		"https": c.direct.usable(post("https://127.0.0.1:7070/v1/append")),
	}
	if diff := cmp.Diff(map[string]bool{"http": true, "https": false}, got); diff != "" {
		t.Errorf("usable (-want +got):\n%s", diff)
	}

	var viaTransport atomic.Int64
	s := newConnCountingServer(t, answer(200, appendAnswer))
	c = New(s.URL, "")
	c.HTTP = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		viaTransport.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	if err := appendOnce(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if viaTransport.Load() != 1 {
		t.Errorf("a client with its own HTTP sent %d appends through it, want 1", viaTransport.Load())
	}
}

// TestDirect_LargeBodiesGoThroughTheTransport: a body above directMaxBody
// is sent by net/http's Transport (which reads a refusal the node sends
// before reading the body while it still writes); smaller ones are sent
// directly. The Transport marks its requests: it asks for gzip.
func TestDirect_LargeBodiesGoThroughTheTransport(t *testing.T) {
	var gzip atomic.Value
	s := newConnCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		gzip.Store(r.Header.Get("Accept-Encoding") == "gzip")
		answer(413, `{"error":{"code":"body_too_large","message":"too large"}}`)(w, r) // the body left unread
	})
	c := New(s.URL, "")
	for _, tc := range []struct {
		size         int
		viaTransport bool
	}{{1 << 10, false}, {directMaxBody, false}, {directMaxBody + 1, true}, {4 << 20, true}} {
		// tc.size bytes in all: {"x":"…"}
		err := c.Do(t.Context(), http.MethodPost, "/v1/append", jsonBody(`{"x":"`+strings.Repeat("x", tc.size-8)+`"}`), nil)
		if CodeOf(err) != "body_too_large" {
			t.Fatalf("a body of %d bytes: %v, want the node's body_too_large", tc.size, err)
		}
		if got := gzip.Load(); got != tc.viaTransport {
			t.Errorf("a body of %d bytes: through the Transport %v, want %v", tc.size, got, tc.viaTransport)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
