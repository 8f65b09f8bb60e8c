package api

import (
	"context"
	"net/http"

	"github.com/greffe/greffe/wire"
)

// Cluster is what the cluster routes need from the replicator
// (replicator.Replicator implements it). Membership changes must run on the
// leader: the router forwards them there.
type Cluster interface {
	Status(ctx context.Context) (wire.Status, error)
	Join(ctx context.Context, req wire.JoinRequest) error
	Remove(ctx context.Context, nodeID string) error
	TransferLeadership(ctx context.Context, to string) error
}

// MountCluster adds the cluster routes (docs/CLUSTER.md):
//
//	GET  /v1/cluster/status           this node's view of the members
//	POST /v1/cluster/join             {node_id, raft_addr, ledger_id}: add a non-voter
//	POST /v1/cluster/remove           {node_id}
//	POST /v1/cluster/transfer-leader  {node_id} (empty: any voter)
//
// Changes need the operator role and answer with the status after the
// change. With c nil (a single node) every route answers not_clustered.
// Call it before Serve.
func (s *Server) MountCluster(c Cluster) {
	if c == nil {
		notClustered := func(w http.ResponseWriter, r *http.Request) {
			writeError(w, &wire.Error{Code: wire.CodeNotClustered,
				Message: "this node runs alone; start it with --raft-addr and --bootstrap (or --join) to form a cluster"})
		}
		s.Handle("GET /v1/cluster/status", notClustered, readerRoles()...)
		for _, p := range []string{"join", "remove", "transfer-leader"} {
			s.Handle("POST /v1/cluster/"+p, notClustered, RoleOperator)
		}
		return
	}
	status := func(w http.ResponseWriter, r *http.Request) {
		st, err := c.Status(r.Context())
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	}
	s.Handle("GET /v1/cluster/status", status, readerRoles()...)
	s.Handle("POST /v1/cluster/join", func(w http.ResponseWriter, r *http.Request) {
		var in wire.JoinRequest
		if err := decodeBody(w, r, &in); err != nil {
			writeError(w, err)
			return
		}
		if err := c.Join(r.Context(), in); err != nil {
			writeError(w, err)
			return
		}
		status(w, r)
	}, RoleOperator)
	s.Handle("POST /v1/cluster/remove", func(w http.ResponseWriter, r *http.Request) {
		var in wire.NodeIn
		if err := decodeBody(w, r, &in); err != nil {
			writeError(w, err)
			return
		}
		if err := c.Remove(r.Context(), in.NodeID); err != nil {
			writeError(w, err)
			return
		}
		status(w, r)
	}, RoleOperator)
	s.Handle("POST /v1/cluster/transfer-leader", func(w http.ResponseWriter, r *http.Request) {
		var in wire.NodeIn
		if err := decodeBody(w, r, &in); err != nil {
			writeError(w, err)
			return
		}
		if err := c.TransferLeadership(r.Context(), in.NodeID); err != nil {
			writeError(w, err)
			return
		}
		status(w, r)
	}, RoleOperator)
}
