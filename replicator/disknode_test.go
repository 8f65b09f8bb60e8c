package replicator

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/internal/faultfs"
	"github.com/greffe/greffe/wire"
)

// Members on crashable disks, for the power-loss suite (powerloss_test.go)
// and the tests that hold a member's disk.

// diskNode is a member whose disk is a crashable in-memory file system.
type diskNode struct {
	id    string
	addr  string     // kept across restarts: raft's configuration holds it
	mem   *vfs.MemFS // this node's disk
	store *pebblelog.Store
	rep   *Replicator
	tweak func(*Config) // applied over powerConfig, when set
}

// powerConfig: snapshots every few dozen entries, checked often, and a
// short log kept after them, so that snapshots, log truncations and
// installs on followers that fall behind all happen within a round.
func powerConfig(id string) Config {
	return testConfig(id, func(c *Config) {
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = 48, 32, 40*time.Millisecond
	})
}

// start opens the node on its disk as the node does (pebblelog.Recover
// first), through inj when set.
func (n *diskNode) start(t *testing.T, bootstrap bool, inj errorfs.Injector) {
	t.Helper()
	var fs vfs.FS = n.mem
	if inj != nil {
		fs = faultfs.Wrap(n.mem, inj)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", n.id)
	if err := pebblelog.Recover("/ledger", fs); err != nil {
		t.Fatalf("%s: recover: %v", n.id, err)
	}
	st, err := pebblelog.Open(pebblelog.Config{Dir: "/ledger", FS: fs, LedgerID: testLedger, CheckpointInterval: -1,
		// Small: the ledger flushes and reuses log segments within a round.
		MemTableSize: 256 << 10, WALSegmentSize: 32 << 10, Logger: log})
	if err != nil {
		t.Fatalf("%s: open the ledger: %v", n.id, err)
	}
	cfg := powerConfig(n.id)
	if n.tweak != nil {
		n.tweak(&cfg)
	}
	cfg.Dir, cfg.FS, cfg.Bootstrap, cfg.Logger = "/raft", fs, bootstrap, log
	if n.addr != "" {
		cfg.RaftAddr = n.addr
	}
	cfg.Info = func() NodeInfo { return NodeInfo{HTTPURL: "http://" + n.id + ".test"} }
	rep, err := Open(cfg, st)
	if err != nil {
		_ = st.Close()
		t.Fatalf("%s: open the replicator: %v", n.id, err)
	}
	n.store, n.rep, n.addr = st, rep, rep.Addr()
	// Raft never replays entries below its newest snapshot: the ledger must
	// hold at least that much (catchUpFromSnapshot restores it otherwise).
	if si, applied := snapshotIndex(rep), st.AppliedIndex(); applied < si {
		t.Errorf("%s started with its ledger at raft index %d, behind its newest snapshot at %d", n.id, applied, si)
	}
}

func (n *diskNode) stop(t *testing.T) {
	if n.rep == nil {
		return
	}
	if err := n.rep.Close(); err != nil {
		t.Errorf("close %s: %v", n.id, err)
	}
	if err := n.store.Close(); err != nil {
		t.Errorf("close store %s: %v", n.id, err)
	}
	n.rep, n.store = nil, nil
}

// diskCluster starts three members on fresh disks behind inj: n1
// bootstraps, the others join and are promoted. tweak, when set, is
// applied to each node's config.
func diskCluster(t *testing.T, inj errorfs.Injector, tweak func(id string, c *Config)) []*diskNode {
	t.Helper()
	nodes := make([]*diskNode, 3)
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.stop(t)
			}
		}
	})
	for i := range nodes {
		nodes[i] = &diskNode{id: fmt.Sprintf("n%d", i+1), mem: vfs.NewCrashableMem()}
		if tweak != nil {
			id := nodes[i].id
			nodes[i].tweak = func(c *Config) { tweak(id, c) }
		}
		nodes[i].start(t, i == 0, inj)
		if i == 0 {
			eventually(t, "n1 leads", 10*time.Second, func() bool { return nodes[0].rep.IsLeader() })
			continue
		}
		if err := nodes[0].rep.Join(t.Context(), wire.JoinRequest{NodeID: nodes[i].id, RaftAddr: nodes[i].addr, LedgerID: testLedger}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every node a voter", 20*time.Second, func() bool {
		st, err := nodes[0].rep.Status(t.Context())
		if err != nil || len(st.Servers) != len(nodes) {
			return false
		}
		for _, s := range st.Servers {
			if s.Suffrage != "voter" {
				return false
			}
		}
		return true
	})
	return nodes
}

// leaderOf returns the member that leads and has established its term
// (a read barrier passed), waiting for one.
func leaderOf(t *testing.T, nodes []*diskNode) *diskNode {
	t.Helper()
	var leader *diskNode
	eventually(t, "a leader", 20*time.Second, func() bool {
		for _, n := range nodes {
			if n.rep.IsLeader() {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				err := n.rep.ReadBarrier(ctx)
				cancel()
				if err == nil {
					leader = n
					return true
				}
			}
		}
		return false
	})
	return leader
}

func byID(nodes []*diskNode, id string) *diskNode {
	for _, n := range nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func snapshotIndex(r *Replicator) uint64 {
	v, _ := strconv.ParseUint(r.raft.Stats()["last_snapshot_index"], 10, 64)
	return v
}

// ledgerState is what a member holds once caught up: the checks compare
// it across members.
type ledgerState struct {
	Head    events.Head
	Applied uint64
	Digest  [32]byte // SHA-256 over the stored bytes of every event, in order
}

// caughtUp waits until every member's head reaches the leader's (after a
// read barrier, the leader has applied everything committed), then returns
// each member's state and the leader's events by id.
func caughtUp(t *testing.T, nodes []*diskNode, leader *diskNode) ([]ledgerState, map[uuid.UUID]uint64) {
	t.Helper()
	want := leader.store.Head()
	var states []ledgerState
	for _, n := range nodes {
		if want.Size > 0 {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			err := n.store.Subscribe(ctx, want.Size-1, events.Filter{}, func(events.Event) error { return errReached })
			cancel()
			if !errors.Is(err, errReached) {
				t.Fatalf("%s did not reach the leader's head %d: %v", n.id, want.Size, err)
			}
		}
		st := ledgerState{Head: n.store.Head(), Applied: n.store.AppliedIndex()}
		h := sha256.New()
		for lo := uint64(0); lo < st.Head.Size; lo += events.MaxReadLimit {
			raw, err := n.store.ReadRaw(t.Context(), lo, min(st.Head.Size, lo+events.MaxReadLimit))
			if err != nil {
				t.Fatalf("%s: read raw: %v", n.id, err)
			}
			for _, r := range raw {
				h.Write(r)
			}
		}
		st.Digest = [32]byte(h.Sum(nil))
		states = append(states, st)
	}
	ids := map[uuid.UUID]uint64{}
	for from := uint64(0); from < want.Size; {
		evs, err := leader.store.ReadAll(t.Context(), events.ReadOptions{From: from, Limit: events.MaxReadLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if _, dup := ids[e.ID]; dup {
				t.Fatalf("event %s stored twice", e.ID)
			}
			ids[e.ID] = e.Position
		}
		from += uint64(len(evs))
	}
	return states, ids
}
