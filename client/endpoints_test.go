package client

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

func readOptionsForward(from uint64) events.ReadOptions { return events.ReadOptions{From: from} }

// node is a loopback HTTP server that counts its requests.
type testNode struct {
	*httptest.Server
	hits atomic.Int64
}

func newTestNode(t *testing.T, h http.HandlerFunc) *testNode {
	n := &testNode{}
	n.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(n.Close)
	return n
}

func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

const notClustered = `{"error":{"code":"not_clustered","message":"alone"}}`

func TestParseEndpoints(t *testing.T) {
	got := ParseEndpoints(" 127.0.0.1:7070, https://a:1/ ,,http://b:2")
	want := []string{"http://127.0.0.1:7070", "https://a:1", "http://b:2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestClient_EndpointsInTurn(t *testing.T) {
	info := `{"ledger_id":"l","origin":"o","verifier_keys":[],"head":{"size":0,"root":""}}`
	live := newTestNode(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster/status" {
			answer(400, notClustered)(w, r)
			return
		}
		answer(200, info)(w, r)
	})
	dead := deadURL(t)

	t.Run("a dead endpoint is passed over and the live one kept", func(t *testing.T) {
		c := New(dead+","+live.URL, "")
		for range 2 {
			if _, err := c.Info(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if c.eps.current.Load() != 1 {
			t.Errorf("current endpoint %d, want 1 (the live one)", c.eps.current.Load())
		}
	})

	t.Run("no endpoint answers", func(t *testing.T) {
		d2 := deadURL(t)
		_, err := New(dead+","+d2, "").Info(t.Context())
		var ue *UnreachableError
		if !errors.As(err, &ue) || !cmp.Equal(ue.Endpoints, []string{dead, d2}) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("err = %v, want an *UnreachableError over both, refused", err)
		}
	})

	t.Run("a write answered leader_unreachable goes to the next", func(t *testing.T) {
		busy := newTestNode(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/cluster/status" {
				answer(200, `{"node_id":"n1","state":"Follower"}`)(w, r)
				return
			}
			answer(503, `{"error":{"code":"leader_unreachable","message":"nothing written"}}`)(w, r)
		})
		ok := newTestNode(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/cluster/status" {
				answer(200, `{"node_id":"n2","state":"Follower"}`)(w, r)
				return
			}
			answer(200, `{"events":[],"duplicate":false}`)(w, r)
		})
		c := New(busy.URL+","+ok.URL, "")
		if _, err := c.AppendMulti(t.Context(), wire.AppendIn{}); err != nil {
			t.Fatal(err)
		}
		if busy.hits.Load() != 2 || ok.hits.Load() != 2 { // status + append each
			t.Errorf("hits: busy %d, ok %d; want 2 and 2", busy.hits.Load(), ok.hits.Load())
		}
	})

	t.Run("a write whose connection broke is not sent again", func(t *testing.T) {
		broken := newTestNode(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/cluster/status" {
				answer(400, notClustered)(w, r)
				return
			}
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close() // the body was sent; the answer never comes
			}
		})
		other := newTestNode(t, answer(200, `{"events":[],"duplicate":false}`))
		c := New(broken.URL+","+other.URL, "")
		_, err := c.AppendMulti(t.Context(), wire.AppendIn{})
		if err == nil || other.hits.Load() != 0 {
			t.Errorf("err %v, other endpoint hit %d times: a write that may have landed was sent again", err, other.hits.Load())
		}
	})

	t.Run("the leader is found before the first write", func(t *testing.T) {
		follower := newTestNode(t, answer(200, `{"node_id":"n1","state":"Follower","leader_id":"n2"}`))
		leader := newTestNode(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/cluster/status" {
				answer(200, `{"node_id":"n2","state":"Leader","leader_id":"n2"}`)(w, r)
				return
			}
			answer(200, `{"events":[],"duplicate":false}`)(w, r)
		})
		c := New(follower.URL+","+leader.URL, "")
		if _, err := c.AppendMulti(t.Context(), wire.AppendIn{}); err != nil {
			t.Fatal(err)
		}
		if follower.hits.Load() != 1 || leader.hits.Load() != 2 {
			t.Errorf("hits: follower %d (want 1: its status), leader %d (want 2: status and the write)", follower.hits.Load(), leader.hits.Load())
		}
	})

	t.Run("the endpoint in use stops answering: the new leader is found", func(t *testing.T) {
		var cLeads atomic.Bool
		role := func(id string, leads func() bool) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/cluster/status" {
					state := "Follower"
					if leads() {
						state = "Leader"
					}
					answer(200, `{"node_id":"`+id+`","state":"`+state+`"}`)(w, r)
					return
				}
				answer(200, `{"events":[],"duplicate":false}`)(w, r)
			}
		}
		a := newTestNode(t, role("a", func() bool { return true }))
		b := newTestNode(t, role("b", func() bool { return false }))
		cn := newTestNode(t, role("c", cLeads.Load))
		c := New(a.URL+","+b.URL+","+cn.URL, "")
		if _, err := c.AppendMulti(t.Context(), wire.AppendIn{}); err != nil {
			t.Fatal(err)
		}
		a.Close() // the leader dies; c leads now
		// The transport drops a closed keep-alive connection once it reads
		// its end; here at once, so that the next write dials a.
		c.HTTP.CloseIdleConnections()
		cLeads.Store(true)
		b.hits.Store(0)
		cn.hits.Store(0)
		for range 2 {
			if _, err := c.AppendMulti(t.Context(), wire.AppendIn{}); err != nil {
				t.Fatal(err)
			}
		}
		// b: its status once; c: its status, then both writes.
		if b.hits.Load() != 1 || cn.hits.Load() != 3 {
			t.Errorf("hits: b %d (want 1: its status), c %d (want 3: status and two writes)", b.hits.Load(), cn.hits.Load())
		}
	})

	t.Run("consistency is sent with every GET", func(t *testing.T) {
		var got atomic.Value
		n := newTestNode(t, func(w http.ResponseWriter, r *http.Request) {
			got.Store(r.URL.RawQuery)
			answer(200, `{"events":[]}`)(w, r)
		})
		c := New(n.URL, "")
		c.Consistency = "leader"
		if _, err := c.ReadStream(t.Context(), "s", readOptionsForward(3)); err != nil {
			t.Fatal(err)
		}
		if q := got.Load().(string); q != "from=3&consistency=leader" {
			t.Errorf("query %q", q)
		}
	})
}
