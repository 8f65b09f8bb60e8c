package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

const testLedger = "00000000-0000-4000-8000-0000000000c1"

// testNode is one member: a real Pebble ledger and a replicator on a
// loopback port.
type testNode struct {
	id    string
	dir   string
	addr  string
	store *pebblelog.Store
	rep   *Replicator
}

// fast timeouts keep the tests short; they are still ten times the
// loopback round trip on a busy machine.
func testConfig(id string, tweak func(*Config)) Config {
	c := Config{NodeID: id, RaftAddr: "127.0.0.1:0", HeartbeatTimeout: 300 * time.Millisecond,
		ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond,
		MaintainInterval: 100 * time.Millisecond}
	if tweak != nil {
		tweak(&c)
	}
	return c
}

func startNode(t *testing.T, n *testNode, cfg Config) {
	t.Helper()
	if n.dir == "" {
		n.dir = t.TempDir()
	}
	st, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(n.dir, "ledger"), LedgerID: testLedger, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir = filepath.Join(n.dir, "raft")
	if n.addr != "" {
		cfg.RaftAddr = n.addr
	}
	cfg.Info = func() NodeInfo {
		return NodeInfo{HTTPURL: "http://" + n.id + ".test", VerifierKeys: []string{"key-" + n.id}}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", n.id)
	}
	rep, err := Open(cfg, st)
	if err != nil {
		_ = st.Close()
		t.Fatal(err)
	}
	n.store, n.rep, n.addr = st, rep, rep.Addr()
	t.Cleanup(func() { n.stop(t) })
}

func (n *testNode) stop(t *testing.T) {
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

// eventually polls cond until it holds or the deadline passes. It is for
// raft's own state (leadership, configuration, log compaction), which raft
// exposes no event for that a test could wait on without stealing it from
// the replicator; replication progress is awaited with subscriptions.
func eventually(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cluster starts n nodes: the first bootstraps, the others join through it
// and are promoted once caught up.
func cluster(t *testing.T, n int, tweak func(*Config)) []*testNode {
	t.Helper()
	nodes := make([]*testNode, n)
	for i := range nodes {
		nodes[i] = &testNode{id: fmt.Sprintf("n%d", i+1)}
		cfg := testConfig(nodes[i].id, tweak)
		cfg.Bootstrap = i == 0
		startNode(t, nodes[i], cfg)
		if i == 0 {
			eventually(t, "n1 leads", 10*time.Second, func() bool { return nodes[0].rep.raft.State() == raft.Leader })
			continue
		}
		if err := nodes[0].rep.Join(t.Context(), wire.JoinRequest{NodeID: nodes[i].id, RaftAddr: nodes[i].addr, LedgerID: testLedger}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every node a voter", 20*time.Second, func() bool {
		st, err := nodes[0].rep.Status(t.Context())
		if err != nil {
			return false
		}
		for _, s := range st.Servers {
			if s.Suffrage != "voter" {
				return false
			}
		}
		return len(st.Servers) == n
	})
	return nodes
}

func appendOne(ctx context.Context, st *pebblelog.Store, stream string, i int) (events.Outcome, error) {
	return st.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: stream, Events: []events.Proposed{{
		ID: uuid.New(), Type: "Replicated", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Metadata: json.RawMessage(`{}`),
	}}}}})
}

// appendRange appends n events to stream, one per append ({"i":0} to
// {"i":n-1}), failing the test on the first error.
func appendRange(t testing.TB, st *pebblelog.Store, stream string, n int) {
	t.Helper()
	for i := range n {
		if _, err := appendOne(t.Context(), st, stream, i); err != nil {
			t.Fatal(err)
		}
	}
}

var errReached = errors.New("reached")

// converged waits until every node has applied the leader's last event (a
// subscription delivers it), then checks that every node holds the same
// head and identical bytes.
func converged(t *testing.T, nodes []*testNode, leader *testNode) {
	t.Helper()
	want := leader.store.Head()
	for _, n := range nodes {
		if want.Size == 0 {
			break
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := n.store.Subscribe(ctx, want.Size-1, events.Filter{}, func(events.Event) error { return errReached })
		cancel()
		if !errors.Is(err, errReached) {
			t.Fatalf("%s did not reach the leader's head %d: %v", n.id, want.Size, err)
		}
		if got := n.store.Head(); got != want {
			t.Fatalf("%s head %+v, leader %+v", n.id, got, want)
		}
	}
	ref, err := leader.store.ReadRaw(t.Context(), 0, want.Size)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		got, err := n.store.ReadRaw(t.Context(), 0, want.Size)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(ref, got) {
			t.Fatalf("%s stores other bytes than the leader", n.id)
		}
	}
}

// TestReplicator_IdenticalBytes: concurrent appends through the leader's
// store reach every node byte for byte, with identical heads; a follower's
// own append is refused with the leader's address; linearizable reads are
// served by the leader only.
func TestReplicator_IdenticalBytes(t *testing.T) {
	nodes := cluster(t, 3, nil)
	leader := nodes[0]
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				if _, err := appendOne(t.Context(), leader.store, fmt.Sprintf("rep-%d", w%3), i); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := leader.store.Head().Size; got != 320 {
		t.Fatalf("leader head %d, want 320", got)
	}
	converged(t, nodes, leader)

	_, err := appendOne(t.Context(), nodes[1].store, "rep-f", 0)
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderID != "n1" || nl.LeaderAddr != leader.addr || events.CodeOf(err) != wire.CodeNotLeader {
		t.Fatalf("append on a follower: %v, want not_leader naming n1 at %s", err, leader.addr)
	}
	if err := leader.rep.ReadBarrier(t.Context()); err != nil {
		t.Fatalf("read barrier on the leader: %v", err)
	}
	if err := nodes[2].rep.ReadBarrier(t.Context()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("read barrier on a follower: %v, want not_leader", err)
	}
	url, self, err := nodes[2].rep.Leader(t.Context())
	if err != nil || self || url != "http://n1.test" {
		t.Fatalf("Leader() on a follower = %q, %v, %v; want n1's URL", url, self, err)
	}
	if diff := cmp.Diff([]string{"key-n3", "key-n1", "key-n2"}, nodes[2].rep.Verifiers()); diff != "" {
		t.Fatalf("verifiers (-want +got):\n%s", diff)
	}
	// Entries of a few hundred bytes: 256 MiB of log is more entries than
	// the bound, so every node keeps the most the bound allows.
	for _, n := range nodes {
		eventually(t, n.id+" derives its trailing logs", 10*time.Second, func() bool {
			st, err := n.rep.Status(t.Context())
			return err == nil && st.TrailingLogs == maxTrailingLogs
		})
	}
}

// TestTrailingFor: TrailingLogs derived from the average entry size keeps
// about the target bytes of log, within bounds.
func TestTrailingFor(t *testing.T) {
	cases := []struct {
		name        string
		target, avg uint64
		want        uint64
	}{
		{"nothing measured", 256 << 20, 0, initialTrailingLogs},
		{"tiny entries hit the upper bound", 256 << 20, 300, maxTrailingLogs},
		{"mid-size entries", 256 << 20, 16 << 10, 16384},
		{"huge entries hit the lower bound", 256 << 20, 2 << 20, minTrailingLogs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := trailingFor(tc.target, tc.avg); got != tc.want {
				t.Fatalf("trailingFor(%d, %d) = %d, want %d", tc.target, tc.avg, got, tc.want)
			}
		})
	}
}

// TestReplicator_OutcomeUnknownWhenLeadershipLost: a leader that loses its
// quorum while an append is in flight answers outcome_unknown, and the
// append is not retried blindly; after the quorum is back, a retry with the
// same ids answers with one event, never two.
func TestReplicator_OutcomeUnknownWhenLeadershipLost(t *testing.T) {
	nodes := cluster(t, 3, nil)
	leader := nodes[0]
	if _, err := appendOne(t.Context(), leader.store, "lost", 0); err != nil {
		t.Fatal(err)
	}
	converged(t, nodes, leader)
	nodes[1].stop(t)
	nodes[2].stop(t)
	req := events.AppendRequest{Streams: []events.StreamAppend{{Stream: "lost", Events: []events.Proposed{{
		ID: uuid.New(), Type: "Lost", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}}}}}
	_, err := leader.store.Append(t.Context(), req)
	if !errors.Is(err, events.ErrOutcomeUnknown) || events.CodeOf(err) != events.CodeOutcomeUnknown {
		t.Fatalf("append without a quorum: %v, want outcome_unknown", err)
	}
	// Bring the followers back on their folders and addresses.
	for _, n := range nodes[1:] {
		startNode(t, n, testConfig(n.id, nil))
	}
	// The retry goes to whichever node leads at the time: right after the
	// followers return, a first leader may lose to the old one, whose log
	// is longer (seen under -race: retrying on the first leader found never
	// succeeded).
	var leaderNode *testNode
	var o events.Outcome
	eventually(t, "the retry is answered by a leader", 20*time.Second, func() bool {
		for _, n := range nodes {
			if n.rep.raft.State() == raft.Leader {
				leaderNode = n
				o, err = n.store.Append(t.Context(), req)
				return err == nil
			}
		}
		return false
	})
	converged(t, nodes, leaderNode)
	if evs, _ := leaderNode.store.ReadStream(t.Context(), "lost", events.ReadOptions{}); len(evs) != 2 {
		t.Fatalf("stream holds %d events after the retry, want 2 (the first and the retried one, once)", len(evs))
	}
	_ = o
}

// TestReplicator_SnapshotInstall: a follower that was away while the leader
// compacted its log past it catches up through a snapshot install, ends
// with identical bytes, and goes on applying entries after it.
func TestReplicator_SnapshotInstall(t *testing.T) {
	small := func(c *Config) {
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = 16, 4, 50*time.Millisecond
	}
	nodes := cluster(t, 3, small)
	leader, lagging := nodes[0], nodes[2]
	appendRange(t, leader.store, "snap", 10)
	converged(t, nodes, leader)
	applied := lagging.store.AppliedIndex()
	lagging.stop(t)
	appendRange(t, leader.store, "snap", 200)
	eventually(t, "the leader compacts its log", 20*time.Second, func() bool {
		first, _ := leader.rep.logs.FirstIndex()
		return first > applied+1
	})
	startNode(t, lagging, testConfig(lagging.id, small))
	converged(t, nodes, leader)
	if got := lagging.rep.fsm.restores.Load(); got == 0 {
		t.Fatal("the lagging follower caught up without a snapshot install")
	}
	// The installed snapshot stays in the follower's store, listed: it is
	// raft's last snapshot there (issue #20: only a refused one is removed).
	// Raft records it once the FSM answered, after the ledger's head moved.
	var metas []*raft.SnapshotMeta
	eventually(t, "the installed snapshot listed as raft's last snapshot", 10*time.Second, func() bool {
		var err error
		metas, err = lagging.rep.fsm.snaps.List()
		return err == nil && len(metas) > 0 && metas[0].Index == snapshotIndex(lagging.rep)
	})
	appendRange(t, leader.store, "after", 5)
	converged(t, nodes, leader)
	// And the follower starts again on it.
	installed := metas[0].ID
	lagging.stop(t)
	startNode(t, lagging, testConfig(lagging.id, small))
	if metas, err := lagging.rep.fsm.snaps.newest(3); err != nil || !slices.ContainsFunc(metas, func(m *raft.SnapshotMeta) bool { return m.ID == installed }) {
		t.Fatalf("after a restart the follower's snapshots are %v (%v); want the installed %s among them", metas, err, installed)
	}
	checkRefusedCount(t, lagging, 0)
	converged(t, nodes, leader)
}

// TestReplicator_MembershipRefusals covers every refusal code of the
// membership operations.
func TestReplicator_MembershipRefusals(t *testing.T) {
	nodes := cluster(t, 2, nil)
	leader := nodes[0]
	cases := []struct {
		name string
		op   func() error
		code string
	}{
		{"join with another ledger", func() error {
			return leader.rep.Join(t.Context(), wire.JoinRequest{NodeID: "n9", RaftAddr: "127.0.0.1:9", LedgerID: "other"})
		}, wire.CodeLedgerMismatch},
		{"join with a taken id", func() error {
			return leader.rep.Join(t.Context(), wire.JoinRequest{NodeID: "n2", RaftAddr: "127.0.0.1:9", LedgerID: testLedger})
		}, wire.CodeMemberConflict},
		{"join with a bad id", func() error {
			return leader.rep.Join(t.Context(), wire.JoinRequest{NodeID: "a b", RaftAddr: "127.0.0.1:9", LedgerID: testLedger})
		}, events.CodeInvalidField},
		{"join with a bad address", func() error {
			return leader.rep.Join(t.Context(), wire.JoinRequest{NodeID: "n9", RaftAddr: "nowhere", LedgerID: testLedger})
		}, events.CodeInvalidField},
		{"join on a follower", func() error {
			return nodes[1].rep.Join(t.Context(), wire.JoinRequest{NodeID: "n9", RaftAddr: "127.0.0.1:9", LedgerID: testLedger})
		}, wire.CodeNotLeader},
		{"remove an unknown node", func() error { return leader.rep.Remove(t.Context(), "n9") }, wire.CodeUnknownNode},
		{"transfer to an unknown node", func() error { return leader.rep.TransferLeadership(t.Context(), "n9") }, wire.CodeUnknownNode},
		{"rejoin is a no-op", func() error {
			return leader.rep.Join(t.Context(), wire.JoinRequest{NodeID: "n2", RaftAddr: nodes[1].addr, LedgerID: testLedger})
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := events.CodeOf(tc.op()); got != tc.code {
				t.Fatalf("code %q, want %q", got, tc.code)
			}
		})
	}
	// A non-voter cannot take the leadership: add one that never catches
	// up (nothing listens at its address) and try.
	if err := leader.rep.Join(t.Context(), wire.JoinRequest{NodeID: "n9", RaftAddr: "127.0.0.1:9", LedgerID: testLedger}); err != nil {
		t.Fatal(err)
	}
	if got := events.CodeOf(leader.rep.TransferLeadership(t.Context(), "n9")); got != wire.CodeReplicationFailed {
		t.Fatalf("transfer to a non-voter: code %q, want %q", got, wire.CodeReplicationFailed)
	}
	if err := leader.rep.Remove(t.Context(), "n9"); err != nil {
		t.Fatal(err)
	}
}

// TestReplicator_LeaderUnreachable: a follower that cannot reach the
// leader's raft port cannot learn its HTTP address and says so.
func TestReplicator_LeaderUnreachable(t *testing.T) {
	nodes := cluster(t, 2, nil)
	follower := &testNode{id: "n3"}
	cfg := testConfig("n3", func(c *Config) { c.Peers = map[string]string{"n1": "127.0.0.1:9"} })
	startNode(t, follower, cfg)
	if err := nodes[0].rep.Join(t.Context(), wire.JoinRequest{NodeID: "n3", RaftAddr: follower.addr, LedgerID: testLedger}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n3 knows the leader", 10*time.Second, func() bool {
		_, id := follower.rep.raft.LeaderWithID()
		return id == "n1"
	})
	if _, _, err := follower.rep.Leader(t.Context()); events.CodeOf(err) != wire.CodeLeaderUnreachable {
		t.Fatalf("Leader(): %v, want leader_unreachable", err)
	}
}

// TestReplicator_RemovedNodeStops: a removed member, a follower or the
// leader removing itself, reports Done with ErrRemoved, and the cluster
// keeps working without it. Raft does not stop a leader that commits its
// own removal (ShutdownOnRemove is off: only stopRaft stops raft); it steps
// down, and the maintain loop stops it.
func TestReplicator_RemovedNodeStops(t *testing.T) {
	for _, tc := range []struct {
		name    string
		removed int // index of the node n1 removes
	}{
		{"a follower", 2},
		{"the leader itself", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := cluster(t, 3, nil)
			gone := nodes[tc.removed]
			if err := nodes[0].rep.Remove(t.Context(), gone.id); err != nil {
				t.Fatal(err)
			}
			select {
			case <-gone.rep.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the removed node did not stop")
			}
			if !errors.Is(gone.rep.Err(), ErrRemoved) {
				t.Fatalf("Err() = %v, want ErrRemoved", gone.rep.Err())
			}
			var rest []*testNode
			for _, n := range nodes {
				if n != gone {
					rest = append(rest, n)
				}
			}
			var leader *testNode
			eventually(t, "a leader among the others", 10*time.Second, func() bool {
				for _, n := range rest {
					if n.rep.IsLeader() {
						leader = n
						return true
					}
				}
				return false
			})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if _, err := appendOne(ctx, leader.store, "after-remove", 0); err != nil {
				t.Fatal(err)
			}
			converged(t, rest, leader)
		})
	}
}

// TestReplicator_PeerKeysSurviveRestart: the verifier keys a node learned
// from its peers stay listed after it restarts while those peers are down,
// so that their checkpoints stay verifiable from any node's /v1/info.
func TestReplicator_PeerKeysSurviveRestart(t *testing.T) {
	nodes := cluster(t, 3, nil)
	n1 := nodes[0]
	eventually(t, "n1 learns every key", 10*time.Second, func() bool { return len(n1.rep.Verifiers()) == 3 })
	for _, n := range nodes[1:] {
		n.stop(t)
	}
	n1.stop(t)
	startNode(t, n1, testConfig("n1", nil))
	if diff := cmp.Diff([]string{"key-n1", "key-n2", "key-n3"}, n1.rep.Verifiers()); diff != "" {
		t.Fatalf("verifiers after a restart with n2 and n3 down (-want +got):\n%s", diff)
	}
}
