package wire

// The bodies and codes of the cluster routes (docs/CLUSTER.md): what
// GET /v1/cluster/status answers and the membership changes take. The
// replicator fills them from raft; request routing (api/forward.go) and
// the clients' leader search (client/endpoints.go) read the codes.

// Error codes of the cluster: the replicator's and request routing's
// (docs/API.md, docs/CLUSTER.md). They are part of the public contract:
// never renamed, never reused. Each error below api says what happened
// to the request with an events.Kind; api turns the kind and the code
// into an HTTP status (api/errors.go).
const (
	// CodeNotClustered: a cluster route was called on a single node.
	CodeNotClustered = "not_clustered"
	// CodeNotLeader: this node does not lead, so it cannot order the write
	// or serve the verified read; nothing was written. Details carry the
	// leader's id and raft address when one is known.
	CodeNotLeader = "not_leader"
	// CodeLeaderChanged: the request was forwarded to a node that no longer
	// leads; nothing was written. Retry (any node).
	CodeLeaderChanged = "leader_changed"

	// Both request routing (a forward that could not reach the leader)
	// and the replicator (a leader elected that does not answer) answer
	// it.

	// CodeLeaderUnreachable: the leader could not be reached; the request
	// was not sent (nothing written). The same code as the replicator's.
	CodeLeaderUnreachable = "leader_unreachable"
	// CodeLedgerMismatch: a node of another ledger asked to join.
	CodeLedgerMismatch = "ledger_mismatch"
	// CodeUnknownNode: the node id is not a member of the cluster.
	CodeUnknownNode = "unknown_node"
	// CodeMemberConflict: the node id is a member with another raft address.
	CodeMemberConflict = "member_conflict"
	// CodeReplicationFailed: raft refused the operation before writing it
	// (enqueue timeout, a configuration change already in flight); retry.
	CodeReplicationFailed = "replication_failed"
)

// NodeIn is the body of POST /v1/cluster/remove and
// /v1/cluster/transfer-leader (an empty node_id transfers to any voter).
type NodeIn struct {
	// NodeID is the node's id.
	NodeID string `json:"node_id"`
}

// JoinRequest asks the leader to add a node. The node joins as a non-voter
// and the leader promotes it to voter once it has caught up.
type JoinRequest struct {
	// NodeID is the joining node's id.
	NodeID string `json:"node_id"`
	// RaftAddr is the joining node's raft address (host:port).
	RaftAddr string `json:"raft_addr"`
	// LedgerID is the ledger the joining node holds; it must be this one.
	LedgerID string `json:"ledger_id"`
}

// Status is a node's view of the cluster.
type Status struct {
	// NodeID is this node's id.
	NodeID string `json:"node_id"`
	// State is this node's raft state: Leader, Follower or Candidate.
	State string `json:"state"`
	// Term is the current raft term.
	Term uint64 `json:"term"`
	// LeaderID is the leader's id; empty when there is none.
	LeaderID string `json:"leader_id"`
	// LeaderRaftAddr is the leader's raft address; empty when there is none.
	LeaderRaftAddr string `json:"leader_raft_addr"`
	// CommitIndex is the raft index known committed.
	CommitIndex uint64 `json:"commit_index"`
	// AppliedIndex is the raft index applied to this node's log.
	AppliedIndex uint64 `json:"applied_index"`
	// LastIndex is the newest raft index in this node's raft log.
	LastIndex uint64 `json:"last_index"`
	// SnapshotIndex is the raft index of this node's newest snapshot; the
	// raft log before it (less TrailingLogs) is gone.
	SnapshotIndex uint64 `json:"snapshot_index"`
	// TrailingLogs is how many raft entries this node keeps after a
	// snapshot (derived from the write rate unless fixed).
	TrailingLogs uint64 `json:"trailing_logs"`
	// Restores counts snapshots this node installed since it started.
	Restores uint64 `json:"restores"`
	// RefusedRPCs counts the raft RPCs this node refused since it started:
	// a sender that names no node, this node, another node than its
	// certificate, or a node that is not a member (docs/CLUSTER.md).
	RefusedRPCs uint64 `json:"refused_rpcs"`
	// RefusedConnections counts the raft connections it refused: a TLS
	// handshake that failed, a certificate without a node id, too many
	// connections.
	RefusedConnections uint64 `json:"refused_connections"`
	// RefusedSnapshots counts the raft snapshots this node refused since
	// it started, at install or at the start, for what they hold or for
	// the raft index they are named at, none kept in its snapshot store: a
	// forged history sent to its raft port, or a faulty member's
	// (docs/CLUSTER.md, Snapshots).
	RefusedSnapshots uint64 `json:"refused_snapshots"`
	// Servers are the cluster's members.
	Servers []ServerStatus `json:"servers"`
}

// ServerStatus is one member as this node sees it: its place in the raft
// configuration and, when it answered on its raft port, what it says.
type ServerStatus struct {
	// ID is the member's id.
	ID string `json:"id"`
	// RaftAddr is the member's raft address.
	RaftAddr string `json:"raft_addr"`
	// Suffrage is voter or nonvoter.
	Suffrage string `json:"suffrage"`
	// Leader says whether the member is the leader.
	Leader bool `json:"leader"`
	// Reachable says whether the member answered on its raft port.
	Reachable bool `json:"reachable"`
	// Error says why the member did not answer.
	Error string `json:"error,omitempty"`
	// HTTPURL is the member's HTTP API URL, as it says.
	HTTPURL string `json:"http_url,omitempty"`
	// State is the member's raft state, as it says; empty when unreachable.
	State string `json:"state,omitempty"`
	// Term is the member's raft term, as it says.
	Term uint64 `json:"term,omitempty"`
	// AppliedIndex is the member's applied raft index, as it says.
	AppliedIndex uint64 `json:"applied_index"`
	// LastIndex is the member's newest raft index, as it says.
	LastIndex uint64 `json:"last_index"`
	// HeadSize is the member's log size, as it says.
	HeadSize uint64 `json:"head_size"`
	// Restores counts the snapshots the member installed since it started.
	Restores uint64 `json:"restores"`
}
