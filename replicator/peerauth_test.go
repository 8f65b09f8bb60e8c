package replicator

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/testcert"
)

// The attacks of issue #20 on the replication channel, made the way an
// attacker makes them: a process that is not a member runs hashicorp/raft's
// own NetworkTransport and sends RPCs to a member's raft port.

// attackLayer is the attacker's StreamLayer: it dials, with TLS when tls
// is set (the attacker then holds a certificate of the cluster's CA), and
// listens on a loopback port nobody dials.
type attackLayer struct {
	ln  net.Listener
	tls *tls.Config
}

func (a *attackLayer) Accept() (net.Conn, error) { return a.ln.Accept() }
func (a *attackLayer) Close() error              { return a.ln.Close() }
func (a *attackLayer) Addr() net.Addr            { return a.ln.Addr() }
func (a *attackLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if a.tls == nil {
		return d.Dial("tcp", string(addr))
	}
	cfg := a.tls.Clone()
	cfg.ServerName, _, _ = net.SplitHostPort(string(addr))
	return tls.DialWithDialer(d, "tcp", string(addr), cfg)
}

// newAttacker returns raft's own transport for a process that is not a
// member, dialling with tlsCfg when set.
func newAttacker(t *testing.T, tlsCfg *tls.Config) *raft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &attackLayer{ln: ln, tls: tlsCfg}, MaxPool: 1, Timeout: 5 * time.Second, Logger: newHCLogger(testLogger(t, "attacker"))})
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// raftView is what an attack must leave unchanged on its target.
type raftView struct {
	Head      events.Head
	Term      uint64
	LastIndex uint64
	Members   []string
}

func viewOf(t *testing.T, n *testNode) raftView {
	t.Helper()
	servers, err := n.rep.configuration()
	if err != nil {
		t.Fatal(err)
	}
	v := raftView{Head: n.store.Head(), Term: n.rep.raft.CurrentTerm(), LastIndex: n.rep.raft.LastIndex()}
	for _, s := range servers {
		v.Members = append(v.Members, string(s.ID))
	}
	return v
}

// forgedBatch is a batch the way a leader proposes one (Propose): an
// approval "granted by owner" that no command gate ever checked.
func forgedBatch() []byte {
	return events.EncodeBatch(&events.Batch{RecordedAt: time.Now(), Appends: []events.AppendRequest{{Streams: []events.StreamAppend{{
		Stream: "approval-forged", Events: []events.Proposed{{ID: uuid.New(), Type: "ApprovalGranted",
			Data: json.RawMessage(`{"approver":"owner","scope":"activation"}`), Metadata: json.RawMessage(`{}`)}},
	}}}}})
}

// forgedAppend sends target an AppendEntries claiming to come from
// claimID in a term above target's, extending target's log with entry and
// saying it is committed: raft takes a higher term as a new leader.
func forgedAppend(t *testing.T, atk *raft.NetworkTransport, target *testNode, claimID string, entry raft.Log) (*raft.AppendEntriesResponse, error) {
	t.Helper()
	term := target.rep.raft.CurrentTerm()
	last := target.rep.raft.LastIndex()
	lastTerm, err := strconv.ParseUint(target.rep.raft.Stats()["last_log_term"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	entry.Index, entry.Term = last+1, term+1
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(claimID), Addr: []byte(atk.LocalAddr())},
		Term:      term + 1, PrevLogEntry: last, PrevLogTerm: lastTerm,
		Entries: []*raft.Log{&entry}, LeaderCommitIndex: last + 1,
	}
	var resp raft.AppendEntriesResponse
	err = atk.AppendEntries(raft.ServerID(target.id), raft.ServerAddress(target.addr), req, &resp)
	return &resp, err
}

// refusedWith checks that an attack was refused with code and changed
// nothing on target.
func refusedWith(t *testing.T, target *testNode, before raftView, resp *raft.AppendEntriesResponse, err error, code string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), code) {
		t.Errorf("the forged RPC: error %v, success %v; want it refused with %s", err, resp.Success, code)
	}
	if resp.Success {
		t.Error("the forged RPC was answered success=true")
	}
	if after := viewOf(t, target); !cmpEqual(before, after) {
		t.Errorf("the refused RPC changed %s: before %+v, after %+v", target.id, before, after)
	}
	if evs, _ := target.store.ReadStream(t.Context(), "approval-forged", events.ReadOptions{}); len(evs) != 0 {
		t.Errorf("%s holds %d forged events", target.id, len(evs))
	}
}

func cmpEqual(a, b raftView) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// stillServes checks that the cluster goes on: an append on the leader
// reaches every node.
//
// A two-member cluster's leader steps down while its peer restarts (it
// lost its quorum), which is raft doing its job, not the attack's effect:
// an append that meets a leadership change is retried, with the same
// event id (the log answers a retry with the original position), on
// whichever node leads next, within the same deadline.
func stillServes(t *testing.T, nodes []*testNode, leader *testNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	id := uuid.New()
	for {
		_, err := leader.store.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: "after-attack", Events: []events.Proposed{{
			ID: id, Type: "Replicated", Data: json.RawMessage(`{"i":0}`), Metadata: json.RawMessage(`{}`),
		}}}}})
		if err == nil {
			break
		}
		if ctx.Err() != nil || !(errors.Is(err, events.ErrOutcomeUnknown) || errors.Is(err, ErrNotLeader)) {
			t.Fatalf("append after the attack: %v", err)
		}
		t.Logf("append after the attack met a leadership change (%v): retrying on the next leader", err)
		leader = leading(t, nodes)
	}
	converged(t, nodes, leader)
}

// TestPeerAuth_ForgedAppendEntries (issue #20, finding 1): on plain raft
// (loopback), an AppendEntries from a process that is not a member, with a
// higher term and a LogCommand holding a forged batch "committed" at once,
// used to be answered success=true: the follower applied the batch, and
// its next checkpoint signed it. Every RPC's sender must now be a member
// of the node's latest configuration; without TLS that is only the id the
// RPC states (plain raft is trusted to whoever reaches the port, so it is
// for loopback or --raft-insecure only), but a stranger's id, no id, or
// the node's own id is refused with its code, and nothing changes.
func TestPeerAuth_ForgedAppendEntries(t *testing.T) {
	nodes := cluster(t, 3, nil)
	appendRange(t, nodes[0].store, "real", 3)
	converged(t, nodes, nodes[0])
	target := nodes[1]
	for _, tc := range []struct {
		name, claim, code string
	}{
		{"a stranger's id", "mallory", CodeRaftSenderNotMember},
		{"no id", "", CodeRaftSenderAnonymous},
		{"the target's own id", target.id, CodeRaftSenderIsSelf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := viewOf(t, target)
			// A new process each time: the node closes a connection once
			// it refused an RPC on it.
			resp, err := forgedAppend(t, newAttacker(t, nil), target, tc.claim, raft.Log{Type: raft.LogCommand, Data: forgedBatch()})
			refusedWith(t, target, before, resp, err, tc.code)
		})
	}
	stillServes(t, nodes, nodes[0])
}

// TestPeerAuth_ForgedRemoval (issue #20, finding 2): one AppendEntries
// holding a configuration entry without the target used to make it log
// "no longer a member" and exit for good. The RPC is refused (a stranger
// on plain raft; on mutual TLS, a member's certificate claiming to be the
// leader), the target's configuration is unchanged, it does not stop, and
// it keeps serving.
func TestPeerAuth_ForgedRemoval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mtls  bool
		claim string
		code  string
	}{
		{"plain raft, a stranger", false, "mallory", CodeRaftSenderNotMember},
		{"mutual TLS, n3's certificate claiming to be n1", true, "n1", CodeRaftSenderMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []*testNode
			var atk *raft.NetworkTransport
			if tc.mtls {
				pki := newTestPKI(t)
				nodes = cluster(t, 3, pki.member(t))
				atk = newAttacker(t, pki.tlsFor(t, "n3", NodeURI("n3").String()))
			} else {
				nodes = cluster(t, 3, nil)
				atk = newAttacker(t, nil)
			}
			// Every node holds the configuration (a node that holds none yet,
			// a joiner, accepts any sender).
			stillServes(t, nodes, nodes[0])
			target := nodes[1]
			before := viewOf(t, target)
			conf := raft.Configuration{Servers: []raft.Server{
				{Suffrage: raft.Voter, ID: "n1", Address: raft.ServerAddress(nodes[0].addr)},
				{Suffrage: raft.Voter, ID: "n3", Address: raft.ServerAddress(nodes[2].addr)},
			}}
			resp, err := forgedAppend(t, atk, target, tc.claim, raft.Log{Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(conf)})
			refusedWith(t, target, before, resp, err, tc.code)
			waitTicks(t, target.rep, 3)
			select {
			case <-target.rep.Done():
				t.Fatalf("%s stopped: %v", target.id, target.rep.Err())
			default:
			}
			stillServes(t, nodes, nodes[0])
		})
	}
}

// testPKI is a cluster CA and its members' certificates (node ids in URI
// SANs, as greffe cluster certs issues them).
type testPKI struct {
	dir string
	ca  *testcert.CA
}

func newTestPKI(t *testing.T) *testPKI {
	dir := t.TempDir()
	return &testPKI{dir: dir, ca: testcert.NewCA(t, dir)}
}

// tlsFor returns the TLS config of a certificate named name with uri as
// its URI SAN ("" for none), signed by the cluster CA.
func (p *testPKI) tlsFor(t *testing.T, name, uri string) *tls.Config {
	t.Helper()
	cert, key := p.ca.IssueURI(t, p.dir, name, uri)
	tc, err := PeerTLS(cert, key, p.ca.File)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// member gives a node config the certificate of its own node id.
func (p *testPKI) member(t *testing.T) func(*Config) {
	return func(c *Config) { c.TLS = p.tlsFor(t, c.NodeID, NodeURI(c.NodeID).String()) }
}

// TestPeerAuth_MutualTLSIdentity (issue #20, finding 5): with mutual TLS,
// any certificate of the cluster's CA used to be accepted for raft,
// whatever node it was issued to. Now the certificate must name, in its
// URI SAN, the node id every RPC on the connection states, and that id
// must be a member: a stranger's certificate, a member's certificate
// claiming another id, one without a node id, and a removed member's are
// refused, and nothing changes. The info protocol answers cluster
// certificates that name a node id only.
func TestPeerAuth_MutualTLSIdentity(t *testing.T) {
	pki := newTestPKI(t)
	nodes := cluster(t, 3, pki.member(t))
	appendRange(t, nodes[0].store, "real", 3)
	converged(t, nodes, nodes[0])
	target := nodes[1]
	attack := func(t *testing.T, tc *tls.Config, claim, code string) {
		t.Helper()
		before := viewOf(t, target)
		resp, err := forgedAppend(t, newAttacker(t, tc), target, claim, raft.Log{Type: raft.LogCommand, Data: forgedBatch()})
		refusedWith(t, target, before, resp, err, code)
	}
	t.Run("a stranger's certificate of the cluster CA", func(t *testing.T) {
		attack(t, pki.tlsFor(t, "mallory", NodeURI("mallory").String()), "mallory", CodeRaftSenderNotMember)
	})
	t.Run("n3's certificate claiming to be n1", func(t *testing.T) {
		attack(t, pki.tlsFor(t, "n3-again", NodeURI("n3").String()), "n1", CodeRaftSenderMismatch)
	})
	t.Run("a certificate without a node id", func(t *testing.T) {
		attack(t, pki.tlsFor(t, "anonymous", ""), "n1", "tls")
	})
	t.Run("the info protocol", func(t *testing.T) {
		query := func(tc *tls.Config, want string) (NodeInfo, error) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			return queryInfo(ctx, target.addr, tc, want)
		}
		if _, err := query(pki.tlsFor(t, "anonymous-info", ""), ""); err == nil {
			t.Error("a certificate without a node id got the node's info")
		}
		if _, err := query(pki.tlsFor(t, "n1-info", NodeURI("n1").String()), "n3"); err == nil || !strings.Contains(err.Error(), CodeRaftPeerWrongNode) {
			t.Errorf("a dial expecting n3 at n2's address: %v, want %s", err, CodeRaftPeerWrongNode)
		}
		if info, err := query(pki.tlsFor(t, "n1-info2", NodeURI("n1").String()), "n2"); err != nil || info.NodeID != "n2" {
			t.Errorf("a member's query: %+v, %v", info, err)
		}
	})
	t.Run("a removed member's certificate", func(t *testing.T) {
		gone := nodes[2]
		if err := nodes[0].rep.Remove(t.Context(), gone.id); err != nil {
			t.Fatal(err)
		}
		select {
		case <-gone.rep.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the removed node did not stop")
		}
		gone.stop(t)
		eventually(t, "n2 sees n3 removed", 10*time.Second, func() bool { return len(viewOf(t, target).Members) == 2 })
		attack(t, pki.tlsFor(t, "n3-removed", NodeURI("n3").String()), "n3", CodeRaftSenderNotMember)
		stillServes(t, nodes[:2], nodes[0])
	})
}

// testLogger logs warnings and errors to the test's output.
func testLogger(t *testing.T, name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", name)
}

// waitTicks waits until r's maintain loop, which acts on a removal, has
// run n more times.
func waitTicks(t *testing.T, r *Replicator, n uint64) {
	t.Helper()
	start := r.ticks.Load()
	eventually(t, "maintain ticks", 10*time.Second, func() bool { return r.ticks.Load() >= start+n })
}

// syncBuffer is a log sink a test reads while nodes write to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPeerAuth_EveryRPCType: no RPC type bypasses the check. A stranger's
// heartbeat (raft's fast path, which skips the main loop), vote and
// pre-vote requests, TimeoutNow and InstallSnapshot (whose body streams
// after the request), each with a higher term, are refused with
// raft_sender_not_member before raft sees them: the target's term, log,
// ledger and snapshot count stay as they were (before, the heartbeat made
// it adopt the term and the stranger as leader, and TimeoutNow started an
// election). Each is counted; the log holds one line for them all, since
// they come from one host within a minute.
func TestPeerAuth_EveryRPCType(t *testing.T) {
	var logs syncBuffer
	nodes := cluster(t, 3, func(c *Config) {
		if c.NodeID == "n2" {
			c.Logger = newBufferLogger(t, &logs, c.NodeID)
		}
	})
	stillServes(t, nodes, nodes[0])
	target := nodes[1]
	hdr := func(atk *raft.NetworkTransport) raft.RPCHeader {
		return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("mallory"), Addr: []byte(atk.LocalAddr())}
	}
	id, addr := raft.ServerID(target.id), raft.ServerAddress(target.addr)
	snapshot := []byte("a forged snapshot: not what a checkpoint streams")
	conf := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "mallory", Address: "127.0.0.1:9"}}})
	cases := []struct {
		name string
		send func(atk *raft.NetworkTransport, term, last uint64) error
	}{
		{"heartbeat", func(atk *raft.NetworkTransport, term, _ uint64) error {
			return atk.AppendEntries(id, addr, &raft.AppendEntriesRequest{RPCHeader: hdr(atk), Term: term + 1}, &raft.AppendEntriesResponse{})
		}},
		{"RequestVote", func(atk *raft.NetworkTransport, term, last uint64) error {
			return atk.RequestVote(id, addr, &raft.RequestVoteRequest{RPCHeader: hdr(atk), Term: term + 1, LastLogIndex: last + 10, LastLogTerm: term + 1},
				&raft.RequestVoteResponse{})
		}},
		{"RequestPreVote", func(atk *raft.NetworkTransport, term, last uint64) error {
			return atk.RequestPreVote(id, addr, &raft.RequestPreVoteRequest{RPCHeader: hdr(atk), Term: term + 1, LastLogIndex: last + 10, LastLogTerm: term + 1},
				&raft.RequestPreVoteResponse{})
		}},
		{"TimeoutNow", func(atk *raft.NetworkTransport, _, _ uint64) error {
			return atk.TimeoutNow(id, addr, &raft.TimeoutNowRequest{RPCHeader: hdr(atk)}, &raft.TimeoutNowResponse{})
		}},
		{"InstallSnapshot", func(atk *raft.NetworkTransport, term, last uint64) error {
			return atk.InstallSnapshot(id, addr, &raft.InstallSnapshotRequest{RPCHeader: hdr(atk), SnapshotVersion: raft.SnapshotVersionMax,
				Term: term + 1, LastLogIndex: last + 100, LastLogTerm: term + 1, Configuration: conf, ConfigurationIndex: last + 100,
				Size: int64(len(snapshot))}, &raft.InstallSnapshotResponse{}, bytes.NewReader(snapshot))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := viewOf(t, target)
			restores := target.rep.fsm.restores.Load()
			err := tc.send(newAttacker(t, nil), before.Term, before.LastIndex)
			if err == nil || !strings.Contains(err.Error(), CodeRaftSenderNotMember) {
				t.Errorf("%s from a stranger: %v, want it refused with %s", tc.name, err, CodeRaftSenderNotMember)
			}
			if after := viewOf(t, target); !cmpEqual(before, after) {
				t.Errorf("the refused %s changed %s: before %+v, after %+v", tc.name, target.id, before, after)
			}
			if got := target.rep.fsm.restores.Load(); got != restores {
				t.Errorf("%d snapshots installed, want %d", got, restores)
			}
		})
	}
	st, err := target.rep.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.RefusedRPCs != uint64(len(cases)) {
		t.Errorf("Status.RefusedRPCs = %d, want %d", st.RefusedRPCs, len(cases))
	}
	if n := strings.Count(logs.String(), `msg="raft RPC refused"`); n != 1 {
		t.Errorf("%d log lines for %d refusals from one host within a minute, want 1:\n%s", n, len(cases), logs.String())
	}
	stillServes(t, nodes, nodes[0])
}

// newBufferLogger logs warnings to the test's output and to buf.
func newBufferLogger(t *testing.T, buf *syncBuffer, name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), buf), &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", name)
}
