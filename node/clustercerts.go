package node

import "github.com/greffe/greffe/replicator"

// What the CLI needs of the replicator, named by the node, which alone
// imports replicator (issue #21: raft is wired by node only; lint's
// importedOnlyBy): the certificates of a cluster's raft port (`greffe
// cluster certs`) and the error a removed member's node stops with.

// PeerSpec names one member of a cluster for its certificate: its id and
// the hosts its raft address may name.
type PeerSpec = replicator.PeerSpec

// ClusterCertsConfig says where to write a cluster's CA and member
// certificates, and for how long each is valid.
type ClusterCertsConfig = replicator.ClusterCertsConfig

// ClusterCerts is what WriteClusterCerts wrote.
type ClusterCerts = replicator.ClusterCerts

// The lifetimes of a new CA and of a member certificate.
const (
	DefaultCAValidity   = replicator.DefaultCAValidity
	DefaultPeerValidity = replicator.DefaultPeerValidity
)

// WriteClusterCerts writes (or extends) a cluster's CA and one certificate
// per member (replicator.WriteClusterCerts).
func WriteClusterCerts(cfg ClusterCertsConfig) (ClusterCerts, error) {
	return replicator.WriteClusterCerts(cfg)
}

// ErrRemoved is the error a node stops with when the cluster removed it
// (the CLI's exit code for it: docs/CLUSTER.md).
var ErrRemoved = replicator.ErrRemoved
