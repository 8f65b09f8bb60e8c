package replicator

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/greffe/greffe/events"
)

// TestReplicator_NodeIDRemembered (issue #20; issue #24, item 7): a member
// restarted on its folder with another node id used to start as a
// stranger to its own log, conclude it had been removed and exit 0. The
// folder records the id of its first start; another id is refused before
// anything in it is written, naming both ids; the right one starts.
func TestReplicator_NodeIDRemembered(t *testing.T) {
	n := &testNode{id: "n1"}
	startNode(t, n, testConfig("n1", func(c *Config) { c.Bootstrap = true }))
	eventually(t, "n1 leads", 10*time.Second, func() bool { return n.rep.IsLeader() })
	if _, err := appendOne(t.Context(), n.store, "kept", 0); err != nil {
		t.Fatal(err)
	}
	last := n.rep.raft.LastIndex()
	n.stop(t)
	raftDir := filepath.Join(n.dir, "raft")
	snapshot := func() map[string]string {
		out := map[string]string{}
		_ = filepath.Walk(raftDir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				b, _ := os.ReadFile(p)
				out[p] = string(b)
			}
			return nil
		})
		return out
	}
	before := snapshot()
	if got := before[filepath.Join(raftDir, nodeIDFile)]; got != "n1\n" {
		t.Fatalf("%s holds %q, want \"n1\\n\"", nodeIDFile, got)
	}
	if err := CheckNodeID(nil, raftDir, "n1"); err != nil {
		t.Fatalf("CheckNodeID(n1): %v", err)
	}
	cfg := testConfig("n9", nil)
	cfg.Dir, cfg.Info = raftDir, func() NodeInfo { return NodeInfo{} }
	_, err := Open(cfg, nil)
	if !errors.Is(err, ErrNodeIDChanged) || !strings.Contains(err.Error(), `belongs to node "n1"`) || !strings.Contains(err.Error(), `not to "n9"`) {
		t.Fatalf("Open as n9 on n1's folder: %v, want ErrNodeIDChanged naming n1 and n9", err)
	}
	if err := CheckNodeID(nil, raftDir, "n9"); !errors.Is(err, ErrNodeIDChanged) {
		t.Fatalf("CheckNodeID(n9): %v, want ErrNodeIDChanged", err)
	}
	after := snapshot()
	if len(after) != len(before) {
		t.Fatalf("the refused start changed the raft folder: %d files, then %d", len(before), len(after))
	}
	for p, b := range before {
		if after[p] != b {
			t.Fatalf("the refused start changed %s", p)
		}
	}
	startNode(t, n, testConfig("n1", nil))
	eventually(t, "n1 leads again", 10*time.Second, func() bool { return n.rep.IsLeader() })
	if got := n.rep.raft.LastIndex(); got < last {
		t.Fatalf("raft log ends at %d after the restart, was %d", got, last)
	}
	if evs, _ := n.store.ReadStream(t.Context(), "kept", events.ReadOptions{}); len(evs) != 1 {
		t.Fatalf("stream kept holds %d events, want 1", len(evs))
	}
}
