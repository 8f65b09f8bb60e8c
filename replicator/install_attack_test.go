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
	"github.com/greffe/greffe/wire"
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
	appendRange(t, leader.store, "orders", 20)
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
	appendRange(t, leader.store, "after", 5)
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
	appendRange(t, leader.store, "orders", 20)
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
	appendRange(t, leader.store, "orders", 10)
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
	appendRange(t, leader.store, "orders", 20)
	converged(t, nodes, leader)
	forgedInfo, _ := refuseForged(t, leader, victim, nil)

	if err := leader.rep.TransferLeadership(t.Context(), victim.id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the victim leads", 10*time.Second, func() bool {
		return victim.rep.raft.State() == raft.Leader && victim.rep.ready.Load() == victim.rep.raft.CurrentTerm()
	})
	appendRange(t, victim.store, "led", 40)
	eventually(t, "the victim compacts its log", 20*time.Second, func() bool {
		first, _ := victim.rep.logs.FirstIndex()
		return first > 1
	})
	honest := victim.store.Head()

	joiner := &testNode{id: "n3"}
	startNode(t, joiner, testConfig(joiner.id, small))
	if err := victim.rep.Join(t.Context(), wire.JoinRequest{NodeID: joiner.id, RaftAddr: joiner.addr, LedgerID: testLedger}); err != nil {
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
	appendRange(t, leader.store, "orders", 10)
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
	appendRange(t, leader.store, "orders", 20)
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

// TestReplicator_ReceivedSnapshotLeftByACrash: a crash between raft
// saving a received snapshot and the ledger's answer leaves it in the
// snapshot store, listed, and marked received; its name was vetted before
// it was put in place, its content not. catchUpFromSnapshot used to check
// only one ahead of the ledger: one at or behind it stayed, raft's newest
// snapshot, served to followers as the state at its index. Now one the
// ledger never took is checked whether or not it is ahead: a history behind
// the ledger, or another history at its own raft index, is removed,
// logged and counted, and the node starts on its own ledger; the ledger's
// own state (an install the ledger made just before the crash, or a
// resend) is kept, and marked taken.
func TestReplicator_ReceivedSnapshotLeftByACrash(t *testing.T) {
	// Three members: the leader keeps its quorum while the victim
	// restarts.
	nodes := cluster(t, 3, nil)
	victim := nodes[2]
	snapDir := filepath.Join(victim.dir, "raft", "snapshots")
	ownState := func(t *testing.T) ([]byte, pebblelog.SnapshotInfo) {
		// The victim's ledger, opened while the node is stopped.
		st, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(victim.dir, "ledger"), LedgerID: testLedger, CheckpointInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
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
	cases := []struct {
		name    string
		content func(t *testing.T, applied uint64) ([]byte, pebblelog.SnapshotInfo)
		kept    bool
	}{
		{"another history at the ledger's own raft index", func(t *testing.T, applied uint64) ([]byte, pebblelog.SnapshotInfo) {
			return forgedSnapshot(t, applied)
		}, false},
		{"a history behind the ledger", func(t *testing.T, _ uint64) ([]byte, pebblelog.SnapshotInfo) { return forgedSnapshot(t, 3) }, false},
		{"the ledger's own state", func(t *testing.T, _ uint64) ([]byte, pebblelog.SnapshotInfo) { return ownState(t) }, true},
	}
	// One case after the other on the same cluster, without subtests: the
	// victim restarted by a case serves the next (a subtest's cleanup
	// would stop it).
	for i, tc := range cases {
		func() {
			t.Logf("case %q", tc.name)
			leader := leading(t, nodes)
			for j := range 10 {
				if _, err := appendOne(t.Context(), leader.store, "crash-left", 10*i+j); err != nil {
					t.Fatal(err)
				}
			}
			converged(t, nodes, leader)
			applied := victim.store.AppliedIndex()
			// A name the vet lets through: the victim's last log entry.
			index := victim.rep.raft.LastIndex()
			var entry raft.Log
			if err := victim.rep.logs.GetLog(index, &entry); err != nil {
				t.Fatal(err)
			}
			before := victim.store.Head()
			victim.stop(t)
			stream, info := tc.content(t, applied)
			if info.Applied > applied {
				t.Fatalf("%s: the planted snapshot is at raft index %d, ahead of the ledger's %d", tc.name, info.Applied, applied)
			}
			plantSnapshot(t, snapDir, entry.Term, index, stream)
			planted := fmt.Sprintf("%d-%d-", entry.Term, index)

			startNode(t, victim, testConfig(victim.id, nil)) // fails the test if the node does not start

			left := snapshotFolders(t, snapDir, planted)
			switch {
			case tc.kept && (len(left) != 1 || victim.rep.fsm.snaps.received(left[0])):
				t.Errorf("%s: the planted snapshot's folders: %v; want it kept, taken", tc.name, left)
			case !tc.kept && len(left) != 0:
				t.Errorf("%s: the refused snapshot is still in the snapshot store: %v", tc.name, left)
			}
			if got := victim.store.Head(); got != before {
				t.Errorf("%s: the victim started with head %+v, was %+v", tc.name, got, before)
			}
			want := uint64(1) // counted since this start
			if tc.kept {
				want = 0
			}
			checkRefusedCount(t, victim, want)
			stillServes(t, nodes, leading(t, nodes))
		}()
	}
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
	appendRange(t, leader.store, "orders", 40)
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
// (and a far higher term). pebblelog.Store.Restore used to keep the store
// for a snapshot that is not newer than it, without reading it, and return
// nil; so the FSM succeeded, raft answered success, recorded the forged
// index as its last snapshot and applied index, and kept the snapshot as
// its newest: the victim then skipped every real entry below that index as
// already applied (it stopped following the leader), and, leading, would
// have sent the forged history to a joiner.
//
// Now the name is vetted before raft puts the snapshot in place
// (snapindex.go): a snapshot whose content this node took in must be
// named at an entry raft holds, and be the ledger's own state, which the
// ledger checks by its own tree (pebblelog's checkNotNewer). Each way an
// attacker can pair a content with a name is refused, logged, counted,
// and nothing is left in the snapshot store; raft's last snapshot and
// applied index stay its own, and the victim goes on applying the
// leader's entries. The honest pair, the ledger's own state under the
// name its leader gave it (a leader sending its snapshot again), is kept:
// TestReplicator_InstallAnswerLost is that case with a real leader.
func TestReplicator_KeptSnapshotBehindTheLedger(t *testing.T) {
	nodes := cluster(t, 2, nil)
	leader, victim := nodes[0], nodes[1]
	appendRange(t, leader.store, "orders", 20)
	converged(t, nodes, leader)
	snapDir := filepath.Join(victim.dir, "raft", "snapshots")
	far := func() uint64 { return victim.store.AppliedIndex() + 100000 }
	farTerm := func() uint64 { return victim.rep.raft.CurrentTerm() + forgedTermAbove }
	// held is an index and term the victim's raft holds: its last
	// applied entry, from its own log.
	held := func(t *testing.T) (uint64, uint64) {
		idx := victim.rep.raft.AppliedIndex()
		var entry raft.Log
		if err := victim.rep.logs.GetLog(idx, &entry); err != nil {
			t.Fatal(err)
		}
		return idx, entry.Term
	}
	forgedBehind := func(t *testing.T) ([]byte, pebblelog.SnapshotInfo) { return forgedSnapshot(t, 3) }
	forgedAtIndex := func(t *testing.T) ([]byte, pebblelog.SnapshotInfo) {
		return forgedSnapshot(t, victim.store.AppliedIndex())
	}

	cases := []struct {
		name string
		// content is the stream sent (nil: the leader's own snapshot);
		// named the index and term the RPC names it at (meta: the
		// leader's name for its own snapshot).
		content func(t *testing.T) ([]byte, pebblelog.SnapshotInfo)
		named   func(t *testing.T, meta *raft.SnapshotMeta) (uint64, uint64)
		refusal string // what the refusal says
	}{
		{"a forged history behind the ledger, named far ahead", forgedBehind,
			func(*testing.T, *raft.SnapshotMeta) (uint64, uint64) { return far(), farTerm() }, "after this node's applied index"},
		{"a forged history behind the ledger, named at an entry raft holds", forgedBehind,
			func(t *testing.T, _ *raft.SnapshotMeta) (uint64, uint64) { return held(t) }, "holds its ledger's at"},
		{"another history at the ledger's own raft index, named at an entry raft holds", forgedAtIndex,
			func(t *testing.T, _ *raft.SnapshotMeta) (uint64, uint64) { return held(t) }, "does not extend"},
		{"the ledger's own state, named far ahead", nil,
			func(*testing.T, *raft.SnapshotMeta) (uint64, uint64) { return far(), farTerm() }, "after this node's applied index"},
		{"the ledger's own state, named at the leader's index with another term", nil,
			func(_ *testing.T, m *raft.SnapshotMeta) (uint64, uint64) { return m.Index, m.Term + 1 }, "not this node's entry"},
		{"the ledger's own state, named before its last batch", nil,
			func(_ *testing.T, m *raft.SnapshotMeta) (uint64, uint64) {
				return victim.store.AppliedIndex() - 1, m.Term
			}, "after the index"},
		{"no ledger snapshot at all, named at an entry raft holds", func(*testing.T) ([]byte, pebblelog.SnapshotInfo) {
			return []byte("not a ledger snapshot"), pebblelog.SnapshotInfo{}
		}, func(t *testing.T, _ *raft.SnapshotMeta) (uint64, uint64) { return held(t) }, "bad snapshot"},
		{"the ledger's own state, under the leader's name", nil,
			func(_ *testing.T, m *raft.SnapshotMeta) (uint64, uint64) { return m.Index, m.Term }, ""},
	}
	refused := uint64(0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The leader's own snapshot of the state both hold, and the
			// name it gives it, once the victim applied up to it.
			meta, honest := takeSnapshot(t, leader)
			eventually(t, "the victim applies up to the leader's snapshot", 10*time.Second, func() bool {
				return victim.rep.raft.AppliedIndex() >= meta.Index
			})
			content := tc.content
			if content == nil {
				content = func(t *testing.T) ([]byte, pebblelog.SnapshotInfo) {
					info, err := pebblelog.ReadSnapshotInfo(bytes.NewReader(honest))
					if err != nil {
						t.Fatal(err)
					}
					if got := victim.store.AppliedIndex(); info.Applied != got {
						t.Fatalf("the leader's snapshot holds the state at raft index %d, the victim's ledger is at %d", info.Applied, got)
					}
					return honest, info
				}
			}
			stream, info := content(t)
			index, term := tc.named(t, meta)
			lastSnap, lastApplied := snapshotIndex(victim.rep), victim.rep.raft.AppliedIndex()
			before := snapshotFolders(t, snapDir, "")

			err := sendInstall(t, leader, victim, stream, info, func(r *raft.InstallSnapshotRequest) { r.LastLogIndex, r.LastLogTerm = index, term })

			if tc.refusal == "" {
				// Kept: listed, taken, and raft's last snapshot.
				if err != nil {
					t.Fatalf("InstallSnapshot: %v; want it kept", err)
				}
				if got := snapshotIndex(victim.rep); got != index {
					t.Errorf("raft's last snapshot index is %d, want the leader's %d", got, index)
				}
				kept := snapshotFolders(t, snapDir, fmt.Sprintf("%d-%d-", term, index))
				if len(kept) == 0 || victim.rep.fsm.snaps.received(kept[len(kept)-1]) {
					t.Errorf("the victim's folders of the leader's snapshot: %v; want it there, taken", kept)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("InstallSnapshot: %v; want it refused with %q", err, tc.refusal)
				}
				refused++
				if got := snapshotIndex(victim.rep); got != lastSnap {
					t.Errorf("raft's last snapshot index is %d, was %d", got, lastSnap)
				}
				if got := victim.rep.raft.AppliedIndex(); got < lastApplied || got > victim.rep.raft.LastIndex() {
					t.Errorf("raft's applied index is %d, was %d, its last log index is %d", got, lastApplied, victim.rep.raft.LastIndex())
				}
				if left := snapshotFolders(t, snapDir, ""); !cmp.Equal(left, before) {
					t.Errorf("the victim's snapshot folders are %v, were %v", left, before)
				}
			}
			checkRefusedCount(t, victim, refused)
			stillServes(t, nodes, leader) // the victim applies the leader's entries
		})
	}
}

// takeSnapshot has n's raft take a snapshot now and returns its metadata
// and state.
func takeSnapshot(t *testing.T, n *testNode) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	f := n.rep.raft.Snapshot()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return meta, b
}
