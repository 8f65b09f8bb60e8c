package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/replicator"
	"github.com/greffe/greffe/wire"
)

// The replicator is the cluster api's routes and request routing need.
var (
	_ api.Cluster = (*replicator.Replicator)(nil)
	_ api.Router  = (*replicator.Replicator)(nil)
)

// ClusterConfig makes the node a member of a raft cluster (issue #5). The
// zero value (no RaftAddr) is a single node.
type ClusterConfig struct {
	// RaftAddr is where raft listens (host:port). Setting it turns cluster
	// mode on.
	RaftAddr string
	// Advertise is the raft address other nodes dial. Default RaftAddr.
	Advertise string
	// Bootstrap makes this node the first member of a new cluster on its
	// first start (ignored afterwards).
	Bootstrap bool
	// Join is the HTTP URL of any member. On its first start the node
	// adopts the cluster's ledger id from it, then asks to join (as a
	// non-voter, promoted once caught up). Ignored once the node is a
	// member.
	Join string
	// JoinToken is the bearer token (operator role) for Join, when the
	// cluster uses tokens.
	JoinToken string
	// JoinTimeout bounds how long the first start keeps trying to reach
	// Join. Default 30 s.
	JoinTimeout time.Duration
	// RaftTLSCert, RaftTLSKey and RaftTLSCA (PEM files, all three or none)
	// put mutual TLS on the raft port (replicator.PeerTLS): only nodes with
	// a certificate of the cluster's CA that names a node id can speak
	// raft or ask who a node is, and raft RPCs only as that node, a member
	// (greffe cluster certs issues them). A raft address beyond loopback
	// needs them, unless RaftInsecure.
	RaftTLSCert, RaftTLSKey, RaftTLSCA string
	// RaftInsecure allows plain TCP raft on an address beyond loopback
	// (replicator.Config.Insecure): anyone who reaches the raft port can
	// then write to the ledger. For a network trusted entirely.
	RaftInsecure bool
	// Raft tunes the replicator (timeouts, snapshots, Peers). NodeID,
	// RaftAddr, Advertise, Dir, Bootstrap, Info and Logger are set by the
	// node.
	Raft replicator.Config
}

// Enabled reports whether the node runs in a cluster.
func (c *ClusterConfig) Enabled() bool { return c.RaftAddr != "" }

// clusterMember is the node's part in the cluster.
type clusterMember struct {
	rep *replicator.Replicator
	url atomic.Pointer[string] // the node's HTTP URL, once bound
}

// ErrClusterConfig wraps problems of the cluster flags.
var ErrClusterConfig = errors.New("node: invalid cluster config")

// prepareCluster runs before the store opens: for a node joining on its
// first start, it learns the cluster's ledger id so that the new store is
// created with it. A snapshot install a crash interrupted is settled by
// pebblelog.Open, under the folder's lock (issue #20: settled here, before
// the lock, a second node started on a live folder deleted the first's
// restore and snapshots in progress).
func (n *Node) prepareCluster(sc *pebblelog.Config) error {
	cc := &n.cfg.Cluster
	if !cc.Enabled() {
		if cc.Bootstrap || cc.Join != "" {
			return fmt.Errorf("%w: --bootstrap and --join need --raft-addr", ErrClusterConfig)
		}
		return nil
	}
	if cc.Bootstrap && cc.Join != "" {
		return fmt.Errorf("%w: use --bootstrap on the first node only, --join on the others", ErrClusterConfig)
	}
	if cc.JoinTimeout == 0 {
		cc.JoinTimeout = 30 * time.Second
	}
	// A folder started with another --node-id is refused before anything
	// in it is touched (pebblelog.Open may settle an interrupted restore;
	// CheckNodeID only reads, and replicator.Open records the id once the
	// store holds the folder's lock).
	if err := replicator.CheckNodeID(cc.Raft.FS, filepath.Join(n.cfg.DataDir, "raft"), n.cfg.NodeID); err != nil {
		return err
	}
	if cc.Join == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cc.JoinTimeout)
	defer cancel()
	c := client.New(cc.Join, cc.JoinToken)
	var info wire.InfoOut
	err := retryJoin(ctx, func() error {
		var err error
		info, err = c.Info(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("join %s: read the cluster's ledger id: %w", cc.Join, err)
	}
	if sc.LedgerID != "" && sc.LedgerID != info.LedgerID {
		return fmt.Errorf("%w: --ledger-id %s, but the cluster at %s holds ledger %s", ErrClusterConfig, sc.LedgerID, cc.Join, info.LedgerID)
	}
	sc.LedgerID = info.LedgerID
	return nil
}

// retryJoin calls op until it succeeds, fails with a refusal (4xx), or ctx
// ends. Members may still be starting, or electing a leader.
func retryJoin(ctx context.Context, op func() error) error {
	for {
		err := op()
		var ae *wire.Error
		if err == nil || errors.As(err, &ae) && ae.Status/100 == 4 {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// openCluster starts the replicator over the open store and lets /v1/info
// publish every member's verifier keys. REQUIRES: n.Store and n.Keys are
// open; ac is the API config being built.
func (n *Node) openCluster(ac *api.Config) error {
	cc := &n.cfg.Cluster
	if !cc.Enabled() {
		return nil
	}
	m := &clusterMember{}
	rc := cc.Raft
	rc.NodeID, rc.RaftAddr, rc.Advertise = n.cfg.NodeID, cc.RaftAddr, cc.Advertise
	rc.Dir = filepath.Join(n.cfg.DataDir, "raft")
	rc.Bootstrap = cc.Bootstrap
	rc.Insecure = cc.RaftInsecure
	rc.Logger = n.cfg.Logger
	switch {
	case cc.RaftTLSCert == "" && cc.RaftTLSKey == "" && cc.RaftTLSCA == "":
	case cc.RaftTLSCert == "" || cc.RaftTLSKey == "" || cc.RaftTLSCA == "":
		return errors.New("raft TLS needs a certificate, its key and the cluster CA (--raft-tls-cert, --raft-tls-key, --raft-tls-ca), all three")
	default:
		t, err := replicator.PeerTLS(cc.RaftTLSCert, cc.RaftTLSKey, cc.RaftTLSCA)
		if err != nil {
			return err
		}
		rc.TLS = t
	}
	keys := n.Keys
	rc.Info = func() replicator.NodeInfo {
		in := replicator.NodeInfo{VerifierKeys: append([]string(nil), keys.Verifiers...)}
		if u := m.url.Load(); u != nil {
			in.HTTPURL = *u
		}
		return in
	}
	rep, err := replicator.Open(rc, n.Store)
	if err != nil {
		return err
	}
	m.rep = rep
	n.cluster = m
	// Raft stops after the API (no request reaches it closed) and before
	// the store (no entry is applied to a closed store).
	n.closers = append([]func() error{rep.Close}, n.closers...)
	ac.Verifiers = rep.Verifiers
	return nil
}

// startCluster runs once the API is bound: it mounts the cluster routes and
// request routing, publishes the node's URL, and on a first start with
// Join asks the cluster to add this node. A single node gets cluster routes
// that answer not_clustered.
func (n *Node) startCluster() error {
	m := n.cluster
	if m == nil {
		n.API.MountCluster(nil)
		return nil
	}
	n.API.MountCluster(m.rep)
	n.API.UseRouter(m.rep)
	u := n.URL()
	m.url.Store(&u)
	cc := &n.cfg.Cluster
	if cc.Join == "" || m.rep.HadState() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cc.JoinTimeout)
	defer cancel()
	c := client.New(cc.Join, cc.JoinToken)
	req := wire.JoinRequest{NodeID: n.cfg.NodeID, RaftAddr: m.rep.Addr(), LedgerID: n.Store.LedgerID()}
	err := retryJoin(ctx, func() error {
		return c.Do(ctx, http.MethodPost, "/v1/cluster/join", req, nil)
	})
	if err != nil {
		return fmt.Errorf("join the cluster through %s: %w", cc.Join, err)
	}
	n.cfg.Logger.Info("joined the cluster as a non-voter; the leader promotes this node once it has caught up", "through", cc.Join)
	return nil
}

// clusterDone is closed when the node's raft member stopped on its own
// (removed from the cluster, or its ledger failed); nil for a single node.
func (n *Node) clusterDone() <-chan struct{} {
	if n.cluster == nil {
		return nil
	}
	return n.cluster.rep.Done()
}

// clusterStopped returns why the member stopped: an error matching
// replicator.ErrRemoved when a committed configuration removed it (greffe
// serve exits with its own code then, so that a service manager does not
// take it for a clean stop), the failure otherwise.
func (n *Node) clusterStopped() error {
	err := n.cluster.rep.Err()
	if errors.Is(err, replicator.ErrRemoved) {
		n.cfg.Logger.Warn("removed from the cluster: stopping")
		return fmt.Errorf("node %s: %w; its data folder can no longer serve this cluster: start a new member on an empty folder to replace it (docs/CLUSTER.md, Membership)",
			n.cfg.NodeID, err)
	}
	return err
}

// Replicator returns the node's raft member, nil for a single node.
func (n *Node) Replicator() *replicator.Replicator {
	if n.cluster == nil {
		return nil
	}
	return n.cluster.rep
}
