package replicator

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The raft port carries two protocols. Raft's own connections start with an
// RPC type byte (0 to 4); a connection that starts with infoMagic asks the
// node who it is, and gets one JSON NodeInfo back before the node closes it.
// That is how a follower learns the leader's HTTP address (raft only knows
// raft addresses), how /v1/info learns every node's checkpoint verifier
// keys, how the leader sees that a non-voter has caught up, and how a
// removed follower learns its removal (removal.go). The answer is always
// current: a node restarted on another HTTP port says so.
//
// With mutual TLS, only a peer whose certificate the cluster CA signed and
// that names a node id (peercert.go) gets past the handshake, for either
// protocol; raft's RPCs are then checked against the configuration
// (authtransport.go). Any member certificate gets the info answer, a
// removed member's included (that is how it learns it was removed). On
// plain raft anyone who reaches the port gets it: the ledger id, the
// members, the verifier keys, the HTTP URL, the raft state, term and
// indexes (docs/CLUSTER.md), and can speak raft as any member it names.
const infoMagic byte = 'G'

// NodeInfo is what a node says about itself on its raft port.
type NodeInfo struct {
	NodeID   string `json:"node_id"`
	RaftAddr string `json:"raft_addr"`
	// HTTPURL is the node's API base URL, e.g. http://127.0.0.1:7070.
	HTTPURL  string `json:"http_url"`
	LedgerID string `json:"ledger_id"`
	// VerifierKeys are the note verifier keys of the node's checkpoint
	// signers (active, then retired).
	VerifierKeys []string `json:"verifier_keys"`
	State        string   `json:"state"`
	Term         uint64   `json:"term"`
	// AppliedIndex is the highest raft index the node's ledger took in;
	// LastIndex the last one in its raft log.
	AppliedIndex uint64 `json:"applied_index"`
	LastIndex    uint64 `json:"last_index"`
	// HeadSize is the number of acknowledged events in the node's ledger.
	HeadSize uint64 `json:"head_size"`
	// Restores counts the snapshots the node installed since it started.
	Restores uint64 `json:"restores"`
	// Members are the server ids of the node's latest raft configuration
	// (which may hold an entry not committed yet).
	Members []string `json:"members"`
	// CommittedMembers are the server ids of the newest committed
	// configuration the node knows, and CommittedConfigIndex its raft
	// index (0: none known yet). A follower learns that it was removed
	// from the leader's: raft itself never tells a removed follower
	// (removal.go).
	CommittedMembers     []string `json:"committed_members"`
	CommittedConfigIndex uint64   `json:"committed_config_index"`
}

// Bounds of the protocol.
const (
	// sniffTimeout bounds how long a new connection may stay silent before
	// its first byte (with TLS, the handshake included); raft writes it at
	// once.
	sniffTimeout = 10 * time.Second
	// maxSniffing bounds connections waiting for their first byte, so that
	// idle connections cannot pile up goroutines.
	maxSniffing = 256
	// maxInfoBytes bounds an info answer (a few keys and addresses).
	maxInfoBytes = 64 << 10
)

// muxLayer owns the raft listener: it sorts incoming connections between
// raft (handed to serveRaft with the connection's TLS peer) and the info
// protocol, and dials raft peers. It owns its goroutines: Close stops them
// and waits.
type muxLayer struct {
	ln   net.Listener
	adv  net.Addr
	tls  *tls.Config // nil: plain TCP
	info func() NodeInfo
	// serveRaft serves a raft connection whose TLS peer is the node id
	// peer ("" on plain raft); set before the listener's first connection
	// can reach it (sniff waits for ready).
	serveRaft func(c net.Conn, peer string)
	// expect returns the node id of the member at a raft address this
	// node dials ("" when it is no member it knows).
	expect  func(addr string) string
	ready   chan struct{}
	refuses *refusalLog
	ctx     context.Context
	cancel  context.CancelFunc
	sem     chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	readyMu sync.Once
}

func newMuxLayer(ln net.Listener, advertise net.Addr, tlsCfg *tls.Config, info func() NodeInfo, refuses *refusalLog) *muxLayer {
	ctx, cancel := context.WithCancel(context.Background())
	m := &muxLayer{ln: ln, adv: advertise, tls: tlsCfg, info: info, refuses: refuses, ready: make(chan struct{}),
		expect: func(string) string { return "" }, sem: make(chan struct{}, maxSniffing), ctx: ctx, cancel: cancel}
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.acceptLoop() }()
	return m
}

// start hands raft connections to serveRaft from now on, and checks the
// peers this node dials with expect.
func (m *muxLayer) start(serveRaft func(net.Conn, string), expect func(string) string) {
	m.readyMu.Do(func() {
		m.serveRaft, m.expect = serveRaft, expect
		close(m.ready)
	})
}

func (m *muxLayer) acceptLoop() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.refuses.log.Warn("raft listener", "err", err)
			select {
			case <-time.After(50 * time.Millisecond): // a persistent accept error must not spin
			case <-m.ctx.Done():
				return
			}
			continue
		}
		select {
		case m.sem <- struct{}{}:
		default:
			_ = c.Close() // too many silent connections: shed this one
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer func() { <-m.sem }()
			m.sniff(c)
		}()
	}
}

// sniff reads the first byte of c (with TLS, after the handshake, which
// checks the peer's certificate) and routes the connection.
func (m *muxLayer) sniff(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	br := bufio.NewReaderSize(c, 4096)
	first, err := br.Peek(1) // with TLS, after the handshake
	if err != nil {
		if m.tls != nil && !errors.Is(err, io.EOF) {
			m.refuses.connRefused(c.RemoteAddr(), err)
		}
		_ = c.Close()
		return
	}
	peer := ""
	if tc, ok := c.(*tls.Conn); ok {
		// The handshake's VerifyConnection checked it already; this is
		// the one place the id is read, so check again rather than trust
		// every tls.Config to carry it.
		if peer, err = peerNodeID(tc.ConnectionState()); err != nil {
			m.refuses.connRefused(c.RemoteAddr(), err)
			_ = c.Close()
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	if first[0] == infoMagic {
		defer c.Close()
		_ = c.SetWriteDeadline(time.Now().Add(sniffTimeout))
		_ = json.NewEncoder(c).Encode(m.info())
		return
	}
	select {
	case <-m.ready:
	case <-m.ctx.Done():
		_ = c.Close()
		return
	}
	m.serveRaft(&peekedConn{Conn: c, r: br}, peer)
}

// peekedConn replays the bytes the sniffer buffered.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// Close stops accepting, closes the listener and waits for the sniffers.
// Idempotent.
func (m *muxLayer) Close() error {
	var err error
	m.once.Do(func() {
		m.cancel()
		err = m.ln.Close()
		m.wg.Wait()
	})
	return err
}

// Addr is the advertised raft address.
func (m *muxLayer) Addr() net.Addr { return m.adv }

// Dial connects to a raft peer. With TLS, the peer's certificate must name
// the node id of the member at address, when it is one this node knows.
func (m *muxLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	want := ""
	select {
	case <-m.ready:
		want = m.expect(string(address))
	default:
	}
	return dialRaft(ctx, string(address), m.tls, want)
}

// dialRaft connects to a raft port, with mutual TLS when tlsCfg is set:
// the peer's certificate must be signed by the cluster's CA, name the host
// dialled and a node id, and that id must be wantID when it is not empty.
func dialRaft(ctx context.Context, addr string, tlsCfg *tls.Config, wantID string) (net.Conn, error) {
	if tlsCfg == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	cfg := tlsCfg.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		cfg.ServerName = host
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		id, err := peerNodeID(cs)
		if err != nil {
			return err
		}
		if wantID != "" && id != wantID {
			return fmt.Errorf("%s: %s presented the certificate of node %q, not of %q", CodeRaftPeerWrongNode, addr, id, wantID)
		}
		return nil
	}
	d := tls.Dialer{Config: cfg}
	return d.DialContext(ctx, "tcp", addr)
}

// queryInfo asks the node at addr who it is; with TLS, its certificate
// must name wantID (when not empty).
func queryInfo(ctx context.Context, addr string, tlsCfg *tls.Config, wantID string) (NodeInfo, error) {
	c, err := dialRaft(ctx, addr, tlsCfg, wantID)
	if err != nil {
		return NodeInfo{}, fmt.Errorf("node info %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write([]byte{infoMagic}); err != nil {
		return NodeInfo{}, fmt.Errorf("node info %s: %w", addr, err)
	}
	var info NodeInfo
	if err := json.NewDecoder(io.LimitReader(c, maxInfoBytes)).Decode(&info); err != nil {
		return NodeInfo{}, fmt.Errorf("node info %s: %w", addr, err)
	}
	return info, nil
}

// resolver maps server ids to the addresses this node dials, overriding
// the addresses in the raft configuration (the fault tests put a proxy on
// every link this way; an operator can use it behind NAT). Ids without an
// override are dialled at their configured address.
type resolver map[raft.ServerID]raft.ServerAddress

var _ raft.ServerAddressProvider = resolver(nil)

var errNoOverride = errors.New("no address override")

// ServerAddr returns the override for id, or an error so that raft falls
// back to the configured address.
func (r resolver) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if a, ok := r[id]; ok {
		return a, nil
	}
	return "", errNoOverride
}

// dialAddr returns the address to dial for a member.
func (r resolver) dialAddr(id raft.ServerID, configured raft.ServerAddress) string {
	if a, ok := r[id]; ok {
		return string(a)
	}
	return string(configured)
}
