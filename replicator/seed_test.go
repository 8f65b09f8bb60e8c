package replicator

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

// TestReplicator_BootstrapSeedsFromExistingLedger: a node that bootstraps
// a new cluster over a ledger that already holds events (a single node's
// ledger, or one restored from a cluster member's backup, which records
// its old cluster's raft index) seeds the cluster with a snapshot. New
// entries follow the ledger's raft index instead of being skipped as
// already applied, and a member that joins installs the snapshot instead
// of replaying a log that lacks the seed's history: every node ends with
// the same bytes. With BootstrapCluster's log from index 1, the joiner
// would fork (single node) and the seed would drop entries (restored
// member).
func TestReplicator_BootstrapSeedsFromExistingLedger(t *testing.T) {
	tests := []struct {
		name string
		// fill writes the seed's history into a store that is not a member.
		fill        func(t *testing.T, st *pebblelog.Store)
		wantApplied uint64 // the seed snapshot's index
	}{
		{"a single node's ledger", func(t *testing.T, st *pebblelog.Store) {
			appendRange(t, st, "single", 20)
		}, 1},
		{"a cluster member's ledger", func(t *testing.T, st *pebblelog.Store) {
			for idx := uint64(2); idx <= 40; idx++ {
				b := &events.Batch{RecordedAt: time.Unix(1_700_000_000+int64(idx), 0).UTC(), Appends: []events.AppendRequest{{
					Streams: []events.StreamAppend{{Stream: "member", Events: []events.Proposed{{ID: uuid.New(), Type: "Replicated",
						Data: []byte(fmt.Sprintf(`{"i":%d}`, idx)), Metadata: []byte(`{}`)}}}}}}}
				if _, err := st.ApplyReplicated(b, idx); err != nil {
					t.Fatal(err)
				}
			}
		}, 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seed := &testNode{id: "n1", dir: t.TempDir()}
			st, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(seed.dir, "ledger"), LedgerID: testLedger, CheckpointInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			tc.fill(t, st)
			history := st.Head()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}

			cfg := testConfig("n1", nil)
			cfg.Bootstrap = true
			startNode(t, seed, cfg)
			if got := seed.store.AppliedIndex(); got != tc.wantApplied {
				t.Fatalf("seed applied index %d, want %d", got, tc.wantApplied)
			}
			eventually(t, "n1 leads", 10*time.Second, func() bool { return seed.rep.raft.State() == raft.Leader })
			appendRange(t, seed.store, "after-seed", 5)
			if got := seed.store.Head().Size; got != history.Size+5 {
				t.Fatalf("seed head %d after 5 appends on a history of %d", got, history.Size)
			}

			joiner := &testNode{id: "n2"}
			startNode(t, joiner, testConfig("n2", nil))
			if err := seed.rep.Join(t.Context(), wire.JoinRequest{NodeID: "n2", RaftAddr: joiner.addr, LedgerID: testLedger}); err != nil {
				t.Fatal(err)
			}
			converged(t, []*testNode{seed, joiner}, seed)
			if got := joiner.rep.fsm.restores.Load(); got != 1 {
				t.Fatalf("the joiner installed %d snapshots, want the seed's", got)
			}
			if _, err := appendOne(t.Context(), seed.store, "after-join", 0); err != nil {
				t.Fatal(err)
			}
			converged(t, []*testNode{seed, joiner}, seed)

			// A restart finds the raft state: no second seed, the same head.
			want := seed.store.Head()
			joiner.stop(t)
			seed.stop(t)
			startNode(t, seed, testConfig("n1", nil))
			if got := seed.store.Head(); got != want {
				t.Fatalf("head after restart %+v, want %+v", got, want)
			}
		})
	}
}
