package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Request routing in a cluster (issue #5). Every node answers every route;
// what cannot be served here is proxied to the leader, so a client talks to
// any node and sees one answer:
//
//   - writes (appends, commands, membership changes) are ordered by the
//     leader: a follower forwards them;
//   - reads take ?consistency=local (the default: this node's applied
//     state, which may trail the leader), leader (served by the leader,
//     forwarded there), or linearizable (the leader proves it still leads
//     and has applied everything committed before the read; forwarded
//     there from a follower).
//
// A forwarded request carries HeaderForwardedBy; a node that receives one
// but does not lead (leadership moved meanwhile) answers leader_changed
// instead of forwarding again, so a request is never forwarded twice.

// Router is what request routing needs from the cluster
// (replicator.Replicator implements it). Methods are safe for concurrent
// use.
type Router interface {
	// Leader returns the leader's base URL, with self true when this node
	// leads. Without a reachable leader it returns a coded error.
	Leader(ctx context.Context) (url string, self bool, err error)
	// ForgetLeader drops a learned leader URL after a forward to it failed.
	ForgetLeader(url string)
	// ReadBarrier returns once this node (the leader) may serve a
	// linearizable read from its own state.
	ReadBarrier(ctx context.Context) error
}

// HeaderForwardedBy names the node that forwarded a request to the leader.
const HeaderForwardedBy = "X-Greffe-Forwarded-By"

// Read consistency levels (?consistency=).
const (
	ConsistencyLocal        = "local"
	ConsistencyLeader       = "leader"
	ConsistencyLinearizable = "linearizable"
)

// maxReadBarrierWait bounds how long a linearizable read waits for the
// leader to establish its term and apply the read index.
const maxReadBarrierWait = 10 * time.Second

// forwardedWrites are the write routes a follower forwards. Node-local
// operations (key rotation, metrics) are not in the list.
func forwardedWrite(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	p := r.URL.Path
	return strings.HasPrefix(p, "/v1/streams/") || p == "/v1/append" || p == "/v1/commands" ||
		p == "/v1/cluster/join" || p == "/v1/cluster/remove" || p == "/v1/cluster/transfer-leader"
}

// UseRouter makes the server route requests through rt (a cluster member).
// Call it once, before Serve.
func (s *Server) UseRouter(rt Router) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Every client of this node may be forwarding at once.
	tr.MaxIdleConnsPerHost = 256
	// Below the browser checks (guardBrowsers): a request they refuse is
	// never forwarded, where the leader would see the leader's Host.
	s.handler = &forwarder{s: s, rt: rt, next: s.handler, transport: tr}
}

type forwarder struct {
	s         *Server
	rt        Router
	next      http.Handler
	transport http.RoundTripper
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case forwardedWrite(r):
		f.routeWrite(w, r)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		f.routeRead(w, r)
	default:
		f.next.ServeHTTP(w, r)
	}
}

func (f *forwarder) routeWrite(w http.ResponseWriter, r *http.Request) {
	leader, self, err := f.rt.Leader(r.Context())
	switch {
	case err != nil:
		writeError(w, err)
	case self:
		f.next.ServeHTTP(w, r)
	case r.Header.Get(HeaderForwardedBy) != "":
		writeError(w, leaderChanged(r))
	default:
		f.proxy(w, r, leader)
	}
}

func (f *forwarder) routeRead(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	level := q.Get("consistency")
	switch level {
	case "", ConsistencyLocal:
		f.serveLocal(w, r)
		return
	case ConsistencyLeader, ConsistencyLinearizable:
	default:
		writeError(w, &wire.Error{Code: wire.CodeInvalidQuery, Field: "consistency",
			Message: fmt.Sprintf("consistency %q: use local, leader or linearizable", level)})
		return
	}
	leader, self, err := f.rt.Leader(r.Context())
	switch {
	case err != nil:
		writeError(w, err)
	case self && level == ConsistencyLinearizable:
		ctx, cancel := context.WithTimeout(r.Context(), maxReadBarrierWait)
		err := f.rt.ReadBarrier(ctx)
		cancel()
		if err != nil {
			writeError(w, err)
			return
		}
		f.serveLocal(w, r)
	case self:
		f.serveLocal(w, r)
	case r.Header.Get(HeaderForwardedBy) != "":
		writeError(w, leaderChanged(r))
	default:
		f.proxy(w, r, leader)
	}
}

// serveLocal serves r here, without the consistency parameter (handlers
// that check their query strictly never see it).
func (f *forwarder) serveLocal(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Has("consistency") {
		q.Del("consistency")
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.RawQuery = q.Encode()
		r2.URL = &u
		r = r2
	}
	f.next.ServeHTTP(w, r)
}

func leaderChanged(r *http.Request) error {
	return &wire.Error{Code: wire.CodeLeaderChanged,
		Message: fmt.Sprintf("%s forwarded this request here as to the leader, but this node no longer leads; nothing was written, retry", r.Header.Get(HeaderForwardedBy))}
}

// proxy sends r to the leader at base and copies its answer back.
func (f *forwarder) proxy(w http.ResponseWriter, r *http.Request, base string) {
	target, err := url.Parse(base)
	if err != nil || target.Host == "" {
		writeError(w, &wire.Error{Code: wire.CodeLeaderUnreachable, Message: fmt.Sprintf("the leader's URL %q is not usable", base)})
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(HeaderForwardedBy, f.s.cfg.NodeID)
			// This node checked the Origin (guardBrowsers); the leader,
			// on another port, would take the page's own for a foreign one.
			pr.Out.Header.Del("Origin")
		},
		Transport: f.transport,
		ErrorLog:  slog.NewLogLogger(f.s.cfg.Logger.Handler(), slog.LevelDebug),
		// Subscriptions stream: flush every write.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			f.rt.ForgetLeader(base)
			if r.Context().Err() != nil {
				return // the client left; nobody to answer
			}
			writeError(w, forwardError(r, base, err))
		},
	}
	rp.ServeHTTP(w, r)
}

// forwardError classifies a failed forward: if the connection to the leader
// was never made nothing was sent; otherwise a write may have reached it.
func forwardError(r *http.Request, base string, err error) error {
	var op *net.OpError
	notSent := errors.As(err, &op) && op.Op == "dial"
	if notSent || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return &wire.Error{Code: wire.CodeLeaderUnreachable,
			Message: fmt.Sprintf("the leader at %s could not be reached (%v); nothing was written, retry", base, err)}
	}
	return fmt.Errorf("%w: forwarded to the leader at %s, which did not answer: %v", events.ErrOutcomeUnknown, base, err)
}
