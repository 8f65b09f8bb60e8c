package replicator

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The raft port carries two protocols. Raft's own connections start with an
// RPC type byte (0 to 4); a connection that starts with infoMagic asks the
// node who it is, and gets one JSON NodeInfo back before the node closes it.
// That is how a follower learns the leader's HTTP address (raft only knows
// raft addresses), how /v1/info learns every node's checkpoint verifier
// keys, and how the leader sees that a non-voter has caught up. The answer
// is always current: a node restarted on another HTTP port says so.
//
// Anyone who can reach the raft port can speak raft to the node, so the
// port belongs on a private network; the info protocol reveals nothing that
// GET /v1/info does not.
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
	// Members are the server ids of the node's latest raft configuration.
	// A follower learns that it was removed from a leader's list: raft
	// itself never tells a removed follower.
	Members []string `json:"members"`
}

// Bounds of the protocol.
const (
	// sniffTimeout bounds how long a new connection may stay silent before
	// its first byte; raft writes it at once.
	sniffTimeout = 10 * time.Second
	// maxSniffing bounds connections waiting for their first byte, so that
	// idle connections cannot pile up goroutines.
	maxSniffing = 256
	// acceptQueue holds raft connections between the sniffer and raft's
	// accept loop, which takes them as fast as they come.
	acceptQueue = 16
	// maxInfoBytes bounds an info answer (a few keys and addresses).
	maxInfoBytes = 64 << 10
)

// muxLayer is raft's StreamLayer on the raft listener, sorting incoming
// connections between raft and the info protocol. It owns its goroutines:
// Close stops them and waits.
type muxLayer struct {
	ln     net.Listener
	adv    net.Addr
	tls    *tls.Config // nil: plain TCP
	info   func() NodeInfo
	log    *slog.Logger
	conns  chan net.Conn
	sem    chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

var _ raft.StreamLayer = (*muxLayer)(nil)

func newMuxLayer(ln net.Listener, advertise net.Addr, tlsCfg *tls.Config, info func() NodeInfo, log *slog.Logger) *muxLayer {
	ctx, cancel := context.WithCancel(context.Background())
	m := &muxLayer{ln: ln, adv: advertise, tls: tlsCfg, info: info, log: log, conns: make(chan net.Conn, acceptQueue),
		sem: make(chan struct{}, maxSniffing), ctx: ctx, cancel: cancel}
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.acceptLoop() }()
	return m
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
			m.log.Warn("raft listener", "err", err)
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

// sniff reads the first byte of c and routes the connection.
func (m *muxLayer) sniff(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	br := bufio.NewReaderSize(c, 4096)
	first, err := br.Peek(1) // with TLS, after the handshake
	if err != nil {
		if m.tls != nil && !errors.Is(err, io.EOF) {
			m.log.Warn("raft connection refused", "remote", c.RemoteAddr().String(), "err", err)
		}
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if first[0] == infoMagic {
		defer c.Close()
		_ = c.SetWriteDeadline(time.Now().Add(sniffTimeout))
		_ = json.NewEncoder(c).Encode(m.info())
		return
	}
	select {
	case m.conns <- &peekedConn{Conn: c, r: br}:
	case <-m.ctx.Done():
		_ = c.Close()
	}
}

// peekedConn replays the bytes the sniffer buffered.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// Accept returns the next raft connection.
func (m *muxLayer) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close stops accepting, closes the listener and waits for the sniffers.
// Idempotent.
func (m *muxLayer) Close() error {
	var err error
	m.once.Do(func() {
		m.cancel()
		err = m.ln.Close()
		m.wg.Wait()
		for {
			select {
			case c := <-m.conns:
				_ = c.Close()
			default:
				return
			}
		}
	})
	return err
}

// Addr is the advertised raft address.
func (m *muxLayer) Addr() net.Addr { return m.adv }

// Dial connects to a raft peer.
func (m *muxLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return dialRaft(ctx, string(address), m.tls)
}

// dialRaft connects to a raft port, with mutual TLS when tlsCfg is set:
// the peer's certificate must be signed by the cluster's CA and name the
// host dialled.
func dialRaft(ctx context.Context, addr string, tlsCfg *tls.Config) (net.Conn, error) {
	if tlsCfg == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	cfg := tlsCfg.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		cfg.ServerName = host
	}
	d := tls.Dialer{Config: cfg}
	return d.DialContext(ctx, "tcp", addr)
}

// PeerTLS builds Config.TLS from PEM files: this node's certificate and key,
// and the cluster CA that signs every member's certificate. Certificates
// must name the raft addresses peers dial (IP or DNS SANs).
func PeerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("raft tls: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("raft tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("raft tls: %s holds no PEM certificate", caFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}, nil
}

// queryInfo asks the node at addr who it is.
func queryInfo(ctx context.Context, addr string, tlsCfg *tls.Config) (NodeInfo, error) {
	c, err := dialRaft(ctx, addr, tlsCfg)
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
