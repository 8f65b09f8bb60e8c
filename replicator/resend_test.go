package replicator

import (
	"bufio"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/wire"
)

// lossyLink is a TCP proxy in front of a raft port that loses the answers
// to InstallSnapshot RPCs: it reads raft's wire format (net_transport.go in
// hashicorp/raft: a type byte and a msgpack request, then, for an
// InstallSnapshot, the snapshot's bytes) on the way in, and when the
// follower answers an InstallSnapshot while answers are to be lost, it
// closes the connection instead of passing the answer on, as a network
// that fails at that moment would. Everything else goes through as it is.
type lossyLink struct {
	ln net.Listener
	wg sync.WaitGroup
	mu struct {
		sync.Mutex
		target   string
		lose     int           // answers still to lose
		installs []installSeen // every InstallSnapshot carried, in order
		conns    map[net.Conn]struct{}
	}
}

// installSeen is one InstallSnapshot the link carried: the name the
// leader gave the snapshot, and whether its answer was lost or passed on.
type installSeen struct {
	Index, Term    uint64
	Lost, Answered bool
}

func newLossyLink(t *testing.T) *lossyLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &lossyLink{ln: ln}
	l.mu.conns = map[net.Conn]struct{}{}
	l.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.wg.Go(func() { l.pipe(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		l.mu.Lock()
		for c := range l.mu.conns {
			_ = c.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
	})
	return l
}

func (l *lossyLink) addr() string { return l.ln.Addr().String() }

func (l *lossyLink) to(target string) {
	l.mu.Lock()
	l.mu.target = target
	l.mu.Unlock()
}

// loseNext makes the link lose the next n answers to an InstallSnapshot.
func (l *lossyLink) loseNext(n int) {
	l.mu.Lock()
	l.mu.lose = n
	l.mu.Unlock()
}

// seen returns the InstallSnapshot RPCs the link carried.
func (l *lossyLink) seen() []installSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]installSeen(nil), l.mu.installs...)
}

func (l *lossyLink) track(cs ...net.Conn) {
	l.mu.Lock()
	for _, c := range cs {
		l.mu.conns[c] = struct{}{}
	}
	l.mu.Unlock()
}

func (l *lossyLink) pipe(down net.Conn) {
	defer down.Close()
	l.mu.Lock()
	target := l.mu.target
	l.mu.Unlock()
	if target == "" {
		return
	}
	up, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	l.track(down, up)
	// install is the InstallSnapshot whose answer is the next one up
	// sends: raft waits for the answer to one RPC before it sends the next
	// on a connection (but for pipelined AppendEntries, which carry no
	// snapshot).
	var install atomic.Int64
	install.Store(-1)
	l.wg.Go(func() {
		in := io.TeeReader(down, up)
		l.requests(in, &install)
		_, _ = io.Copy(io.Discard, in) // what the parser does not follow goes through as it is
		_ = up.Close()
	})
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if i := install.Swap(-1); i >= 0 && l.answer(int(i)) {
				return // the deferred closes: the leader reads no answer
			}
			if _, werr := down.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// requests follows the raft RPCs read from in and, at each
// InstallSnapshot, records it and stores its number in install. It
// returns at the end of the stream, or at what is not a raft RPC (the
// raft port's info protocol).
func (l *lossyLink) requests(in io.Reader, install *atomic.Int64) {
	br := bufio.NewReader(in)
	dec := codec.NewDecoder(br, &codec.MsgpackHandle{})
	for {
		typ, err := br.ReadByte()
		if err != nil {
			return
		}
		var req any
		switch typ {
		case 0:
			req = &raft.AppendEntriesRequest{}
		case 1:
			req = &raft.RequestVoteRequest{}
		case 2:
			req = &raft.InstallSnapshotRequest{}
		case 3:
			req = &raft.TimeoutNowRequest{}
		case 4:
			req = &raft.RequestPreVoteRequest{}
		default:
			return
		}
		if err := dec.Decode(req); err != nil {
			return
		}
		is, ok := req.(*raft.InstallSnapshotRequest)
		if !ok {
			continue
		}
		l.mu.Lock()
		l.mu.installs = append(l.mu.installs, installSeen{Index: is.LastLogIndex, Term: is.LastLogTerm})
		install.Store(int64(len(l.mu.installs) - 1))
		l.mu.Unlock()
		if _, err := io.CopyN(io.Discard, br, is.Size); err != nil {
			return
		}
	}
}

// answer records that the follower answers install i, and reports
// whether that answer is to be lost.
func (l *lossyLink) answer(i int) (lose bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.lose == 0 {
		l.mu.installs[i].Answered = true
		return false
	}
	l.mu.lose--
	l.mu.installs[i].Lost = true
	return true
}

// TestReplicator_InstallAnswerLost is the honest resend the check of a
// snapshot not newer than the ledger must let through (issue #20): a
// follower far behind installs its leader's snapshot, and the answer is
// lost on the way back (a proxy on the leader's link to it closes the
// connection instead). Raft on the follower recorded the install; the
// leader, which does not know it, sends the same snapshot again. The
// follower's ledger now holds that very state and raft names it as its
// last snapshot, so the second install is kept (refusing it would have
// the leader send it for ever), and the follower catches up from the log
// and goes on following.
func TestReplicator_InstallAnswerLost(t *testing.T) {
	const threshold = 16
	small := func(c *Config) {
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = threshold, 4, 50*time.Millisecond
	}
	link := newLossyLink(t)
	nodes := cluster(t, 2, func(c *Config) {
		small(c)
		c.Peers = map[string]string{"n3": link.addr()}
	})
	follower := &testNode{id: "n3"}
	startNode(t, follower, testConfig(follower.id, small))
	link.to(follower.addr)
	leader := nodes[0]
	if err := leader.rep.Join(t.Context(), wire.JoinRequest{NodeID: follower.id, RaftAddr: follower.addr, LedgerID: testLedger}); err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, follower)
	appendRange(t, leader.store, "answer-lost", 10)
	converged(t, nodes, leader)
	behind := follower.rep.raft.LastIndex()
	follower.stop(t)
	appendRange(t, leader.store, "answer-lost", 200)
	eventually(t, "the leader compacts its log past the follower", 20*time.Second, func() bool {
		first, _ := leader.rep.logs.FirstIndex()
		return first > behind+1
	})
	// And takes no other snapshot: the leader would send that one the
	// second time.
	eventually(t, "the leader's snapshots catch up with its log", 20*time.Second, func() bool {
		return leader.rep.raft.LastIndex()-snapshotIndex(leader.rep) < threshold
	})
	before := len(link.seen())
	link.loseNext(1)
	startNode(t, follower, testConfig(follower.id, small))
	var installs []installSeen
	eventually(t, "an install answered after the one whose answer was lost", 20*time.Second, func() bool {
		installs = link.seen()[before:]
		return len(installs) > 0 && installs[len(installs)-1].Answered
	})
	if len(installs) != 2 || !installs[0].Lost || installs[1].Index != installs[0].Index || installs[1].Term != installs[0].Term {
		t.Fatalf("InstallSnapshot RPCs to the follower: %+v; want one whose answer was lost, then the same snapshot again, answered", installs)
	}
	converged(t, nodes, leader)
	// Both installs were taken: the first installed, the second kept.
	if got := follower.rep.fsm.restores.Load(); got != uint64(len(installs)) {
		t.Errorf("the follower took %d installs, the leader sent %d", got, len(installs))
	}
	checkRefusedCount(t, follower, 0)
	var metas []*raft.SnapshotMeta
	eventually(t, "the install listed as raft's last snapshot", 10*time.Second, func() bool {
		var err error
		metas, err = follower.rep.fsm.snaps.List()
		return err == nil && len(metas) > 0 && metas[0].Index == snapshotIndex(follower.rep)
	})
	if m := metas[0]; m.Index != installs[0].Index || m.Term != installs[0].Term || follower.rep.fsm.snaps.received(m.ID) {
		t.Errorf("the follower's newest snapshot is %s (index %d, term %d, received %v); want the leader's, taken", m.ID, m.Index, m.Term, follower.rep.fsm.snaps.received(m.ID))
	}
	appendRange(t, leader.store, "after", 5)
	converged(t, nodes, leader)
}
