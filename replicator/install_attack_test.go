package replicator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// forgedSnapshot is what an attacker who knows the ledger id (GET
// /v1/info tells anyone) builds: a store of that ledger holding another
// history, at raft indexes up to through, streamed as a snapshot.
func forgedSnapshot(t *testing.T, through uint64) ([]byte, pebblelog.SnapshotInfo) {
	t.Helper()
	st, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(t.TempDir(), "forged"), LedgerID: testLedger, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for idx := uint64(1); idx <= through; idx++ {
		e := events.Proposed{ID: uuid.New(), Type: "ApprovalGranted",
			Data: json.RawMessage(fmt.Sprintf(`{"approver":"owner","kind":"activation","forged":%d}`, idx)), Metadata: json.RawMessage(`{}`)}
		b := &events.Batch{RecordedAt: time.Unix(1_700_000_000+int64(idx), 0).UTC(), Appends: []events.AppendRequest{
			{Streams: []events.StreamAppend{{Stream: "snap", Expected: events.ExpectAny, Events: []events.Proposed{e}}}},
		}}
		if _, err := st.ApplyReplicated(b, idx); err != nil {
			t.Fatal(err)
		}
	}
	sn, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sn.Info()
}

// TestReplicator_InstallSnapshotOfForgedHistory is issue #20, finding 3,
// over the wire: a process that reaches a follower's raft port sends one
// InstallSnapshot RPC through hashicorp/raft's own TCP transport, its
// header naming the leader (id, address, current term), streaming a
// snapshot of a forged history of the same ledger, longer and at a higher
// raft index than the follower's. Before, raft answered success: the
// follower's acknowledged events were replaced and it went on as if
// nothing happened. Now the follower's FSM refuses the snapshot (its tree
// does not extend the follower's head and signed checkpoints), raft
// answers the RPC with that error, and the follower keeps its ledger and
// goes on replicating the real leader's entries.
func TestReplicator_InstallSnapshotOfForgedHistory(t *testing.T) {
	nodes := cluster(t, 2, nil)
	leader, victim := nodes[0], nodes[1]
	for i := range 20 {
		if _, err := appendOne(t.Context(), leader.store, "orders", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
	before, err := victim.store.ReadRaw(t.Context(), 0, victim.store.Head().Size)
	if err != nil {
		t.Fatal(err)
	}
	beforeHead := victim.store.Head()
	stream, info := forgedSnapshot(t, victim.store.AppliedIndex()+100)
	if info.Head.Size <= beforeHead.Size || info.Applied <= victim.store.AppliedIndex() {
		t.Fatalf("the forged snapshot (%d events at index %d) is not ahead of the victim (%d at %d)",
			info.Head.Size, info.Applied, beforeHead.Size, victim.store.AppliedIndex())
	}

	err = sendInstallSnapshot(t, leader, victim, stream, info)
	if err == nil {
		t.Fatal("InstallSnapshot of a forged history: success; want it refused")
	}
	if !strings.Contains(err.Error(), "does not extend") {
		t.Errorf("InstallSnapshot refused with %q, want the FSM's refusal (the snapshot does not extend the store)", err)
	}

	// The ledger is as it was, and the node still follows the real leader.
	if got := victim.store.Head(); got != beforeHead {
		t.Fatalf("victim head %+v after the attack, was %+v", got, beforeHead)
	}
	after, err := victim.store.ReadRaw(t.Context(), 0, beforeHead.Size)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(before, after) {
		t.Fatal("the victim's acknowledged events changed")
	}
	if got := victim.rep.fsm.restores.Load(); got != 0 {
		t.Fatalf("the victim counts %d snapshot installs", got)
	}
	if f := victim.store.Failure(); f != nil {
		t.Fatalf("the victim's store failed: %v", f)
	}
	for i := range 5 {
		if _, err := appendOne(t.Context(), leader.store, "after", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
}

// sendInstallSnapshot sends one InstallSnapshot RPC of stream to victim
// through hashicorp/raft's own TCP transport, as leader would send it: the
// header names the leader's id and address, at the victim's current term.
// It returns the RPC's error, or one for an answer without success.
func sendInstallSnapshot(t *testing.T, leader, victim *testNode, stream []byte, info pebblelog.SnapshotInfo) error {
	t.Helper()
	attacker, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 10*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	conf := raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: raft.ServerID(leader.id), Address: raft.ServerAddress(leader.addr)},
		{Suffrage: raft.Voter, ID: raft.ServerID(victim.id), Address: raft.ServerAddress(victim.addr)},
	}}
	term := victim.rep.raft.CurrentTerm()
	req := &raft.InstallSnapshotRequest{
		RPCHeader:       raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.id), Addr: []byte(leader.addr)},
		SnapshotVersion: raft.SnapshotVersionMax, Term: term,
		Leader:       attacker.EncodePeer(raft.ServerID(leader.id), raft.ServerAddress(leader.addr)),
		LastLogIndex: info.Applied, LastLogTerm: term,
		Configuration: raft.EncodeConfiguration(conf), ConfigurationIndex: 1,
		Size: int64(len(stream)),
	}
	var resp raft.InstallSnapshotResponse
	if err := attacker.InstallSnapshot(raft.ServerID(victim.id), raft.ServerAddress(victim.addr), req, &resp, bytes.NewReader(stream)); err != nil {
		return err
	}
	if !resp.Success {
		return fmt.Errorf("answered without success (term %d)", resp.Term)
	}
	return nil
}

// TestReplicator_RefusedSnapshotIsNotKept: raft saves an installed
// snapshot in its snapshot store before the FSM restores it, and keeps it
// there when the FSM refuses it. The refused forged snapshot then stays the
// victim's newest: at its next start catchUpFromSnapshot restores it again,
// is refused again, and the node does not start; and were the victim to
// lead, raft would send it to a follower that needs a snapshot (a new,
// empty member takes any history of its ledger).
//
// TODO(#20): needs a hook in the replicator (not in this change's area): a
// snapshot the ledger refuses (pebblelog.ErrSnapshotForks, ErrBadSnapshot,
// ErrIncompatible) is removed from the SnapshotStore, at install and in
// catchUpFromSnapshot; see the report of the snaprestore branch.
func TestReplicator_RefusedSnapshotIsNotKept(t *testing.T) {
	t.Skip("TODO(#20): the replicator keeps a snapshot its ledger refused (needs the hook described above)")
	nodes := cluster(t, 2, nil)
	leader, victim := nodes[0], nodes[1]
	for i := range 20 {
		if _, err := appendOne(t.Context(), leader.store, "orders", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
	stream, info := forgedSnapshot(t, victim.store.AppliedIndex()+100)
	if err := sendInstallSnapshot(t, leader, victim, stream, info); err == nil {
		t.Fatal("the forged snapshot was installed")
	}
	applied := victim.store.AppliedIndex()
	victim.stop(t)
	snaps, err := OpenSnapshotStore(filepath.Join(victim.dir, "raft", "snapshots"), nil, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := snaps.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metas {
		if m.Index > applied {
			t.Errorf("the refused snapshot %s (index %d, ahead of the ledger's %d) is still in the victim's snapshot store", m.ID, m.Index, applied)
		}
	}
	startNode(t, victim, testConfig(victim.id, nil)) // fails the test if the node does not start
	for i := range 5 {
		if _, err := appendOne(t.Context(), leader.store, "after", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
}
