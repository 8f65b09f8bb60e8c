package replicator

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// authTransport is this node's raft.Transport. What it sends goes out
// through raft's own NetworkTransport; every RPC it receives is checked
// against this node's latest configuration before raft sees it (issue #20,
// findings 1, 2 and 5): raft itself takes an AppendEntries from anyone
// with a higher term for a new leader.
//
// # The sender of an RPC
//
// With mutual TLS, a connection's peer is the node id its certificate
// names (NodeIDOf). Every RPC on it must state that id (RPCHeader.ID), and
// the id must be a voter or non-voter of this node's latest configuration.
// Without TLS (loopback, or Config.Insecure) a connection has no
// authenticated peer, and only the stated id is checked: anyone who
// reaches a plain raft port can state a member's id, so plain raft is
// trusted to whoever reaches the port, by definition. In both, an RPC that
// names no sender, or this node, is refused.
//
// A node whose configuration is still empty (a joiner before its first
// entry, which comes with the leader's first AppendEntries or snapshot)
// cannot tell a member from anyone else: it accepts any sender, which with
// TLS means any certificate of the cluster CA that names a node id.
//
// # Why one NetworkTransport per connection
//
// Raft's NetworkTransport decodes the RPCs of every connection into one
// channel, where an RPC no longer says which connection, so which
// certificate, it came from. Rather than re-implementing raft's wire
// protocol (its framing, the heartbeat fast path, InstallSnapshot's
// streamed body) to keep that link, each connection the raft port accepts
// is served by a NetworkTransport of its own, whose stream layer yields
// that one connection: whatever comes out of it, through its channel or its
// heartbeat handler, came on that connection. Decoding stays raft's; what
// is added is a check between raft's decoder and raft. The cost is three
// goroutines per inbound connection (a member keeps a handful open to each
// peer), bounded by maxRaftConns.
//
// # A refusal
//
// A refused RPC is answered with an error that starts with its code (the
// sender's raft logs it and backs off), counted (Status.RefusedRPCs) and
// logged at most once a minute per remote host (refusalLog). The answer is
// the last thing written on the connection, which is then closed: the
// rest of an InstallSnapshot's body is never read as RPCs, and an attacker
// pays a new connection per try.
type authTransport struct {
	out  *raft.NetworkTransport // every RPC this node sends
	self string
	mtls bool
	// members returns this node's latest configuration; only called once
	// ready is closed.
	members func() raft.Configuration
	ready   chan struct{}
	readyMu sync.Once
	hlog    hclog.Logger
	log     *refusalLog
	refused atomic.Uint64 // RPCs refused
	// installFrom is the sender of the InstallSnapshot whose body raft
	// read last (senderBody); the FSM takes it (refused.go).
	installFrom atomic.Pointer[snapshotSender]

	consumeCh chan raft.RPC
	hb        struct {
		sync.Mutex
		fn func(raft.RPC)
	}
	slots chan struct{} // a slot per inbound connection served

	mu struct {
		sync.Mutex
		closed bool
		conns  map[*inboundConn]struct{}
	}
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

var (
	_ raft.Transport   = (*authTransport)(nil)
	_ raft.WithClose   = (*authTransport)(nil)
	_ raft.WithPreVote = (*authTransport)(nil)
)

const (
	// maxRaftConns bounds the inbound raft connections served at once. A
	// member holds a few to each peer (raft's pool of MaxPool, the
	// pipeline, the heartbeat, a snapshot install): 512 is dozens of
	// peers, and keeps an attacker from opening goroutines without end.
	maxRaftConns = 512
	// rpcTimeout is raft's I/O deadline on the RPCs this node sends, and
	// the base of a snapshot install's (raft scales it by size).
	rpcTimeout = 10 * time.Second
	// outboundPool is how many idle connections raft keeps to each peer.
	outboundPool = 3
	// maxRefusedDrain is how much of a refused InstallSnapshot's body is
	// read before the refusal is answered: enough for the sender of a
	// small one to see the answer; a bigger one finds the connection
	// closed, and the node never reads megabytes for a sender it refused.
	maxRefusedDrain = 1 << 20
	// refusedDrainTimeout bounds that read.
	refusedDrainTimeout = 5 * time.Second
)

// newAuthTransport returns the transport over mux, which dials for it and
// hands it the raft connections it accepts (serve). Call start once raft
// runs: RPCs wait for it.
func newAuthTransport(mux *muxLayer, self string, hlog hclog.Logger, log *refusalLog, provider raft.ServerAddressProvider) *authTransport {
	t := &authTransport{self: self, mtls: mux.tls != nil, ready: make(chan struct{}), hlog: hlog, log: log,
		consumeCh: make(chan raft.RPC), slots: make(chan struct{}, maxRaftConns), closed: make(chan struct{})}
	t.mu.conns = map[*inboundConn]struct{}{}
	tc := &raft.NetworkTransportConfig{Logger: hlog, Stream: &dialLayer{mux: mux, done: make(chan struct{})},
		MaxPool: outboundPool, Timeout: rpcTimeout}
	if provider != nil {
		tc.ServerAddressProvider = provider
	}
	t.out = raft.NewNetworkTransportWithConfig(tc)
	return t
}

// start lets RPCs through, checked against members.
func (t *authTransport) start(members func() raft.Configuration) {
	t.readyMu.Do(func() {
		t.members = members
		close(t.ready)
	})
}

// Consumer implements raft.Transport: the RPCs that passed the check.
func (t *authTransport) Consumer() <-chan raft.RPC { return t.consumeCh }

// LocalAddr implements raft.Transport: the advertised raft address.
func (t *authTransport) LocalAddr() raft.ServerAddress { return t.out.LocalAddr() }

// AppendEntriesPipeline implements raft.Transport.
func (t *authTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	return t.out.AppendEntriesPipeline(id, target)
}

// AppendEntries implements raft.Transport.
func (t *authTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.out.AppendEntries(id, target, args, resp)
}

// RequestVote implements raft.Transport.
func (t *authTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.out.RequestVote(id, target, args, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (t *authTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.out.RequestPreVote(id, target, args, resp)
}

// InstallSnapshot implements raft.Transport.
func (t *authTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.out.InstallSnapshot(id, target, args, resp, data)
}

// TimeoutNow implements raft.Transport.
func (t *authTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.out.TimeoutNow(id, target, args, resp)
}

// EncodePeer implements raft.Transport.
func (t *authTransport) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return t.out.EncodePeer(id, addr)
}

// DecodePeer implements raft.Transport.
func (t *authTransport) DecodePeer(b []byte) raft.ServerAddress { return t.out.DecodePeer(b) }

// SetHeartbeatHandler implements raft.Transport: heartbeats that pass the
// check go to fn without waiting behind raft's main loop, as with raft's
// own transport.
func (t *authTransport) SetHeartbeatHandler(fn func(raft.RPC)) {
	t.hb.Lock()
	t.hb.fn = fn
	t.hb.Unlock()
}

// Close stops serving and sending, closes every inbound connection and
// waits for their goroutines. Idempotent (raft closes it when it shuts
// down, the replicator again).
func (t *authTransport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.mu.closed = true
		conns := make([]*inboundConn, 0, len(t.mu.conns))
		for c := range t.mu.conns {
			conns = append(conns, c)
		}
		t.mu.Unlock()
		close(t.closed)
		_ = t.out.Close()
		for _, c := range conns {
			_ = c.Close()
		}
		t.wg.Wait()
	})
	return nil
}

// refusedCount returns how many RPCs were refused since the node started.
func (t *authTransport) refusedCount() uint64 { return t.refused.Load() }

// takeInstallSender returns the sender of the InstallSnapshot whose body
// raft read last, and forgets it; the zero value when none.
func (t *authTransport) takeInstallSender() snapshotSender {
	if from := t.installFrom.Swap(nil); from != nil {
		return *from
	}
	return snapshotSender{}
}

// serve serves one raft connection the raft port accepted, whose TLS peer
// is the node id peer ("" on plain raft). It returns at once.
func (t *authTransport) serve(c net.Conn, peer string) {
	select {
	case t.slots <- struct{}{}:
	default:
		t.log.connRefused(c.RemoteAddr(), fmt.Errorf("%d raft connections are open, the most this node serves", maxRaftConns))
		_ = c.Close()
		return
	}
	ic := &inboundConn{Conn: c, peer: peer, gone: make(chan struct{})}
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		<-t.slots
		_ = c.Close()
		return
	}
	t.mu.conns[ic] = struct{}{}
	// Under mu, so that Close, which sets closed under mu before it waits,
	// never waits while a goroutine is being added.
	t.wg.Add(1)
	t.mu.Unlock()
	inner := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Logger: t.hlog,
		Stream: &oneConnLayer{conn: ic, done: make(chan struct{})}, MaxPool: 1, Timeout: rpcTimeout})
	// Until the handler is set, a heartbeat comes through the channel,
	// where forward checks it just the same.
	inner.SetHeartbeatHandler(func(rpc raft.RPC) { t.heartbeat(ic, rpc) })
	go func() {
		defer t.wg.Done()
		defer func() {
			_ = inner.Close()
			_ = ic.Close()
			t.mu.Lock()
			delete(t.mu.conns, ic)
			t.mu.Unlock()
			<-t.slots
		}()
		t.forward(ic, inner)
	}()
}

// forward hands the RPCs of one connection that pass the check to raft,
// until the connection ends or the transport closes.
func (t *authTransport) forward(ic *inboundConn, inner *raft.NetworkTransport) {
	for {
		select {
		case rpc := <-inner.Consumer():
			if !t.admit(ic, rpc) {
				continue
			}
			if req, ok := rpc.Command.(*raft.InstallSnapshotRequest); ok && rpc.Reader != nil {
				// admit checked the id against the certificate with TLS.
				from := &snapshotSender{id: string(req.ID), authenticated: ic.peer != "", remote: ic.RemoteAddr().String()}
				rpc.Reader = &senderBody{Reader: rpc.Reader, from: from, at: &t.installFrom}
			}
			select {
			case t.consumeCh <- rpc:
			case <-t.closed:
				return
			}
		case <-ic.gone:
			return
		case <-t.closed:
			return
		}
	}
}

// heartbeat is the fast path of one connection's heartbeats.
func (t *authTransport) heartbeat(ic *inboundConn, rpc raft.RPC) {
	if !t.admit(ic, rpc) {
		return
	}
	t.hb.Lock()
	fn := t.hb.fn
	t.hb.Unlock()
	if fn != nil {
		fn(rpc)
		return
	}
	select {
	case t.consumeCh <- rpc:
	case <-t.closed:
	}
}

// admit checks an RPC of ic, and answers it itself when it is refused.
func (t *authTransport) admit(ic *inboundConn, rpc raft.RPC) bool {
	select {
	case <-t.ready:
	case <-t.closed:
		return false // raft is not running: nobody would answer it
	}
	// Once one RPC was refused, the connection is finished; what raft
	// still decodes from its buffer is refused the same way, unlogged.
	err := ic.refusal()
	logIt := err == nil
	if err == nil {
		err = t.authorize(ic.peer, rpc.Command)
	}
	if err == nil {
		return true
	}
	t.refused.Add(1)
	if logIt {
		t.log.rpcRefused(ic, rpc.Command, err)
	}
	ic.refuse(err)
	if rpc.Reader != nil {
		// An InstallSnapshot's body follows its request, and its sender
		// reads the answer only once it has written it all: read a small
		// one (raft's handleConn is waiting for the answer, not reading),
		// so that the sender sees the refusal rather than a broken pipe.
		_ = ic.SetReadDeadline(time.Now().Add(refusedDrainTimeout))
		_, _ = io.CopyN(io.Discard, rpc.Reader, maxRefusedDrain)
	}
	rpc.Respond(refusedResponse(rpc.Command), err)
	return false
}

// authorize is the check of one RPC whose connection's TLS peer is peer
// ("" on plain raft).
func (t *authTransport) authorize(peer string, cmd any) error {
	wh, ok := cmd.(raft.WithRPCHeader)
	if !ok {
		return refusal(CodeRaftSenderAnonymous, "the RPC carries no header naming its sender")
	}
	id := string(wh.GetRPCHeader().ID)
	switch {
	case id == "":
		return refusal(CodeRaftSenderAnonymous, "the RPC names no sender (RPCHeader.ID)")
	case t.mtls && id != peer:
		return refusal(CodeRaftSenderMismatch, "the connection's certificate names node %q, the RPC says it comes from %q", peer, id)
	case id == t.self:
		return refusal(CodeRaftSenderIsSelf, "the RPC says it comes from %q, this node; a node never sends RPCs to itself", id)
	}
	conf := t.members()
	if len(conf.Servers) == 0 {
		// A joiner before its first configuration: see the type's doc.
		return nil
	}
	for _, s := range conf.Servers {
		if string(s.ID) == id {
			return nil
		}
	}
	return refusal(CodeRaftSenderNotMember, "node %q is not a member of this node's latest raft configuration", id)
}

// rpcRefusal is the error a refused RPC is answered with: its code, then
// why. The sender's raft receives its text.
type rpcRefusal struct {
	code, msg string
}

func (e *rpcRefusal) Error() string { return e.code + ": " + e.msg }

func refusal(code, format string, args ...any) error {
	return &rpcRefusal{code: code, msg: fmt.Sprintf(format, args...)}
}

// refusedResponse is the empty response of the RPC's type that goes with
// a refusal (raft's decoder on the other side wants one).
func refusedResponse(cmd any) any {
	switch cmd.(type) {
	case *raft.AppendEntriesRequest:
		return &raft.AppendEntriesResponse{}
	case *raft.RequestVoteRequest:
		return &raft.RequestVoteResponse{}
	case *raft.RequestPreVoteRequest:
		return &raft.RequestPreVoteResponse{}
	case *raft.InstallSnapshotRequest:
		return &raft.InstallSnapshotResponse{}
	case *raft.TimeoutNowRequest:
		return &raft.TimeoutNowResponse{}
	}
	return nil
}

// inboundConn is one raft connection the raft port accepted. Raft's
// handleConn reads and writes it from one goroutine, one RPC at a time:
// after admit refused an RPC, the next write is that RPC's answer, after
// which the connection is closed, further writes discarded and reads end
// (io.EOF, which raft's handleConn takes for a peer that hung up, without
// logging an error).
type inboundConn struct {
	net.Conn
	peer    string // the node id its TLS certificate names; "" on plain raft
	refused atomic.Pointer[error]
	ended   atomic.Bool // closed: after the answer to a refusal, or by Close
	gone    chan struct{}
	once    sync.Once
}

func (c *inboundConn) refusal() error {
	if e := c.refused.Load(); e != nil {
		return *e
	}
	return nil
}

func (c *inboundConn) refuse(err error) { c.refused.CompareAndSwap(nil, &err) }

func (c *inboundConn) Write(b []byte) (int, error) {
	if c.ended.Load() {
		return len(b), nil
	}
	n, err := c.Conn.Write(b)
	if c.refused.Load() != nil {
		c.ended.Store(true)
		_ = c.Conn.Close()
	}
	return n, err
}

func (c *inboundConn) Read(b []byte) (int, error) {
	if c.ended.Load() {
		return 0, io.EOF
	}
	n, err := c.Conn.Read(b)
	if err != nil && c.ended.Load() {
		return n, io.EOF
	}
	return n, err
}

// Close closes the connection and tells forward; raft's handleConn, still
// reading, sees io.EOF rather than an error to log. Idempotent.
func (c *inboundConn) Close() error {
	c.ended.Store(true)
	c.once.Do(func() { close(c.gone) })
	return c.Conn.Close()
}

// oneConnLayer is the stream layer of the NetworkTransport that serves
// one inbound connection: Accept yields it once, then waits until the
// transport closes. It never dials.
type oneConnLayer struct {
	conn   *inboundConn
	taken  atomic.Bool
	done   chan struct{}
	closer sync.Once
}

var _ raft.StreamLayer = (*oneConnLayer)(nil)

func (l *oneConnLayer) Accept() (net.Conn, error) {
	if l.taken.CompareAndSwap(false, true) {
		return l.conn, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnLayer) Close() error {
	l.closer.Do(func() { close(l.done) })
	return l.conn.Close()
}

func (l *oneConnLayer) Addr() net.Addr { return l.conn.LocalAddr() }

func (l *oneConnLayer) Dial(raft.ServerAddress, time.Duration) (net.Conn, error) {
	return nil, errors.New("replicator: an inbound raft connection's transport never dials")
}

// dialLayer is the stream layer of the NetworkTransport this node sends
// with: it dials through the mux layer (which checks the peer's
// certificate) and accepts nothing, since the mux layer hands inbound
// connections to authTransport.serve.
type dialLayer struct {
	mux    *muxLayer
	done   chan struct{}
	closer sync.Once
}

var _ raft.StreamLayer = (*dialLayer)(nil)

func (l *dialLayer) Accept() (net.Conn, error) {
	<-l.done
	return nil, net.ErrClosed
}

func (l *dialLayer) Close() error {
	l.closer.Do(func() { close(l.done) })
	return nil
}

func (l *dialLayer) Addr() net.Addr { return l.mux.Addr() }

func (l *dialLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return l.mux.Dial(address, timeout)
}

// Refusal logging.
const (
	// refusalLogEvery is how often a remote host's refusals are logged:
	// the first at once, then one line a minute with how many there were.
	refusalLogEvery = time.Minute
	// maxRefusalHosts bounds the hosts refusalLog remembers; beyond, all
	// others share one line a minute.
	maxRefusalHosts = 1024
)

// refusalLog logs refused raft RPCs and connections without flooding: at
// most one line per remote host per refusalLogEvery, each saying how many
// it stands for. Safe for concurrent use.
type refusalLog struct {
	log   *slog.Logger
	now   func() time.Time
	conns atomic.Uint64 // connections refused (TLS handshake, node id, cap)

	mu    sync.Mutex
	hosts map[string]*refusalHost // guarded by mu
}

type refusalHost struct {
	last       time.Time
	suppressed uint64
}

func newRefusalLog(log *slog.Logger) *refusalLog {
	return &refusalLog{log: log, now: time.Now, hosts: map[string]*refusalHost{}}
}

// allow reports whether a refusal from remote is logged now, and how many
// were not logged before it.
func (l *refusalLog) allow(remote net.Addr) (bool, uint64) {
	host := "?"
	if remote != nil {
		host = remote.String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.hosts[host]
	if !ok && len(l.hosts) >= maxRefusalHosts {
		for k, v := range l.hosts {
			if now.Sub(v.last) >= refusalLogEvery {
				delete(l.hosts, k)
			}
		}
		if len(l.hosts) >= maxRefusalHosts {
			host = "(other hosts)"
			h, ok = l.hosts[host]
		}
	}
	if !ok {
		l.hosts[host] = &refusalHost{last: now}
		return true, 0
	}
	if now.Sub(h.last) < refusalLogEvery {
		h.suppressed++
		return false, 0
	}
	n := h.suppressed
	h.last, h.suppressed = now, 0
	return true, n
}

func (l *refusalLog) rpcRefused(ic *inboundConn, cmd any, err error) {
	ok, n := l.allow(ic.RemoteAddr())
	if !ok {
		return
	}
	var claimed string
	if wh, isHeader := cmd.(raft.WithRPCHeader); isHeader {
		claimed = string(wh.GetRPCHeader().ID)
	}
	code := ""
	var r *rpcRefusal
	if errors.As(err, &r) {
		code = r.code
	}
	l.log.Warn("raft RPC refused", "code", code, "rpc", fmt.Sprintf("%T", cmd), "sender", claimed,
		"certificate_node", ic.peer, "remote", ic.RemoteAddr().String(), "not_logged_since_last", n, "err", err)
}

func (l *refusalLog) connRefused(remote net.Addr, err error) {
	l.conns.Add(1)
	ok, n := l.allow(remote)
	if !ok {
		return
	}
	addr := ""
	if remote != nil {
		addr = remote.String()
	}
	l.log.Warn("raft connection refused", "remote", addr, "not_logged_since_last", n, "err", err)
}
