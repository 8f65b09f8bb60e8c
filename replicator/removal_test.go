package replicator

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/greffe/greffe/wire"
)

// cutLink is a TCP proxy in front of a raft port that a test can cut:
// cut closes its connections and refuses new ones until healed.
type cutLink struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newCutLink(t *testing.T) *cutLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &cutLink{ln: ln, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.wg.Add(1)
			go func() { defer l.wg.Done(); l.pipe(c) }()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); l.set(true); l.wg.Wait() })
	return l
}

func (l *cutLink) addr() string { return l.ln.Addr().String() }

// track registers c unless the link is cut.
func (l *cutLink) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut || l.target == "" {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *cutLink) pipe(down net.Conn) {
	defer down.Close()
	if !l.track(down) {
		return
	}
	l.mu.Lock()
	target := l.target
	l.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	if !l.track(up) {
		return
	}
	done := make(chan struct{})
	go func() { defer close(done); _, _ = io.Copy(up, down); _ = up.Close() }()
	_, _ = io.Copy(down, up)
	_ = down.Close()
	<-done
}

func (l *cutLink) set(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for c := range l.conns {
			_ = c.Close()
		}
		clear(l.conns)
	}
}

func (l *cutLink) to(target string) {
	l.mu.Lock()
	l.target = target
	l.mu.Unlock()
}

// TestReplicator_UncommittedRemovalKeepsNode (issue #20, finding 2): a
// node used to stop for good as soon as its latest configuration, which
// holds entries not yet committed, lacked it. Steps: three nodes; cut
// every link to n3, so that n3 gets nothing more; n1 removes n2. The leader
// appends the new configuration {n1, n3} and sends it to n2 as it stops
// replicating to it, but cannot commit it without n3. n2's latest
// configuration then lacks n2: it used to stop within a tick. It must not
// stop while the removal is not committed; once the links heal and the
// removal commits, it stops with ErrRemoved.
func TestReplicator_UncommittedRemovalKeepsNode(t *testing.T) {
	toN3 := map[string]*cutLink{"n1": newCutLink(t), "n2": newCutLink(t)}
	nodes := cluster(t, 2, func(c *Config) {
		if l, ok := toN3[c.NodeID]; ok {
			c.Peers = map[string]string{"n3": l.addr()}
		}
	})
	n3 := &testNode{id: "n3"}
	startNode(t, n3, testConfig("n3", nil))
	for _, l := range toN3 {
		l.to(n3.addr)
	}
	if err := nodes[0].rep.Join(t.Context(), wire.JoinRequest{NodeID: "n3", RaftAddr: n3.addr, LedgerID: testLedger}); err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, n3)
	eventually(t, "n3 a voter", 20*time.Second, func() bool {
		st, err := nodes[0].rep.Status(t.Context())
		if err != nil || len(st.Servers) != 3 {
			return false
		}
		for _, s := range st.Servers {
			if s.Suffrage != "voter" {
				return false
			}
		}
		return true
	})
	stillServes(t, nodes, nodes[0])
	n2 := nodes[1]

	for _, l := range toN3 {
		l.set(true)
	}
	removed := make(chan error, 1)
	go func() { removed <- nodes[0].rep.Remove(t.Context(), "n2") }()
	eventually(t, "n2's latest configuration lacks n2", 10*time.Second, func() bool {
		servers, err := n2.rep.configuration()
		if err != nil || len(servers) == 0 {
			return false
		}
		for _, s := range servers {
			if s.ID == "n2" {
				return false
			}
		}
		return true
	})
	waitTicks(t, n2.rep, 5)
	select {
	case <-n2.rep.Done():
		t.Fatalf("n2 stopped on a removal that was not committed: %v", n2.rep.Err())
	default:
	}

	for _, l := range toN3 {
		l.set(false)
	}
	select {
	case <-n2.rep.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("n2 did not stop once its removal was committed")
	}
	if !errors.Is(n2.rep.Err(), ErrRemoved) {
		t.Fatalf("n2 stopped with %v, want ErrRemoved", n2.rep.Err())
	}
	<-removed // outcome unknown (leadership lost without n3) or done: both fine
	var rest []*testNode
	for _, n := range nodes {
		if n != n2 {
			rest = append(rest, n)
		}
	}
	var leader *testNode
	eventually(t, "a leader among n1 and n3", 20*time.Second, func() bool {
		for _, n := range rest {
			if n.rep.IsLeader() {
				leader = n
				return true
			}
		}
		return false
	})
	stillServes(t, rest, leader)
}
