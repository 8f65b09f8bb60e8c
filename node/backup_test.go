package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/greffe/greffe/backup"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/replicator"
	"github.com/greffe/greffe/wire"
)

// serveAt runs a node on the data folder data until the test ends.
func serveAt(t *testing.T, data string, cfg Config) *Node {
	t.Helper()
	cfg.DataDir = data
	cfg.API.Addr = "127.0.0.1:0"
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return n
}

// waitLeader polls the node's own view of the leader, bounded: raft
// exposes no leadership event a test could wait on without taking it from
// the replicator (as in TestObserve_Cluster).
func waitLeader(t *testing.T, n *Node, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Ready().Leader != id {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become leader: %+v", id, n.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var errCaughtUp = errors.New("caught up")

// waitCaughtUp waits (a subscription) until n holds size events.
func waitCaughtUp(t *testing.T, n *Node, size uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := n.Store.Subscribe(ctx, size-1, events.Filter{}, func(events.Event) error { return errCaughtUp }); !errors.Is(err, errCaughtUp) {
		t.Fatalf("the node did not reach %d events: %v", size, err)
	}
}

func appendMany(t *testing.T, url string, stream string, count int) {
	t.Helper()
	c := client.New(url, "")
	for i := 0; i < count; i += 50 {
		evs := make([]wire.EventIn, min(50, count-i))
		for j := range evs {
			evs[j] = wire.EventIn{Type: "T", Data: fmt.Appendf(nil, `{"i":%d}`, i+j)}
		}
		if _, err := c.Append(t.Context(), stream, events.ExpectAny, evs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNode_BackupOfClusterMember: a backup taken from a follower of a
// three-node cluster records the raft index it applied. Restored, it opens
// as a single node serving the backup's head and taking writes after it;
// restored again, it seeds a new cluster (--bootstrap over the restored
// folder, docs/CLUSTER.md): a member that joins installs the seed's
// history, and both hold the same head after new writes.
func TestNode_BackupOfClusterMember(t *testing.T) {
	// Calmer than the replicator tests' 300 ms / 150 ms lease: five raft
	// nodes run in this one process, under -race in CI, and a leader that
	// missed its 150 ms lease stepped down mid-test once on a loaded
	// machine, failing an append with not_leader.
	calm := replicator.Config{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond, MaintainInterval: 100 * time.Millisecond}
	member := func(id string, bootstrap bool, join string) Config {
		return Config{NodeID: id, Cluster: ClusterConfig{RaftAddr: "127.0.0.1:0", Bootstrap: bootstrap, Join: join, Raft: calm}}
	}
	n1 := serveAt(t, t.TempDir(), member("n1", true, ""))
	waitLeader(t, n1, "n1")
	n2 := serveAt(t, t.TempDir(), member("n2", false, n1.URL()))
	n3 := serveAt(t, t.TempDir(), member("n3", false, n1.URL()))
	appendMany(t, n2.URL(), "cluster", 600) // forwarded to the leader
	size := n1.Store.Head().Size
	waitCaughtUp(t, n2, size)
	waitCaughtUp(t, n3, size)

	bk, err := backup.Fetch(t.Context(), client.New(n2.URL(), ""), filepath.Join(t.TempDir(), "backup"), backup.FetchConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m := bk.Manifest
	if m.NodeID != "n2" || m.RaftIndex == 0 || m.Size < size || m.LedgerID != n1.Store.LedgerID() {
		t.Fatalf("backup of a follower: node %s raft index %d size %d (cluster %d)", m.NodeID, m.RaftIndex, m.Size, size)
	}
	if rep, err := backup.Verify(t.Context(), bk.Dir, backup.VerifyConfig{}); err != nil || !rep.Verified {
		t.Fatalf("verify: %+v %v", rep, err)
	}

	t.Run("as a single node", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "single")
		if _, err := backup.Restore(t.Context(), bk.Dir, data, backup.RestoreConfig{}); err != nil {
			t.Fatal(err)
		}
		s := serveAt(t, data, Config{NodeID: "s1"})
		if h := s.Store.Head(); h.Size != m.Size || h.Root != [32]byte(m.Root) {
			t.Fatalf("single node head %+v, backup %d", h, m.Size)
		}
		appendMany(t, s.URL(), "after", 10)
		if got := s.Store.Head().Size; got != m.Size+10 {
			t.Fatalf("head %d after 10 appends on %d", got, m.Size)
		}
	})

	t.Run("seeding a new cluster", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "seed")
		if _, err := backup.Restore(t.Context(), bk.Dir, data, backup.RestoreConfig{}); err != nil {
			t.Fatal(err)
		}
		seed := serveAt(t, data, member("m1", true, ""))
		waitLeader(t, seed, "m1")
		if h := seed.Store.Head(); h.Size != m.Size {
			t.Fatalf("seed head %d, backup %d", h.Size, m.Size)
		}
		appendMany(t, seed.URL(), "new-cluster", 20)
		joiner := serveAt(t, t.TempDir(), member("m2", false, seed.URL()))
		waitLeader(t, joiner, "m1")                    // it has heard from the seed
		appendMany(t, joiner.URL(), "new-cluster", 20) // forwarded to the seed
		want := seed.Store.Head()
		if want.Size != m.Size+40 {
			t.Fatalf("seed head %d, want %d", want.Size, m.Size+40)
		}
		waitCaughtUp(t, joiner, want.Size)
		if got := joiner.Store.Head(); got != want || joiner.Store.LedgerID() != m.LedgerID {
			t.Fatalf("joiner head %+v, seed %+v", got, want)
		}
	})
}
