package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/replicator"
)

// calmRaft keeps elections quiet with several nodes in one process (see
// TestNode_BackupOfClusterMember).
var calmRaft = replicator.Config{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second,
	LeaderLeaseTimeout: 500 * time.Millisecond, MaintainInterval: 100 * time.Millisecond}

// folderState is every file of a folder and its bytes.
func folderState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNode_NodeIDRemembered (issue #20; issue #24, item 7): a member
// restarted with another --node-id used to log "removed from the cluster"
// and exit 0. The data folder remembers the id of its first start: another
// is refused with both ids named, before anything in the folder changes
// (the ledger's recovery included); the right id starts again.
func TestNode_NodeIDRemembered(t *testing.T) {
	data := filepath.Join(t.TempDir(), "d1")
	cfg := Config{DataDir: data, NodeID: "n1", API: api.Config{Addr: "127.0.0.1:0"},
		Cluster: ClusterConfig{RaftAddr: "127.0.0.1:0", Bootstrap: true, Raft: calmRaft}}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx) }()
	waitLeader(t, n, "n1")
	appendMany(t, n.URL(), "kept", 5)
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	before := folderState(t, data)
	renamed := cfg
	renamed.NodeID = "n2"
	_, err = Open(renamed)
	if !errors.Is(err, replicator.ErrNodeIDChanged) || !strings.Contains(err.Error(), `belongs to node "n1"`) || !strings.Contains(err.Error(), `not to "n2"`) {
		t.Fatalf("Open as n2 on n1's folder: %v, want ErrNodeIDChanged naming n1 and n2", err)
	}
	after := folderState(t, data)
	if len(after) != len(before) {
		t.Fatalf("the refused start changed the folder: %d files, then %d", len(before), len(after))
	}
	for p, b := range before {
		if after[p] != b {
			t.Fatalf("the refused start changed %s", p)
		}
	}
	again := serveAt(t, data, Config{NodeID: "n1", Cluster: ClusterConfig{RaftAddr: "127.0.0.1:0", Raft: calmRaft}})
	waitLeader(t, again, "n1")
	if got := again.Store.Head().Size; got != 5 {
		t.Fatalf("head %d after the restart, want 5", got)
	}
}

// TestNode_RemovedMemberStops: a member removed by a committed
// configuration stops serving, and Serve says why with an error matching
// replicator.ErrRemoved (it used to return nil, and greffe serve exited 0,
// as after a clean stop); the cluster goes on without it.
func TestNode_RemovedMemberStops(t *testing.T) {
	member := func(id string, bootstrap bool, join string) Config {
		return Config{NodeID: id, DataDir: t.TempDir(), API: api.Config{Addr: "127.0.0.1:0"},
			Cluster: ClusterConfig{RaftAddr: "127.0.0.1:0", Bootstrap: bootstrap, Join: join, Raft: calmRaft}}
	}
	n1 := serveAt(t, t.TempDir(), member("n1", true, ""))
	waitLeader(t, n1, "n1")
	n2, err := Open(member("n2", false, n1.URL()))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- n2.Serve(context.Background()) }()
	appendMany(t, n1.URL(), "before", 5)
	waitCaughtUp(t, n2, 5)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := n1.Replicator().Status(t.Context())
		if err == nil && len(st.Servers) == 2 && st.Servers[1].Suffrage == "voter" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n2 not promoted: %+v, %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := n1.Replicator().Remove(t.Context(), "n2"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if !errors.Is(err, replicator.ErrRemoved) {
			t.Fatalf("Serve of the removed member: %v, want ErrRemoved", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the removed member kept serving")
	}
	appendMany(t, n1.URL(), "after", 5)
}
