package node

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/api/dashboard"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/metrics"
)

// ReadyMaxLag is how many events a projection may still have to fold for
// the node to be ready. A node that just started, or a follower that just
// caught up on raft, folds its backlog in batches; a few thousand events
// take a fraction of a second, so a larger lag means the read models would
// answer about a past that callers no longer expect.
const ReadyMaxLag = 1000

// Readiness codes: why GET /readyz answers 503. Stable.
const (
	// CodeProjectionLagging: a projection is more than ReadyMaxLag events
	// behind the head.
	CodeProjectionLagging = "projection_lagging"
	// CodeProjectionFailed: a projection's runner stopped on an event it
	// could not fold; it serves nothing newer until the node is fixed.
	CodeProjectionFailed = "projection_failed"
	// CodeNoLeader: in a cluster, this node knows no leader (an election
	// is running, or this node is cut off from a quorum).
	CodeNoLeader = "no_leader"
	// CodeRaftStopped: this node's raft member has stopped.
	CodeRaftStopped = "raft_stopped"
	// CodeStoreFailed: the ledger's store met a write or sync error
	// (pebblelog.Store.Failure) and refuses writes until the node is
	// restarted; it still serves what it acknowledged. The same code
	// answers the appends it refuses (events.CodeStoreFailed).
	CodeStoreFailed = events.CodeStoreFailed
)

// Readiness is the body of GET /readyz.
type Readiness struct {
	// Ready is true when every check passes (HTTP 200), false otherwise
	// (HTTP 503).
	Ready bool `json:"ready"`
	// Head is the log's size when the checks ran.
	Head uint64 `json:"head"`
	// MaxProjectionLag is the largest lag of the projections, in events.
	MaxProjectionLag uint64 `json:"max_projection_lag"`
	// Leader is the raft leader's node id (clusters only).
	Leader string `json:"leader,omitempty"`
	// Reasons say why the node is not ready; empty when it is.
	Reasons []NotReady `json:"reasons,omitempty"`
}

// NotReady is one failed readiness check.
type NotReady struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// openObserve mounts what operators and people watch: GET /metrics (the
// node's own Prometheus registry; readers, like the rest of the data),
// GET /readyz (public, for load balancers and orchestrators, next to
// /healthz) and the dashboard (public page and assets; its data calls
// carry the reader's token).
//
// REQUIRES: the store, the API, the domain, the cluster member (if any)
// and the ecosystem are open, and the API is not serving yet.
func (n *Node) openObserve() error {
	mc := metrics.Config{
		Store:         n.Store,
		Projections:   n.Projections,
		Subscriptions: n.API,
		NodeID:        n.cfg.NodeID,
		Version:       Version,
		LedgerID:      n.Store.LedgerID(),
		Logger:        n.cfg.Logger.With("component", "metrics"),
	}
	if n.cluster != nil {
		mc.Raft = n.cluster.rep
	}
	if n.Ecosystem != nil && n.Ecosystem.Exporter != nil {
		mc.Exporter = n.Ecosystem.Exporter
	}
	if n.Witnesses != nil {
		mc.Witnesses = n.Witnesses
	}
	mc.Quotas = []metrics.Quotas{n.API}
	if n.Ecosystem != nil && n.Ecosystem.GRPC != nil {
		mc.Quotas = append(mc.Quotas, n.Ecosystem.GRPC)
	}
	m, err := metrics.New(mc)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	h := m.Handler()
	n.API.Handle("GET /metrics", h.ServeHTTP, api.ReaderRoles()...)
	n.API.HandlePublic("GET /readyz", http.HandlerFunc(n.serveReady))
	d := dashboard.Handler()
	n.API.HandlePublic("GET "+dashboard.PagePattern, d)
	n.API.HandlePublic("GET "+dashboard.AssetPrefix, d)
	return nil
}

// Ready runs the readiness checks: the store accepts writes (it has not
// failed), every projection is within ReadyMaxLag events of the head and
// has not failed, and in a cluster a leader is known. It reads local state only (never another member), so a probe
// answers at once.
func (n *Node) Ready() Readiness {
	r := Readiness{Head: n.Store.Head().Size}
	if err := n.Store.Failure(); err != nil {
		r.Reasons = append(r.Reasons, NotReady{Code: CodeStoreFailed,
			Message: fmt.Sprintf("the store refuses writes until the node is restarted (it serves the %d events it acknowledged): %v", r.Head, err)})
	}
	if n.Projections != nil {
		for _, st := range n.Projections.Status() {
			r.MaxProjectionLag = max(r.MaxProjectionLag, st.Lag)
			switch {
			case st.Error != "":
				r.Reasons = append(r.Reasons, NotReady{Code: CodeProjectionFailed,
					Message: fmt.Sprintf("projection %s stopped: %s", st.Name, st.Error)})
			case st.Lag > ReadyMaxLag:
				r.Reasons = append(r.Reasons, NotReady{Code: CodeProjectionLagging,
					Message: fmt.Sprintf("projection %s is %d events behind the head %d (at most %d for ready)", st.Name, st.Lag, st.Head, ReadyMaxLag)})
			}
		}
	}
	if n.cluster != nil {
		st, err := metrics.LocalRaftStatus(n.cluster.rep)
		switch {
		case err != nil:
			r.Reasons = append(r.Reasons, NotReady{Code: CodeRaftStopped, Message: fmt.Sprintf("raft: %v", err)})
		case st.LeaderID == "":
			r.Reasons = append(r.Reasons, NotReady{Code: CodeNoLeader,
				Message: fmt.Sprintf("no leader known in term %d (state %s): an election is running or this node is cut off", st.Term, st.State)})
		default:
			r.Leader = st.LeaderID
		}
	}
	r.Ready = len(r.Reasons) == 0
	return r
}

func (n *Node) serveReady(w http.ResponseWriter, _ *http.Request) {
	r := n.Ready()
	status := http.StatusOK
	if !r.Ready {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(r)
}
