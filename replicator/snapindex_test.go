package replicator

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events/pebblelog"
)

// TestCheckSnapshotIndex covers every rule of snapindex.go on one node:
// raft applied up to index 50 here, its ledger's last batch is at 47 (the
// entries after it were no-ops and configuration entries), and raft holds
// the entries 30 to 50 in its log, at term 3, and its last snapshot at
// index 40, term 3.
func TestCheckSnapshotIndex(t *testing.T) {
	view := indexView{raftApplied: 50, ledgerApplied: 47, holds: func(index, term uint64) bool {
		return term == 3 && (index >= 30 && index <= 50 || index == 40)
	}}
	cases := []struct {
		name        string
		applied     uint64 // the content's raft index (its header's)
		index, term uint64 // the name the RPC gives it
		view        *indexView
		refusal     string // "": allowed
	}{
		{"ahead of the node, named after its last batch", 80, 85, 4, nil, ""},
		{"ahead of the node, named at its last batch", 80, 80, 4, nil, ""},
		{"named before its last batch", 80, 79, 4, nil, "after the index 79"},
		{"the ledger's state, named at raft's applied index (a resend)", 47, 50, 3, nil, ""},
		{"the ledger's state, named at its last batch", 47, 47, 3, nil, ""},
		{"the ledger's state, named at raft's last snapshot", 40, 40, 3, nil, ""},
		{"the ledger's state, named far ahead", 47, 100047, 3, nil, "after this node's applied index 50"},
		{"behind the ledger, named far ahead", 3, 100047, 1003, nil, "after this node's applied index 50"},
		{"the ledger's state, named just after raft's applied index", 47, 51, 3, nil, "after this node's applied index 50"},
		{"named at an entry raft holds, with another term", 47, 48, 1003, nil, "not this node's entry"},
		{"named at an entry raft no longer holds", 10, 20, 3, nil, "not this node's entry"},
		{
			// After a restart, before raft replayed its log: the ledger
			// is ahead of raft's applied index.
			"not newer than the ledger, which is ahead of raft", 45, 100045, 3,
			&indexView{raftApplied: 40, ledgerApplied: 47, holds: view.holds}, "cannot be checked",
		},
		{"newer than the ledger, which is ahead of raft", 48, 100045, 3,
			&indexView{raftApplied: 40, ledgerApplied: 47, holds: view.holds}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := view
			if tc.view != nil {
				v = *tc.view
			}
			err := checkSnapshotIndex(raft.SnapshotMeta{Index: tc.index, Term: tc.term}, pebblelog.SnapshotInfo{Applied: tc.applied}, v)
			switch {
			case tc.refusal == "" && err != nil:
				t.Fatalf("refused: %v; want it allowed", err)
			case tc.refusal != "" && (!errors.Is(err, ErrSnapshotIndex) || !strings.Contains(err.Error(), tc.refusal)):
				t.Fatalf("checkSnapshotIndex: %v; want ErrSnapshotIndex saying %q", err, tc.refusal)
			case tc.refusal != "" && !isRefusal(err):
				t.Fatalf("%v is not counted as a refusal", err)
			}
		})
	}
}

// TestNotLedgerState: once every entry raft applied reached the FSM, a
// received snapshot not newer than raft's applied index must be the
// ledger's own state.
func TestNotLedgerState(t *testing.T) {
	cases := []struct {
		name    string
		applied uint64 // the content's raft index
		refused bool
	}{
		{"newer than raft's applied index", 51, false},
		{"the ledger's own index", 47, false},
		{"behind the ledger", 3, true},
		{"after the ledger, at an entry raft applied that held no batch", 49, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := notLedgerState(100, pebblelog.SnapshotInfo{Applied: tc.applied}, 50, 47)
			if tc.refused != (err != nil) || err != nil && !errors.Is(err, ErrSnapshotIndex) {
				t.Fatalf("notLedgerState: %v; want refused %v (ErrSnapshotIndex)", err, tc.refused)
			}
		})
	}
}
