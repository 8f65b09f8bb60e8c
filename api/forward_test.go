package api_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/replicator"
	"github.com/greffe/greffe/wire"
)

// staticRouter is a fixed view of the cluster: who leads, and what the read
// barrier answers. The servers, stores and HTTP around it are real.
type staticRouter struct {
	leader   string
	self     bool
	err      error
	barrier  error
	barriers atomic.Int32
	forgot   atomic.Int32
}

func (r *staticRouter) Leader(context.Context) (string, bool, error) { return r.leader, r.self, r.err }
func (r *staticRouter) ForgetLeader(string)                          { r.forgot.Add(1) }
func (r *staticRouter) ReadBarrier(context.Context) error {
	r.barriers.Add(1)
	return r.barrier
}

// startRouted starts a server over its own empty store, routing through rt,
// with the cluster routes of a single node.
func startRouted(t *testing.T, rt api.Router) string {
	t.Helper()
	s, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), LedgerID: "api-test", CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", NodeID: "follower"}, s)
	if err != nil {
		t.Fatal(err)
	}
	srv.MountCluster(nil)
	if rt != nil {
		srv.UseRouter(rt)
	}
	return serve(t, srv, s.Close)
}

// dropAfterRequest is a leader that reads a request and closes the
// connection without answering: the request may have been acted upon.
func dropAfterRequest(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err == nil {
				_, _ = io.Copy(io.Discard, req.Body)
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}

func get(t *testing.T, url string, header map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRouter_Forwarding covers request routing on a node that does not lead:
// writes and leader reads reach the leader and come back as one answer,
// local reads stay, and every routing failure has its code.
func TestRouter_Forwarding(t *testing.T) {
	leader := startNode(t, nil)
	follower := startRouted(t, &staticRouter{leader: leader.url})
	deadPort := startRouted(t, &staticRouter{leader: "http://127.0.0.1:9"})
	dropping := startRouted(t, &staticRouter{leader: dropAfterRequest(t)})
	noLeader := startRouted(t, &staticRouter{err: &replicator.NotLeaderError{}})
	barrierFails := startRouted(t, &staticRouter{self: true, barrier: &replicator.NotLeaderError{LeaderID: "n2"}})
	single := startRouted(t, nil)
	body := `{"expected_version":"any","events":[{"type":"Routed","data":{"a":1}}]}`

	// A write on the follower lands in the leader's store.
	if status, code, _ := post(t, follower+"/v1/streams/routed", body, nil); status != http.StatusOK {
		t.Fatalf("forwarded append: %d %s", status, code)
	}
	if got := leader.store.Head().Size; got != 1 {
		t.Fatalf("leader holds %d events, want 1", got)
	}

	cases := []struct {
		name       string
		do         func() (int, string)
		wantStatus int
		wantBody   string // a code, or a substring of a success body
	}{
		{"leader read is forwarded", func() (int, string) {
			return get(t, follower+"/v1/streams/routed?consistency=leader", nil)
		}, http.StatusOK, `"type":"Routed"`},
		{"linearizable read is forwarded", func() (int, string) {
			return get(t, follower+"/v1/streams/routed?consistency=linearizable", nil)
		}, http.StatusOK, `"type":"Routed"`},
		{"local read stays", func() (int, string) {
			return get(t, follower+"/v1/streams/routed?consistency=local", nil)
		}, http.StatusNotFound, "not_found"},
		{"unknown consistency", func() (int, string) {
			return get(t, follower+"/v1/all?consistency=eventual", nil)
		}, http.StatusBadRequest, wire.CodeInvalidQuery},
		{"never forwarded twice", func() (int, string) {
			status, code, _ := post(t, follower+"/v1/append", `{"appends":[]}`, map[string]string{api.HeaderForwardedBy: "n3"})
			return status, code
		}, http.StatusServiceUnavailable, wire.CodeLeaderChanged},
		{"leader read never forwarded twice", func() (int, string) {
			return get(t, follower+"/v1/all?consistency=leader", map[string]string{api.HeaderForwardedBy: "n3"})
		}, http.StatusServiceUnavailable, wire.CodeLeaderChanged},
		{"leader not listening: nothing sent", func() (int, string) {
			status, code, _ := post(t, deadPort+"/v1/streams/routed", body, nil)
			return status, code
		}, http.StatusServiceUnavailable, wire.CodeLeaderUnreachable},
		{"leader dropped the write: outcome unknown", func() (int, string) {
			status, code, _ := post(t, dropping+"/v1/streams/routed", body, nil)
			return status, code
		}, http.StatusServiceUnavailable, "outcome_unknown"},
		{"leader dropped the read", func() (int, string) {
			return get(t, dropping+"/v1/all?consistency=leader", nil)
		}, http.StatusServiceUnavailable, wire.CodeLeaderUnreachable},
		{"no leader elected", func() (int, string) {
			status, code, _ := post(t, noLeader+"/v1/streams/routed", body, nil)
			return status, code
		}, http.StatusServiceUnavailable, wire.CodeNotLeader},
		{"read barrier refused", func() (int, string) {
			return get(t, barrierFails+"/v1/all?consistency=linearizable", nil)
		}, http.StatusServiceUnavailable, wire.CodeNotLeader},
		{"read barrier not needed for local", func() (int, string) {
			return get(t, barrierFails+"/v1/all", nil)
		}, http.StatusOK, `"events":[]`},
		{"cluster routes on a single node", func() (int, string) {
			return get(t, single+"/v1/cluster/status", nil)
		}, http.StatusConflict, wire.CodeNotClustered},
		{"cluster changes on a single node", func() (int, string) {
			status, code, _ := post(t, single+"/v1/cluster/remove", `{"node_id":"n2"}`, nil)
			return status, code
		}, http.StatusConflict, wire.CodeNotClustered},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, got := tc.do()
			if status != tc.wantStatus || !strings.Contains(got, tc.wantBody) {
				t.Fatalf("got %d %s, want %d with %q", status, got, tc.wantStatus, tc.wantBody)
			}
		})
	}
	if got := leader.store.Head().Size; got != 1 {
		t.Fatalf("leader holds %d events after the refusals, want 1", got)
	}
}
