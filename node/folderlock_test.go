package node

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/replicator"
	"github.com/greffe/greffe/wire"
)

// TestNode_SecondNodeOnLiveFolderDeletesNothing is issue #20, finding 4's
// second half: a cluster node runs on a data folder, holding a snapshot
// checkpoint for raft (ledger.snapshots/) and staging a snapshot install
// (ledger.restore/). A second node started on the same folder ran
// pebblelog.Recover before the store's lock was taken and deleted both,
// then failed on the lock. Now it fails on the folder's lock first, and
// both folders are as the first node left them.
func TestNode_SecondNodeOnLiveFolderDeletesNothing(t *testing.T) {
	calm := replicator.Config{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond, MaintainInterval: 100 * time.Millisecond}
	data := t.TempDir()
	n1 := serveAt(t, data, Config{NodeID: "n1", Cluster: ClusterConfig{RaftAddr: "127.0.0.1:0", Bootstrap: true, Raft: calm}})
	waitLeader(t, n1, "n1")
	appendMany(t, n1.URL(), "orders", 100)
	before := n1.Store.Head()

	// A snapshot raft is streaming: a Pebble checkpoint in ledger.snapshots.
	sn, err := n1.Store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()
	// A snapshot install being staged (Restore's folder; its content is
	// whatever the install wrote so far).
	ledger := filepath.Join(data, "ledger")
	if err := os.MkdirAll(ledger+".restore", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ledger+".restore", "000004.sst"), []byte("staged"), 0o600); err != nil {
		t.Fatal(err)
	}
	inProgress := func() []string {
		var out []string
		for _, p := range []string{ledger + ".restore", ledger + ".snapshots"} {
			if names, err := os.ReadDir(p); err == nil && len(names) > 0 {
				out = append(out, filepath.Base(p))
			}
		}
		return out
	}
	want := []string{"ledger.restore", "ledger.snapshots"}
	if diff := cmp.Diff(want, inProgress()); diff != "" {
		t.Fatalf("in-progress folders (-want +got):\n%s", diff)
	}

	// The same node id, as a restart by mistake or a second service
	// manager would use (another id is refused earlier, by the folder's
	// recorded node id, before anything is touched either).
	_, err = Open(Config{DataDir: data, NodeID: "n1", API: api.Config{Addr: "127.0.0.1:0"},
		Cluster: ClusterConfig{RaftAddr: "127.0.0.1:0", Raft: calm}})
	if !errors.Is(err, inspect.ErrLocked) {
		t.Fatalf("second node on a live folder: %v, want ErrLocked", err)
	}
	if diff := cmp.Diff(want, inProgress()); diff != "" {
		t.Fatalf("in-progress folders after the second node (-want +got):\n%s", diff)
	}
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatalf("the held snapshot after the second node: %v", err)
	}
	// The first node goes on.
	if _, err := client.New(n1.URL(), "").Append(t.Context(), "orders", events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
		t.Fatalf("append after the second node: %v", err)
	}
	if got := n1.Store.Head().Size; got != before.Size+1 {
		t.Fatalf("head %d, want %d", got, before.Size+1)
	}
}
