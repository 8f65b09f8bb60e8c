package replicator

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// logHold holds every write to raft's log (its Pebble folder) while held:
// blocked is closed when the first one waits.
type logHold struct {
	held      atomic.Bool
	blocked   chan struct{}
	once      sync.Once
	release   chan struct{}
	releaseMu sync.Once
}

func newLogHold() *logHold {
	return &logHold{blocked: make(chan struct{}), release: make(chan struct{})}
}

func (h *logHold) MaybeError(op errorfs.Op) error {
	if h.held.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasPrefix(op.Path, "/raft/log/") {
		h.once.Do(func() { close(h.blocked) })
		<-h.release
	}
	return nil
}

func (h *logHold) String() string { return "raft log hold" }

func (h *logHold) let() { h.releaseMu.Do(func() { close(h.release) }) }

// TestReplicator_CloseWithQueuedProposals: Close returns, and every append
// in flight is answered, when raft holds proposals in its apply queue as it
// is stopped. Raft never answers a future still queued when it stops
// (hashicorp/raft#498, with BatchApplyCh). Close used to shut raft down
// straight away: with proposals queued behind a log write, it then waited
// forever for the wait loop, itself waiting for their answer. Found by
// TestReplicator_ClusterPowerLoss, which stops members under load (one run
// in four hung for 10 minutes). Steps: a one-node cluster; hold its raft
// log's writes, so that raft's main loop stops in the write of a first
// proposal while the next ones queue; close; let the write go. The old
// Close hung in about half the tries (raft's main loop picks its shutdown
// or its queue at random), so the test tries four times.
func TestReplicator_CloseWithQueuedProposals(t *testing.T) {
	for try := range 4 {
		hold := newLogHold()
		n := &diskNode{id: "n1", mem: vfs.NewCrashableMem()}
		n.start(t, true, hold)
		t.Cleanup(func() { hold.let(); n.stop(t) })
		eventually(t, "n1 leads", 10*time.Second, func() bool { return n.rep.IsLeader() })
		leader := leaderOf(t, []*diskNode{n})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		if _, err := appendOne(ctx, leader.store, "queued", -1); err != nil {
			t.Fatal(err)
		}
		hold.held.Store(true)
		answered := make(chan error, 3)
		appendAsync := func(i int) {
			go func() { _, err := appendOne(ctx, n.store, "queued", i); answered <- err }()
		}
		appendAsync(0)
		select {
		case <-hold.blocked:
		case <-ctx.Done():
			t.Fatal("raft did not write the first proposal")
		}
		appendAsync(1)
		appendAsync(2)
		// Handed to raft (Propose queued it for the wait loop, which waits
		// on the first): raft holds it in its apply queue.
		eventually(t, "a proposal queued behind the held write", 5*time.Second, func() bool { return len(n.rep.pending) >= 1 })
		closed := make(chan error, 1)
		rep := n.rep
		go func() { closed <- rep.Close() }()
		eventually(t, "Close started", 5*time.Second, func() bool { return rep.closing.Load() })
		hold.let()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("try %d: Close: %v", try, err)
			}
		case <-time.After(10 * time.Second):
			n.rep, n.store = nil, nil // hung: the cleanup would hang on it too
			t.Fatalf("try %d: Close did not return with proposals queued in raft", try)
		}
		for range 3 {
			select {
			case <-answered:
			case <-ctx.Done():
				t.Fatalf("try %d: an append in flight was never answered", try)
			}
		}
		cancel()
		n.stop(t)
	}
}
