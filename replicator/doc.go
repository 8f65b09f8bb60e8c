// Package replicator puts a raft cluster (hashicorp/raft) in front of the
// ledger: the leader's group-commit batch is one raft entry, and every
// replica applies committed entries with the single node's deterministic
// apply (pebblelog.Store.ApplyReplicated), so every node stores identical
// bytes and roots. It holds the FSM, a Pebble-backed raft log and stable
// store, snapshots streamed from Pebble checkpoints, membership (join as a
// non-voter, promotion once caught up, removal, leadership transfer), the
// linearizable read barrier, and a small node-information protocol served
// on the raft port (how followers learn the leader's HTTP address and every
// node's checkpoint verifier keys).
//
// The raft port authenticates its peers: with mutual TLS, by the node id
// its certificates name (peercert.go), and every RPC's sender is checked
// against the latest configuration before raft sees it
// (authtransport.go); plain raft is refused beyond loopback unless
// Config.Insecure. A removal is acted on only once committed (removal.go),
// and a raft folder belongs to one node id for good (nodeid.go). A
// snapshot received from a leader is kept only if the ledger takes it
// (refused.go), and only under a raft index its content and this node's
// raft state allow (snapindex.go).
//
// It imports events, events/pebblelog (for the store's snapshot and apply
// types), internal/netpolicy (what counts as loopback), wire (the cluster
// status it reports and the cluster's error codes), raft and Pebble; never
// api, node or cmd. Only node imports it (and cmd, which may import
// everything, for the cluster's certificates): api reaches the cluster
// through its Cluster and Router interfaces. Raft's errors are translated
// here: callers see *NotLeaderError (which carries the leader's address),
// events.ErrOutcomeUnknown, or an *events.Error with a stable code.
//
// The exporters (Kafka, the KurrentDB mirror) are package export's: this
// package is raft only.
package replicator
