package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// directPool sends the client's POST requests (appends, commands) to plain
// http:// nodes over HTTP/1.1 connections it keeps itself: the calling
// goroutine writes the request (http.Request.Write) and reads the answer
// (http.ReadResponse) on its own connection, where net/http's Transport
// hands every request to a per-connection write goroutine and every answer
// back from a read goroutine.
//
// Written by hand for a measured need (docs/PERFORMANCE.md, "The client's
// own connections"): with the Transport, the client of 16 writers × 1
// event spent as much CPU as the node it drove, 145 µs per append, half of
// it in the scheduler's futex and nanosleep calls between those
// goroutines. With this path, alternating 5–6 s runs of `greffe bench
// --server` on the 2-core machine: 1 writer × 1 event 1,548 / 2,011 /
// 1,643 → 1,928 / 2,217 / 1,984 events/s (p50 456–560 → 400–464 µs);
// 16 × 1 9,255 / 8,768 / 9,158 → 9,194 / 10,429 / 10,218; 16 × 100
// 95,838 / 92,984 → 102,232 / 108,104. What it does not do, it leaves to
// net/http: TLS (https:// nodes), proxies, GETs and streams.
type directPool struct {
	dialer net.Dialer

	mu   sync.Mutex
	idle map[string][]*directConn // by host:port, the newest last
}

type directConn struct {
	nc        net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

const (
	// directIdleTimeout drops a pooled connection unused for this long,
	// before the node does (its http.Server.IdleTimeout is 2 min).
	directIdleTimeout = 30 * time.Second
	// directDrain is how much of an answer's unread end Close reads to
	// keep the connection (more, and the connection is closed instead).
	directDrain = 64 << 10
	// directMaxBody is the largest request body sent this way. A node's
	// net/http server reads at least this much of a body its handler left
	// unread (its maxPostHandlerReadBytes, 256 KiB) before it answers on a
	// kept connection, so a request written whole before its answer is
	// read never waits on a node that stopped reading. Larger bodies go
	// through the Transport, which reads an early answer (a refusal sent
	// before the body was read) while it still writes.
	directMaxBody = 256 << 10
	// directMaxIdle bounds the connections kept per node, as
	// Transport.MaxIdleConnsPerHost does for the other requests.
	directMaxIdle = 64
	// directMaxInterim bounds the interim (1xx) answers read before a
	// final one. net/http bounds them by their header bytes instead (its
	// MaxResponseHeaderBytes), which http.ReadResponse has no way to do;
	// a node sends at most 100 Continue and 103 Early Hints, a proxy in
	// front of it perhaps a 102 Processing more.
	directMaxInterim = 8
)

func newDirectPool() *directPool {
	return &directPool{dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, idle: map[string][]*directConn{}}
}

// usable reports whether req may take the direct path: a plain http://
// URL that no proxy of the environment (HTTP_PROXY, NO_PROXY) claims.
func (p *directPool) usable(req *http.Request) bool {
	if p == nil || req.URL.Scheme != "http" {
		return false
	}
	proxy, err := http.ProxyFromEnvironment(req)
	return err == nil && proxy == nil
}

// do sends req and returns the answer, whose Body gives the connection
// back to the pool once read to its end and closed. Errors are what
// net/http's client returns for the same failures: a *url.Error wrapping a
// *net.OpError (Op "dial" when the node could not be reached, so nothing
// was sent) or the context's error.
func (p *directPool) do(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	host := req.URL.Host
	if req.URL.Port() == "" {
		host = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	dc, err := p.get(ctx, host)
	if err != nil {
		return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: err}
	}
	// The context's end unblocks the write or the read in progress (a
	// deadline in the past); the connection is then closed, not reused.
	stop := context.AfterFunc(ctx, func() { _ = dc.nc.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = dc.nc.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: err}
	}
	if err := req.Write(dc.bw); err != nil {
		return fail(err)
	}
	if err := dc.bw.Flush(); err != nil {
		return fail(err)
	}
	resp, err := readFinal(dc.br, req)
	if err != nil {
		return fail(err)
	}
	resp.Body = &directBody{ReadCloser: resp.Body, p: p, host: host, dc: dc, stop: stop, keep: !resp.Close}
	return resp, nil
}

// readFinal reads the answer to req from br, past the interim (1xx)
// answers before it, as net/http's Transport does (persistConn.
// readResponse): http.ReadResponse returns a 1xx as it comes, and taking
// it as final leaves the real answer unread on the connection, where the
// next request on it would read it as its own (#20: an append to s-B got
// s-A's answer). Interim answers have no body (RFC 9110 §15.2), so each is
// only its status line and headers, which are dropped: the client asks
// for nothing an interim answer offers (Early Hints' preload links).
//
// 101 Switching Protocols is final, in net/http too, but the client never
// asks to switch: it is an error, and the connection, now in an unknown
// protocol, is closed by the caller. More than directMaxInterim interim
// answers is an error too: a node sends one or two (100, 103), and a
// peer that never stops sending them must not hold the request forever.
func readFinal(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for range directMaxInterim + 1 {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			_ = resp.Body.Close()
			return nil, errSwitchingProtocols
		case resp.StatusCode >= 100 && resp.StatusCode <= 199:
			_ = resp.Body.Close() // http.NoBody
			continue
		}
		return resp, nil
	}
	return nil, errTooManyInterim
}

var (
	errSwitchingProtocols = errors.New("client: the node answered 101 Switching Protocols, which was not asked for")
	errTooManyInterim     = fmt.Errorf("client: more than %d interim (1xx) answers before the final one", directMaxInterim)
)

// get returns a pooled connection to host that is still open, or dials one.
func (p *directPool) get(ctx context.Context, host string) (*directConn, error) {
	for {
		p.mu.Lock()
		conns := p.idle[host]
		if len(conns) == 0 {
			p.mu.Unlock()
			break
		}
		dc := conns[len(conns)-1]
		p.idle[host] = conns[:len(conns)-1]
		p.mu.Unlock()
		if time.Since(dc.idleSince) < directIdleTimeout && dc.open() {
			return dc, nil
		}
		_ = dc.nc.Close()
	}
	nc, err := p.dialer.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	return &directConn{nc: nc, br: bufio.NewReader(nc), bw: bufio.NewWriter(nc)}, nil
}

// open reports whether the node has neither closed the idle connection
// nor sent anything on it (it never speaks unasked). net/http's Transport
// learns the same from its read goroutine; here one non-blocking peek of
// the socket tells (connOpen: a read deadline already past would not even
// try the read).
func (dc *directConn) open() bool {
	return dc.br.Buffered() == 0 && connOpen(dc.nc)
}

func (p *directPool) put(host string, dc *directConn) {
	dc.idleSince = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle[host]) >= directMaxIdle {
		_ = dc.nc.Close()
		return
	}
	p.idle[host] = append(p.idle[host], dc)
}

// directBody is an answer's body on a direct connection: read to its end
// and closed, it gives the connection back; closed early, or after the
// context ended or an error, it closes the connection.
type directBody struct {
	io.ReadCloser
	p      *directPool
	host   string
	dc     *directConn
	stop   func() bool
	keep   bool
	eof    bool
	closed bool
}

func (b *directBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	if err == io.EOF {
		b.eof = true
	} else if err != nil {
		b.keep = false
	}
	return n, err
}

func (b *directBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.keep && !b.eof {
		// A decoder that stopped at the end of the JSON value has not read
		// the end of the body: read what little is left, as a caller that
		// wants the connection kept would.
		_, _ = io.Copy(io.Discard, io.LimitReader(b, directDrain)) // sets b.eof at the end
	}
	err := b.ReadCloser.Close()
	if b.stop() && b.keep && b.eof && err == nil {
		b.p.put(b.host, b.dc)
		return nil
	}
	_ = b.dc.nc.Close()
	return err
}
