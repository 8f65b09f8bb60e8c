package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/faultfs"
)

// The power-loss suite of the cluster (issue #13). Each member keeps all
// its durable state (the ledger, raft's log and stable store, raft's
// snapshots) on its own vfs.NewCrashableMem; a power loss is a CrashClone
// that keeps only what was synced, and the member restarts on the clone.
// The SIGKILL/SIGSTOP tests of the cluster keep the page cache: they cannot
// see a missing fsync; these do.

// acks records what the writers were told. Before the cut, acknowledged
// events must survive it; an acknowledgement received after the cut began
// may be of an entry the cut lost (the old members went on without their
// disks), but if that event is there, it is at its position.
type acks struct {
	mu       sync.Mutex
	required map[uuid.UUID]uint64
	late     map[uuid.UUID]uint64
	// cutting is set before the gate closes: an acknowledgement that sees
	// it unset was received before the disks were cloned.
	cutting atomic.Bool
	// count and target: reached is closed when count, the events
	// acknowledged in the round, reaches target.
	count   atomic.Int64
	target  int64
	reached chan struct{}
}

func (a *acks) record(o events.Outcome) {
	late := a.cutting.Load()
	a.mu.Lock()
	for _, e := range o.Events {
		if late {
			a.late[e.ID] = e.Position
		} else {
			a.required[e.ID] = e.Position
		}
	}
	a.mu.Unlock()
	if a.count.Add(int64(len(o.Events))) >= a.target && a.target > 0 {
		select {
		case <-a.reached:
		default:
			close(a.reached)
		}
	}
}

// write appends until ctx ends: to the leader, or, for a writer that goes
// through followers, to a follower first, which refuses with the leader's
// id, and then to that leader, as the API's router forwards (the router is
// HTTP, above this package). Errors (an election, the end of the round)
// are neither acknowledgements nor retried with the same ids.
func write(ctx context.Context, nodes []*diskNode, w int, viaFollower bool, a *acks) {
	for i := 0; ctx.Err() == nil; i++ {
		var target *diskNode
		for _, n := range nodes {
			if n.rep.IsLeader() != viaFollower {
				target = n
				break
			}
		}
		if target == nil {
			// No leader for now: retry at a pace, not in a spin.
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		var evs []events.Proposed
		for j := range 1 + w%3 {
			evs = append(evs, events.Proposed{ID: uuid.New(), Type: "PowerLoss",
				Data: json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d,"j":%d,"pad":"%0128d"}`, w, i, j, 0)), Metadata: json.RawMessage(`{}`)})
		}
		req := events.AppendRequest{Streams: []events.StreamAppend{{Stream: fmt.Sprintf("power-%d", w), Events: evs}}}
		o, err := target.store.Append(ctx, req)
		var nl *NotLeaderError
		if errors.As(err, &nl) {
			if l := byID(nodes, nl.LeaderID); l != nil && viaFollower {
				o, err = l.store.Append(ctx, req)
			}
		}
		if err == nil {
			a.record(o)
		}
	}
}

// TestReplicator_ClusterPowerLoss: power is cut on the three members of a
// cluster at one instant while writers append through the leader and
// through followers and while members take snapshots and truncate their
// raft logs; the members restart on what their disks kept. Then, every
// round: a leader is elected; every event acknowledged before the cut is
// on every member at its acknowledged position (and any acknowledged during
// the cut is at its position, if there); the members' ledgers are byte
// for byte identical (same head, root and applied raft index); every
// snapshot a member had completed before the cut is still there (raft has
// dropped the log it covers); and appends work again. Every round asserts
// that each member took a snapshot and truncated its log during it. The
// rounds chain: each crashes the cluster the previous one restarted, with
// its earlier snapshots and leftovers. Seeds are fixed per round.
func TestReplicator_ClusterPowerLoss(t *testing.T) {
	// Every member's disk passes one gate, so that a cut clones the disks
	// of one moment of the whole cluster, not of three moments.
	gate := &faultfs.CloneGate{}
	nodes := diskCluster(t, gate, nil)
	a := &acks{required: map[uuid.UUID]uint64{}, late: map[uuid.UUID]uint64{}}
	const rounds = 4
	for round := range rounds {
		ok := t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			t0 := time.Now()
			rng := rand.New(rand.NewPCG(uint64(round), 13))
			snapsBefore, firstBefore := make([]uint64, 3), make([]uint64, 3)
			for i, n := range nodes {
				snapsBefore[i] = snapshotIndex(n.rep)
				firstBefore[i], _ = n.rep.logs.FirstIndex()
			}
			a.cutting.Store(false)
			a.count.Store(0)
			a.target = 300 + rng.Int64N(600)
			a.reached = make(chan struct{})
			ctx, stopWriters := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			for w := range 6 {
				wg.Go(func() { write(ctx, nodes, w, w >= 4, a) })
			}
			select {
			case <-a.reached:
			case <-time.After(20 * time.Second):
				t.Fatalf("the writers got %d events acknowledged, not %d", a.count.Load(), a.target)
			}
			// The cut waits (bounded) until every member has snapshotted and
			// truncated its log in this round: without them the round proves
			// less than it claims.
			eventually(t, "every member snapshots and truncates its raft log", 10*time.Second, func() bool {
				for i, n := range nodes {
					first, _ := n.rep.logs.FirstIndex()
					if snapshotIndex(n.rep) <= snapsBefore[i] || first <= firstBefore[i] {
						return false
					}
				}
				return true
			})
			a.cutting.Store(true)
			// Completed before the cut, so on the disks the clones keep.
			snapsCut := make([]uint64, 3)
			for i, n := range nodes {
				snapsCut[i] = snapshotIndex(n.rep)
			}
			mems := make([]*vfs.MemFS, 3)
			for i, n := range nodes {
				mems[i] = n.mem
			}
			clones := gate.CrashCloneAll(vfs.CrashCloneCfg{}, mems...)
			acked := a.count.Load()
			// The old members are gone: they run on on their old disks until
			// stopped, and nothing they do reaches the clones.
			stopWriters()
			for _, n := range nodes {
				n.stop(t)
			}
			wg.Wait()
			for i, n := range nodes {
				n.mem = clones[i]
				n.start(t, false, gate)
			}
			leader := leaderOf(t, nodes)
			states, ids := caughtUp(t, nodes, leader)
			for i, n := range nodes[1:] {
				if diff := cmp.Diff(states[0], states[i+1]); diff != "" {
					t.Errorf("%s and %s hold different ledgers (-%s +%s):\n%s", nodes[0].id, n.id, nodes[0].id, n.id, diff)
				}
			}
			a.mu.Lock()
			missing := 0
			for id, pos := range a.required {
				if got, ok := ids[id]; !ok || got != pos {
					missing++
					if missing <= 5 {
						t.Errorf("acknowledged event %s at position %d: found %v at %d", id, pos, ok, got)
					}
				}
			}
			for id, pos := range a.late {
				if got, ok := ids[id]; ok && got != pos {
					t.Errorf("event %s acknowledged during the cut at position %d is at %d", id, pos, got)
				}
			}
			required := len(a.required)
			a.mu.Unlock()
			if missing > 0 {
				t.Fatalf("%d of %d acknowledged events are missing or moved after the power loss", missing, required)
			}
			for i, n := range nodes {
				if got := snapshotIndex(n.rep); got < snapsCut[i] {
					t.Errorf("%s restarted with snapshot index %d, it had completed one at %d before the cut", n.id, got, snapsCut[i])
				}
			}
			for i := range 5 {
				// A loaded machine (-race) may move the leadership right
				// after the restart: a write refused as not_leader was not
				// made, so it goes to whoever leads now.
				var err error
				for range 5 {
					if _, err = appendOne(t.Context(), leader.store, "after-power-loss", i); !errors.Is(err, ErrNotLeader) {
						break
					}
					leader = leaderOf(t, nodes)
				}
				if err != nil {
					t.Fatalf("append after the restart: %v", err)
				}
			}
			caughtUp(t, nodes, leader)
			t.Logf("%d events acknowledged in the round, %d required so far, head %d, snapshots at cut %v, leader %s after restart, %s",
				acked, required, states[0].Head.Size, snapsCut, leader.id, time.Since(t0).Round(time.Millisecond))
		})
		if !ok {
			break
		}
	}
}

// crashAt cuts the power of one disk just before the n-th operation that
// match selects: clone is what the disk kept, and done is closed then. The
// member goes on on the old disk until it is stopped.
type crashAt struct {
	faultfs.CloneGate // cuts outside Pebble MemFS's Link, ReuseForWrite, Lock
	match             func(errorfs.Op) bool
	n                 int64
	mem               *vfs.MemFS
	seen              atomic.Int64
	clone             *vfs.MemFS // set before done is closed
	done              chan struct{}
}

func (c *crashAt) MaybeError(op errorfs.Op) error {
	if c.match(op) && c.seen.Add(1) == c.n {
		c.clone = c.CrashClone(c.mem, vfs.CrashCloneCfg{})
		close(c.done)
	}
	return nil
}

func (c *crashAt) String() string { return "crash at" }

// TestReplicator_PowerLossDuringSnapshotInstall cuts the power of a real
// follower at each step of installing a snapshot from its leader: while
// raft receives it, once raft saved it but before the ledger is rebuilt
// from it, and at each of the two renames that swap the rebuilt ledger in.
// The follower restarts on what its disk kept: its ledger is never behind
// its newest raft snapshot (catchUpFromSnapshot restores it), it catches
// up, and it ends byte for byte identical to the others, which go on
// taking appends. The follower takes no snapshot of its own, so every
// snapshot write it does is an install.
func TestReplicator_PowerLossDuringSnapshotInstall(t *testing.T) {
	nodes := diskCluster(t, nil, func(id string, c *Config) {
		if id == "n3" {
			c.SnapshotThreshold = 1 << 30
		}
		// The writers append at one leader throughout; the fast timeouts
		// let it step down on a loaded machine under -race (a 150 ms lease
		// missed while the follower restarts), which ends the run with
		// "leadership lost". Slower ones keep the leader; the test only
		// waits on them when a node restarts.
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	})
	leader, follower := nodes[0], nodes[2]
	cases := []struct {
		name  string
		match func(errorfs.Op) bool
		n     int64
		// reinstall: the disk kept no new snapshot, so the leader must send
		// one again; otherwise the follower restores the one raft saved
		// before it catches up.
		reinstall bool
	}{
		// Before the first write of the state (n 1): a snapshot may fit in
		// one buffer, and a later write could be of a second install after
		// this one completed.
		{"raft receiving the snapshot", func(op errorfs.Op) bool {
			return op.Kind == errorfs.OpFileWrite && strings.HasPrefix(op.Path, "/raft/snapshots/") && strings.HasSuffix(op.Path, ".tmp/"+snapStateFile)
		}, 1, true},
		{"raft saved it, the ledger not rebuilt yet", func(op errorfs.Op) bool {
			return op.Kind == errorfs.OpMkdirAll && op.Path == "/ledger.restore"
		}, 1, false},
		{"the old ledger moving aside", func(op errorfs.Op) bool {
			return op.Kind == errorfs.OpRename && op.Path == "/ledger"
		}, 1, false},
		{"the rebuilt ledger moving in", func(op errorfs.Op) bool {
			return op.Kind == errorfs.OpRename && op.Path == "/ledger.restore"
		}, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			behind := follower.rep.raft.LastIndex()
			follower.stop(t)
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for i := range 80 {
						ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
						_, err := appendOne(ctx, leader.store, fmt.Sprintf("install-%d", w), i)
						cancel()
						if err != nil {
							t.Errorf("append: %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
			eventually(t, "the leader compacts its log past the follower", 10*time.Second, func() bool {
				first, _ := leader.rep.logs.FirstIndex()
				return first > behind+1
			})
			crash := &crashAt{match: tc.match, n: tc.n, mem: follower.mem, done: make(chan struct{})}
			follower.start(t, false, crash)
			select {
			case <-crash.done:
			case <-time.After(20 * time.Second):
				t.Fatal("the follower did not reach the crash point")
			}
			follower.stop(t)
			follower.mem = crash.clone
			follower.start(t, false, nil)
			if !tc.reinstall {
				if si, applied := snapshotIndex(follower.rep), follower.store.AppliedIndex(); si <= behind || applied < si {
					t.Fatalf("restarted at raft snapshot %d, ledger at %d: want the snapshot raft saved (past %d) restored", si, applied, behind)
				}
			}
			states, _ := caughtUp(t, nodes, leader)
			if got := follower.rep.fsm.restores.Load(); tc.reinstall && got == 0 {
				t.Fatal("the follower caught up without the snapshot install its disk lost")
			}
			for i, n := range nodes[1:] {
				if diff := cmp.Diff(states[0], states[i+1]); diff != "" {
					t.Fatalf("%s and %s hold different ledgers (-%s +%s):\n%s", leader.id, n.id, leader.id, n.id, diff)
				}
			}
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := appendOne(ctx, leader.store, "after-installs", 0); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, nodes, leader)
}

// TestReplicator_FailedInstallIsRemovedAndRetried: the ledger of a
// follower fails to install a snapshot from its leader (an I/O error
// injected as it creates the staged folder), which is not a refusal. Raft
// recorded nothing of that snapshot, so it is removed from the snapshot
// store like a refused one (issue #20: a snapshot the ledger did not take
// is never kept), without counting as refused; the leader sends a
// snapshot again, that install goes through and stays listed as raft's
// last snapshot, and the follower ends identical to the others.
func TestReplicator_FailedInstallIsRemovedAndRetried(t *testing.T) {
	nodes := diskCluster(t, nil, func(id string, c *Config) {
		if id == "n3" {
			c.SnapshotThreshold = 1 << 30 // every snapshot it holds is an install
		}
	})
	leader, follower := nodes[0], nodes[2]
	behind := follower.rep.raft.LastIndex()
	follower.stop(t)
	appendRange(t, leader.store, "failed-install", 200)
	eventually(t, "the leader compacts its log past the follower", 10*time.Second, func() bool {
		first, _ := leader.rep.logs.FirstIndex()
		return first > behind+1
	})
	// The injector runs on raft's and the ledger's goroutines, one
	// operation at a time per install.
	var mu sync.Mutex
	var received, failed string // the snapshot raft received last, the one whose install failed
	staged := 0
	follower.start(t, false, errorfs.InjectorFunc(func(op errorfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if name, ok := strings.CutPrefix(op.Path, "/raft/snapshots/"); ok && op.Kind == errorfs.OpMkdirAll {
			received = strings.TrimSuffix(name, snapTmpSuffix)
		}
		if op.Kind == errorfs.OpMkdirAll && op.Path == "/ledger.restore" {
			if staged++; staged == 1 {
				failed = received
				return errors.New("injected: no space left on device")
			}
		}
		return nil
	}))
	states, _ := caughtUp(t, nodes, leader)
	for i, n := range nodes[1:] {
		if diff := cmp.Diff(states[0], states[i+1]); diff != "" {
			t.Fatalf("%s and %s hold different ledgers (-%s +%s):\n%s", leader.id, n.id, leader.id, n.id, diff)
		}
	}
	mu.Lock()
	if staged < 2 || failed == "" {
		t.Fatalf("%d installs staged, the failed one %q; want a failed one and one the leader sent again", staged, failed)
	}
	mu.Unlock()
	// Raft records an install once the FSM answered, after the ledger's
	// head moved.
	var metas []*raft.SnapshotMeta
	eventually(t, "the last install listed as raft's last snapshot", 10*time.Second, func() bool {
		var err error
		metas, err = follower.rep.fsm.snaps.List()
		return err == nil && len(metas) > 0 && metas[0].Index == snapshotIndex(follower.rep)
	})
	if got := follower.rep.fsm.restores.Load(); got == 0 {
		t.Error("no snapshot installed")
	}
	if got := follower.rep.fsm.refused.Load(); got != 0 {
		t.Errorf("%d snapshots counted refused, want 0 (an I/O error is no refusal)", got)
	}
	// The leader may send its snapshot once more meanwhile (a rejected
	// AppendEntries in flight across the install takes it back below its
	// log): that one is being written (.tmp) or restored (hidden) for a
	// while, and then listed like the first.
	var folders []string
	eventually(t, "every snapshot folder listed", 10*time.Second, func() bool {
		names, err := follower.mem.List("/raft/snapshots")
		if err != nil {
			t.Fatal(err)
		}
		folders = names
		metas, err = follower.rep.fsm.snaps.List()
		return err == nil && len(names) == len(metas) && !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, snapTmpSuffix) })
	})
	if slices.Contains(folders, failed) {
		t.Fatalf("the follower's snapshot folders are %v; want the failed install %s gone", folders, failed)
	}
}
