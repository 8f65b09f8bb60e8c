package replicator

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/internal/config"
	"github.com/greffe/greffe/internal/netpolicy"
)

// Replicator configuration: the fields, their defaults and their
// validation.

// Config configures a Replicator. Zero values mean the defaults given on
// each field (DefaultConfig). None of them can change while it runs.
type Config struct {
	// NodeID is this node's raft server id. Required; it never changes for
	// a data folder: Dir records it at the first start, and Open refuses
	// another (ErrNodeIDChanged, nodeid.go).
	NodeID string
	// RaftAddr is the TCP address raft listens on. Required.
	RaftAddr string
	// Advertise is the address other nodes dial to reach this one. Default
	// RaftAddr, which must then not be a wildcard address; with port 0 (tests)
	// the port the listener got.
	Advertise string
	// Dir holds the raft log (Dir/log) and snapshots (Dir/snapshots).
	// Required.
	Dir string
	// FS is the file system Dir is on: every file the replicator writes
	// goes through it. Default: the operating system's. Tests pass
	// vfs.NewCrashableMem() (the ledger on the same one) to simulate a
	// power loss of the whole member.
	FS vfs.FS
	// Bootstrap makes this node a one-voter cluster on first start. It is
	// ignored when Dir already holds raft state.
	Bootstrap bool
	// Peers overrides, by server id, the address this node dials to reach
	// another node (a proxy, NAT). Others are dialled at the address in the
	// raft configuration. Default none.
	Peers map[string]string
	// TLS, when set, puts mutual TLS on the raft port: every connection,
	// raft's and the info protocol's, in and out, presents this node's
	// certificate and must present one the cluster's CA signed that names
	// a node id (PeerTLS builds it; greffe cluster certs issues the
	// certificates). This node's own certificate must name NodeID. Nil:
	// plain TCP, allowed on loopback only unless Insecure.
	TLS *tls.Config
	// Insecure allows plain TCP raft (TLS nil) on an address beyond
	// loopback (RaftAddr or Advertise). Anyone who reaches the raft port
	// of such a node can then write to its ledger, remove members and read
	// its state: for a network the operator trusts entirely. Open logs a
	// warning saying so. Default false: such an address needs TLS.
	Insecure bool

	// HeartbeatTimeout and ElectionTimeout: how long a follower waits without
	// hearing from the leader before it stands for election. Default 1 s
	// each (raft's): with pre-vote, a dead leader is replaced in about
	// 1.5-3 s, and a busy 2-core machine does not trigger false elections.
	HeartbeatTimeout, ElectionTimeout time.Duration
	// LeaderLeaseTimeout: how long a leader keeps leading without hearing
	// from a quorum. Default 500 ms. It bounds how long a partitioned
	// leader keeps accepting appends that will fail.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout: how soon an idle leader tells followers the commit
	// index. Default 20 ms, so that a follower's local reads lag the leader
	// by tens of milliseconds when writes stop.
	CommitTimeout time.Duration

	// TrailingLogs is how many raft entries stay in the log after a
	// snapshot, so that a follower that was away catches up from the log
	// rather than by a snapshot install, and so that an install finishes
	// before the log has moved past it (no snapshot loop). Zero (the
	// default) derives it from the write rate: the node keeps about
	// TrailingBytes of log, counted in entries of the average size it
	// applies, between 1024 and 262144 entries (trailingFor). Raft counts
	// entries, but entries are group-commit batches whose size follows the
	// load: 64 writers of one event make ~10-event entries, 64 writers of
	// 100 events make ~2 MiB ones. A fixed count would keep minutes of
	// history in one case and gigabytes in the other. Set it (tests) to fix
	// the count.
	TrailingLogs uint64
	// TrailingBytes is the raft log kept after a snapshot when TrailingLogs
	// is zero. Default 256 MiB: at the 3-node peak measured in
	// docs/CLUSTER.md that is minutes of writes, and hours at control-plane
	// rates.
	TrailingBytes uint64
	// SnapshotThreshold is how many entries past the last snapshot trigger
	// the next one (checked every SnapshotInterval). Default 8192 (raft's).
	// A snapshot streams the whole ledger to Dir/snapshots: its cost grows
	// with the ledger, not with the threshold, so snapshots stay rare.
	SnapshotThreshold uint64
	// SnapshotInterval is how often the threshold is checked. Default 2 min.
	SnapshotInterval time.Duration
	// SnapshotRetain is how many snapshots Dir/snapshots keeps. Default 2.
	SnapshotRetain int
	// ApplyTimeout bounds how long a proposal or membership change may wait
	// to be taken by raft (not to commit). Default 5 s.
	ApplyTimeout time.Duration
	// LogCacheEntries is how many recent entries raft keeps in memory for
	// replication. Default 64: entries are whole batches (up to 16 MiB,
	// typically 0.1-2 MiB), so this bounds the cache to about 64 batches.
	LogCacheEntries int
	// MaintainInterval is how often the node refreshes what it knows of its
	// peers (HTTP address, verifier keys) and, on the leader, promotes
	// caught-up non-voters. Default 1 s.
	MaintainInterval time.Duration

	// Info returns what this node says about itself beyond raft: its HTTP
	// URL and verifier keys. Required.
	Info func() NodeInfo
	// Logger receives the replicator's and raft's logs. Default: discard.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults, without the required fields.
func DefaultConfig() Config {
	c := Config{}
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, time.Second)
	def(&c.ElectionTimeout, time.Second)
	def(&c.LeaderLeaseTimeout, 500*time.Millisecond)
	def(&c.CommitTimeout, 20*time.Millisecond)
	def(&c.SnapshotInterval, 2*time.Minute)
	def(&c.ApplyTimeout, 5*time.Second)
	def(&c.MaintainInterval, time.Second)
	if c.TrailingBytes == 0 {
		c.TrailingBytes = 256 << 20
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = 2
	}
	if c.LogCacheEntries == 0 {
		c.LogCacheEntries = 64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
}

// ErrInvalidConfig wraps every configuration problem.
var ErrInvalidConfig = errors.New("replicator: invalid config")

// Validate reports every problem of c at once (after defaults).
func (c *Config) Validate() error {
	var p config.Problems
	if c.NodeID == "" || strings.ContainsAny(c.NodeID, " \t\n/") || len(c.NodeID) > 64 {
		p.Addf("NodeID %q: 1 to 64 characters without spaces or slashes", c.NodeID)
	}
	if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
		p.Addf("RaftAddr %q: %v", c.RaftAddr, err)
	}
	adv := c.Advertise
	if adv == "" {
		adv = c.RaftAddr
	}
	if host, port, err := net.SplitHostPort(adv); err != nil {
		p.Addf("Advertise %q: %v", adv, err)
	} else if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() || c.Advertise != "" && port == "0" {
		p.Addf("Advertise %q: other nodes cannot dial a wildcard address or port 0; set the address they should use", adv)
	}
	if c.Dir == "" {
		p.Addf("Dir is required")
	}
	if c.Info == nil {
		p.Addf("Info is required")
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		p.Addf("ElectionTimeout %s is below HeartbeatTimeout %s", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		p.Addf("LeaderLeaseTimeout %s is above HeartbeatTimeout %s", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.TLS == nil && !c.Insecure {
		for _, a := range []struct{ field, addr string }{{"RaftAddr", c.RaftAddr}, {"Advertise", c.Advertise}} {
			if a.addr != "" && !netpolicy.IsLoopback(a.addr) {
				p.Addf("%s %q is beyond loopback and raft has no TLS: anyone who reaches it could write to the ledger and remove members; "+
					"give the raft port mutual TLS (--raft-tls-cert, --raft-tls-key, --raft-tls-ca: greffe cluster certs issues them), "+
					"or, on a network you trust entirely, allow plain raft with --raft-insecure (Insecure)", a.field, a.addr)
			}
		}
	}
	if c.TLS != nil {
		switch id, err := ownNodeID(c.TLS); {
		case err != nil:
			p.Addf("TLS: this node's raft certificate: %v", err)
		case id != c.NodeID:
			p.Addf("TLS: this node's raft certificate names node %q, but this node is %q; issue it a certificate of its own (greffe cluster certs --node %s=HOST)", id, c.NodeID, c.NodeID)
		}
	}
	if c.LogCacheEntries < 1 || c.SnapshotRetain < 1 {
		p.Addf("LogCacheEntries %d and SnapshotRetain %d must be positive", c.LogCacheEntries, c.SnapshotRetain)
	}
	return p.Err(ErrInvalidConfig)
}
