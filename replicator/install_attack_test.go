package replicator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
	return sendInstall(t, leader, victim, stream, info, nil)
}

// sendInstall is sendInstallSnapshot with the request changed by tweak
// (nil: unchanged) before it is sent: what else an attacker picks, such as
// the term in the snapshot's name or its configuration.
func sendInstall(t *testing.T, leader, victim *testNode, stream []byte, info pebblelog.SnapshotInfo, tweak func(*raft.InstallSnapshotRequest)) error {
	t.Helper()
	attacker, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 10*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	return sendInstallVia(t, attacker, leader, victim, stream, info, tweak)
}

// sendInstallVia is sendInstall through the attacker's transport (one
// that dials with a stolen member certificate, say).
func sendInstallVia(t *testing.T, attacker *raft.NetworkTransport, leader, victim *testNode, stream []byte, info pebblelog.SnapshotInfo,
	tweak func(*raft.InstallSnapshotRequest)) error {
	t.Helper()
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
	if tweak != nil {
		tweak(req)
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

// forgedTermAbove is how far above the victim's term an attacker names a
// forged snapshot: the term in its name is the RPC's last log term, the
// sender's to choose. Far above any real term, it makes the forged
// snapshot the newest of the snapshot store (names sort by term first),
// the one raft sends to a follower that needs a snapshot.
const forgedTermAbove = 1000

// snapshotFolders returns the folders of the snapshot store in dir whose
// names start with prefix (a snapshot's "term-index-"), in place, being
// written or being reaped alike.
func snapshotFolders(t *testing.T, dir, prefix string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// refuseForged sends victim a forged snapshot ahead of its ledger, named
// with a term forgedTermAbove above the victim's, and checks that it was
// refused. It returns the forged snapshot's header and the prefix of its
// folder's name in the victim's snapshot store.
func refuseForged(t *testing.T, leader, victim *testNode, tweak func(*raft.InstallSnapshotRequest)) (pebblelog.SnapshotInfo, string) {
	t.Helper()
	attacker, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 10*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	return refuseForgedVia(t, attacker, leader, victim, tweak)
}

// refuseForgedVia is refuseForged through the attacker's transport.
func refuseForgedVia(t *testing.T, attacker *raft.NetworkTransport, leader, victim *testNode,
	tweak func(*raft.InstallSnapshotRequest)) (pebblelog.SnapshotInfo, string) {
	t.Helper()
	stream, info := forgedSnapshot(t, victim.store.AppliedIndex()+100)
	term := victim.rep.raft.CurrentTerm() + forgedTermAbove
	err := sendInstallVia(t, attacker, leader, victim, stream, info, func(r *raft.InstallSnapshotRequest) {
		r.LastLogTerm = term
		if tweak != nil {
			tweak(r)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "does not extend") {
		t.Fatalf("InstallSnapshot of a forged history: %v; want the ledger's refusal (the snapshot does not extend the store)", err)
	}
	return info, fmt.Sprintf("%d-%d-", term, info.Applied)
}

// TestReplicator_RefusedSnapshotIsNotKept: raft saves an installed
// snapshot in its snapshot store before the FSM restores it, and used to
// keep it there when the ledger refused it. The refused forged snapshot
// then stayed the victim's newest: at its next start catchUpFromSnapshot
// restored it again, was refused again, and the node did not start (with
// NoSnapshotRestoreOnStart raft would have taken its applied index from
// it). Now the FSM removes the snapshot it refuses from the store, logs it
// with its id, the sender and the reason, and counts it; raft recorded
// nothing of it (its last snapshot index is unchanged), and the victim
// restarts on its own ledger and follows the leader.
func TestReplicator_RefusedSnapshotIsNotKept(t *testing.T) {
	var logs syncBuffer
	nodes := cluster(t, 2, func(c *Config) {
		if c.NodeID == "n2" {
			c.Logger = newBufferLogger(t, &logs, c.NodeID)
		}
	})
	leader, victim := nodes[0], nodes[1]
	for i := range 20 {
		if _, err := appendOne(t.Context(), leader.store, "orders", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
	snapDir := filepath.Join(victim.dir, "raft", "snapshots")
	lastSnap := snapshotIndex(victim.rep)
	before := victim.store.Head()

	_, forged := refuseForged(t, leader, victim, nil)

	if left := snapshotFolders(t, snapDir, forged); len(left) != 0 {
		t.Errorf("the refused snapshot is still in the victim's snapshot store: %v", left)
	}
	if got := snapshotIndex(victim.rep); got != lastSnap {
		t.Errorf("raft's last snapshot index is %d after the refusal, was %d", got, lastSnap)
	}
	if got := victim.store.Head(); got != before {
		t.Errorf("the victim's head is %+v after the refusal, was %+v", got, before)
	}
	checkRefusedCount(t, victim, 1)
	checkRefusalLogged(t, &logs, forged, "level=ERROR", "refused a raft snapshot", "sender="+leader.id, "sender_authenticated=false", "does not extend")

	victim.stop(t)
	startNode(t, victim, testConfig(victim.id, nil)) // fails the test if the node does not start
	if got := victim.store.Head(); got != before {
		t.Errorf("the victim restarted with head %+v, was %+v", got, before)
	}
	checkRefusedCount(t, victim, 0) // nothing left to refuse at the start
	stillServes(t, nodes, leading(t, nodes))
}

// leading waits until one of nodes leads and has established its term (a
// barrier applied), and returns it: a two-node cluster elects again after
// one of them restarted.
func leading(t *testing.T, nodes []*testNode) *testNode {
	t.Helper()
	var l *testNode
	eventually(t, "a leader", 20*time.Second, func() bool {
		for _, n := range nodes {
			if n.rep.raft.State() == raft.Leader && n.rep.ready.Load() == n.rep.raft.CurrentTerm() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// checkRefusalLogged checks that the log line naming the refused snapshot
// whose name starts with forged holds every one of want.
func checkRefusalLogged(t *testing.T, logs *syncBuffer, forged string, want ...string) {
	t.Helper()
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "snapshot="+forged) {
			line = l
		}
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Errorf("the log line naming the refused snapshot %s lacks %q: %q", forged, w, line)
		}
	}
}

// TestReplicator_RefusedSnapshotFromAMember: with mutual TLS, the sender
// of an InstallSnapshot is the member its certificate names
// (authtransport.go). A member's certificate (its key stolen, or the
// member faulty) streaming a forged history is refused by the ledger like
// anyone's; since it is a real fault of that member, the error line names
// it as authenticated, and the snapshot is removed and counted.
func TestReplicator_RefusedSnapshotFromAMember(t *testing.T) {
	pki := newTestPKI(t)
	var logs syncBuffer
	member := pki.member(t)
	nodes := cluster(t, 2, func(c *Config) {
		member(c)
		if c.NodeID == "n2" {
			c.Logger = newBufferLogger(t, &logs, c.NodeID)
		}
	})
	leader, victim := nodes[0], nodes[1]
	for i := range 10 {
		if _, err := appendOne(t.Context(), leader.store, "orders", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
	stolen := newAttacker(t, pki.tlsFor(t, "n1-stolen", NodeURI(leader.id).String()))
	_, forged := refuseForgedVia(t, stolen, leader, victim, nil)
	if left := snapshotFolders(t, filepath.Join(victim.dir, "raft", "snapshots"), forged); len(left) != 0 {
		t.Errorf("the refused snapshot is still in the victim's snapshot store: %v", left)
	}
	checkRefusedCount(t, victim, 1)
	checkRefusalLogged(t, &logs, forged, "level=ERROR", "from a cluster member", "sender="+leader.id, "sender_authenticated=true")
	stillServes(t, nodes, leader)
}

// TestReplicator_RefusedSnapshotIsNeverServed: the victim of a forged
// InstallSnapshot later leads, compacts its log, and a new, empty member
// joins; it needs a snapshot, and an empty ledger takes any history of its
// ledger id. Raft sends the newest snapshot of its store, and the forged
// one, named with a far higher term, used to be it: the joiner installed
// the forged history. Now the refused snapshot is gone from the store (and
// a received snapshot is never listed before its ledger took it): the
// joiner gets the genuine ledger, and ends with the honest root.
func TestReplicator_RefusedSnapshotIsNeverServed(t *testing.T) {
	small := func(c *Config) {
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = 16, 4, 50*time.Millisecond
	}
	nodes := cluster(t, 2, small)
	leader, victim := nodes[0], nodes[1]
	for i := range 20 {
		if _, err := appendOne(t.Context(), leader.store, "orders", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
	forgedInfo, _ := refuseForged(t, leader, victim, nil)

	if err := leader.rep.TransferLeadership(t.Context(), victim.id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the victim leads", 10*time.Second, func() bool {
		return victim.rep.raft.State() == raft.Leader && victim.rep.ready.Load() == victim.rep.raft.CurrentTerm()
	})
	for i := range 40 {
		if _, err := appendOne(t.Context(), victim.store, "led", i); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the victim compacts its log", 20*time.Second, func() bool {
		first, _ := victim.rep.logs.FirstIndex()
		return first > 1
	})
	honest := victim.store.Head()

	joiner := &testNode{id: "n3"}
	startNode(t, joiner, testConfig(joiner.id, small))
	if err := victim.rep.Join(t.Context(), JoinRequest{NodeID: joiner.id, RaftAddr: joiner.addr, LedgerID: testLedger}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the joiner installs a snapshot", 20*time.Second, func() bool { return joiner.rep.fsm.restores.Load() > 0 })
	if got := joiner.store.Head(); got.Root == forgedInfo.Head.Root || got.Size > honest.Size {
		t.Fatalf("the joiner installed the forged history: head %+v (the forged one is %+v, the honest one %+v)", got, forgedInfo.Head, honest)
	}
	converged(t, []*testNode{leader, victim, joiner}, victim)
	if got := joiner.store.Head(); got.Root != honest.Root {
		t.Fatalf("the joiner's root %x, the honest root %x", got.Root, honest.Root)
	}
}

// TestReplicator_RefusedSnapshotRemovesNoMember: the forged snapshot's
// configuration lacks the victim, at an index above the victim's newest
// configuration. The snapshot store used to tell the removal watch of every
// snapshot put in place, an install before its ledger saw it included:
// the refused snapshot's configuration was taken as committed, the victim
// believed it was removed and stopped for good. Now an installed
// snapshot's configuration counts only once its ledger took it: the
// victim goes on as a member.
func TestReplicator_RefusedSnapshotRemovesNoMember(t *testing.T) {
	nodes := cluster(t, 2, nil)
	leader, victim := nodes[0], nodes[1]
	for i := range 10 {
		if _, err := appendOne(t.Context(), leader.store, "orders", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
	beforeIndex, beforeMembers := victim.rep.watch.view()
	refuseForged(t, leader, victim, func(r *raft.InstallSnapshotRequest) {
		alone := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(leader.id), Address: raft.ServerAddress(leader.addr)}}}
		r.Configuration, r.ConfigurationIndex = raft.EncodeConfiguration(alone), r.LastLogIndex
	})
	// The maintain loop acts on a removal at its next tick; three ticks
	// without stopping mean it saw none.
	start := victim.rep.ticks.Load()
	eventually(t, "three maintain ticks of the victim", 10*time.Second, func() bool {
		select {
		case <-victim.rep.Done():
			t.Fatalf("the victim stopped after the refused snapshot: %v", victim.rep.Err())
		default:
		}
		return victim.rep.ticks.Load() >= start+3
	})
	if idx, members := victim.rep.watch.view(); idx != beforeIndex || !cmp.Equal(members, beforeMembers) {
		t.Errorf("the victim's committed configuration is %d %v after the refusal, was %d %v", idx, members, beforeIndex, beforeMembers)
	}
	stillServes(t, nodes, leader)
}

// TestReplicator_RefusedSnapshotOnDiskAtStart: a forged snapshot ahead of
// the ledger in the snapshot store at start, as a crash between raft saving
// an installed snapshot and the ledger refusing it leaves one (or a node
// that kept it before this fix). catchUpFromSnapshot restored it, the
// ledger refused it, and the node did not start. Now it is removed, logged
// and counted, and the node starts on its own ledger and serves.
func TestReplicator_RefusedSnapshotOnDiskAtStart(t *testing.T) {
	nodes := cluster(t, 2, nil)
	leader, victim := nodes[0], nodes[1]
	for i := range 20 {
		if _, err := appendOne(t.Context(), leader.store, "orders", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
	before := victim.store.Head()
	stream, info := forgedSnapshot(t, victim.store.AppliedIndex()+100)
	term := victim.rep.raft.CurrentTerm() + forgedTermAbove
	victim.stop(t)
	snapDir := filepath.Join(victim.dir, "raft", "snapshots")
	plantSnapshot(t, snapDir, term, info.Applied, stream)
	forged := fmt.Sprintf("%d-%d-", term, info.Applied)

	startNode(t, victim, testConfig(victim.id, nil)) // fails the test if the node does not start
	if left := snapshotFolders(t, snapDir, forged); len(left) != 0 {
		t.Errorf("the refused snapshot is still in the snapshot store: %v", left)
	}
	if got := victim.store.Head(); got != before {
		t.Errorf("the victim started with head %+v, was %+v", got, before)
	}
	checkRefusedCount(t, victim, 1)
	stillServes(t, nodes, leading(t, nodes))
}

// plantSnapshot puts stream in the snapshot store in dir as raft puts an
// installed snapshot there (a sink no FSM persisted), at term and index.
func plantSnapshot(t *testing.T, dir string, term, index uint64, stream []byte) {
	t.Helper()
	snaps, err := OpenSnapshotStore(dir, nil, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(stream); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkRefusedCount checks that n counts want refused snapshots.
func checkRefusedCount(t *testing.T, n *testNode, want uint64) {
	t.Helper()
	st, err := n.rep.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.RefusedSnapshots != want {
		t.Errorf("%s: Status.RefusedSnapshots = %d, want %d", n.id, st.RefusedSnapshots, want)
	}
}

// TestReplicator_RefusedSnapshotTheLogNeeds: a node of an earlier version
// with SnapshotRetain 1 kept a refused forged snapshot and reaped its own
// newest one in its favour, after raft had compacted its log up to that
// one. Without the forged snapshot raft would start from no snapshot and
// could not replay the entries its log no longer holds (raft panics when
// it applies a missing entry): the node does not start, says why, and
// the forged snapshot is left in place for whoever looks into it.
func TestReplicator_RefusedSnapshotTheLogNeeds(t *testing.T) {
	small := func(c *Config) {
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval, c.SnapshotRetain = 16, 4, 50*time.Millisecond, 1
	}
	nodes := cluster(t, 2, small)
	leader, victim := nodes[0], nodes[1]
	for i := range 40 {
		if _, err := appendOne(t.Context(), leader.store, "orders", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
	eventually(t, "the victim compacts its log", 20*time.Second, func() bool {
		first, _ := victim.rep.logs.FirstIndex()
		return first > 1
	})
	stream, info := forgedSnapshot(t, victim.store.AppliedIndex()+100)
	term := victim.rep.raft.CurrentTerm() + forgedTermAbove
	victim.stop(t)
	snapDir := filepath.Join(victim.dir, "raft", "snapshots")
	for _, own := range snapshotFolders(t, snapDir, "") {
		if err := os.RemoveAll(filepath.Join(snapDir, own)); err != nil {
			t.Fatal(err)
		}
	}
	plantSnapshot(t, snapDir, term, info.Applied, stream)
	forged := fmt.Sprintf("%d-%d-", term, info.Applied)

	st, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(victim.dir, "ledger"), LedgerID: testLedger, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := st.Head()
	cfg := testConfig(victim.id, small)
	cfg.Dir, cfg.RaftAddr = filepath.Join(victim.dir, "raft"), victim.addr
	cfg.Info, cfg.Logger = func() NodeInfo { return NodeInfo{} }, testLogger(t, victim.id)
	rep, err := Open(cfg, st)
	if err == nil {
		_ = rep.Close()
		t.Fatal("the node started without the entries its raft log lacks")
	}
	if !errors.Is(err, pebblelog.ErrSnapshotForks) || !strings.Contains(err.Error(), "cannot start on its own ledger") {
		t.Errorf("Open: %v; want the ledger's refusal and why the node cannot start without the snapshot", err)
	}
	if left := snapshotFolders(t, snapDir, forged); len(left) != 1 {
		t.Errorf("the refused snapshot's folders: %v, want it left in place", left)
	}
	if got := st.Head(); got != before {
		t.Errorf("the ledger's head is %+v, was %+v", got, before)
	}
}

// TestReplicator_KeptSnapshotBehindTheLedger: the forged snapshot holds
// fewer events than the victim, at a raft index below its ledger's (3
// forged events at index 3), but the RPC names it at an index far ahead
// (and a far higher term). pebblelog.Store.Restore keeps the store for a
// snapshot that is not newer than it, without checking it, and returns
// nil; so the FSM succeeds, raft answers success, records the forged
// index as its last snapshot and applied index, and keeps the snapshot as
// its newest. The victim then skips every real entry below that index as
// already applied (it stops following the leader), and, leading, would
// send the forged history to a joiner.
//
// TODO(#20): not fixed here. Refusing every snapshot the ledger keeps is
// wrong: a leader whose InstallSnapshot answer was lost sends the same
// snapshot again, and the follower, which installed it, keeps its store;
// refusing it would loop the leader on it for good. A fix needs the
// ledger to check that a snapshot it keeps is a prefix of its history
// (the root at the snapshot's size), and the replicator to bound the raft
// index a kept snapshot may claim; see the report of the refusedsnap
// branch.
func TestReplicator_KeptSnapshotBehindTheLedger(t *testing.T) {
	t.Skip("TODO(#20): a snapshot behind the ledger, named far ahead, is accepted without a check (see the comment)")
	nodes := cluster(t, 2, nil)
	leader, victim := nodes[0], nodes[1]
	for i := range 20 {
		if _, err := appendOne(t.Context(), leader.store, "orders", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, leader)
	stream, info := forgedSnapshot(t, 3)
	term := victim.rep.raft.CurrentTerm() + forgedTermAbove
	far := victim.store.AppliedIndex() + 100000
	err := sendInstall(t, leader, victim, stream, info, func(r *raft.InstallSnapshotRequest) { r.LastLogTerm, r.LastLogIndex = term, far })
	if err == nil {
		t.Error("InstallSnapshot of a forged history behind the ledger, named far ahead: success; want it refused")
	}
	if got := snapshotIndex(victim.rep); got == far {
		t.Errorf("raft's last snapshot index is the forged %d", got)
	}
	if left := snapshotFolders(t, filepath.Join(victim.dir, "raft", "snapshots"), fmt.Sprintf("%d-%d-", term, far)); len(left) != 0 {
		t.Errorf("the forged snapshot is in the victim's snapshot store: %v", left)
	}
	stillServes(t, nodes, leader)
}
