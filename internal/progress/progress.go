// Package progress bounds how long a connection's writes may wait for the
// peer to take them: a peer that stops reading (its socket's buffers
// full) makes a write wait, and once the timeout has passed the write
// fails, so that the server's handler fails with it and what it held is
// released (issue #20). The HTTP API and the KurrentDB gRPC surface wrap
// their listeners with it. It imports the standard library only.
package progress

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// Chunk is the most one write carries under one deadline: a large write is
// made in pieces, each of which must complete within the timeout, so that
// the bound is on progress, not on the size of what is written.
const Chunk = 64 << 10

// Listener accepts connections whose every write (per Chunk) must
// complete within Timeout of its start. Timeout must be positive.
type Listener struct {
	net.Listener
	Timeout time.Duration
}

// Accept waits for a connection and wraps it.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c, timeout: l.Timeout}, nil
}

// Conn is a connection whose writes each have a deadline of the timeout
// from when they start, per Chunk; a write that passes it fails with an
// error that matches os.ErrDeadlineExceeded. A write deadline its user
// sets (SetWriteDeadline, SetDeadline: a handler's own bound, through
// http.ResponseController) still holds when it is the earlier: the
// timeout only ever shortens what a write may wait. Its reads are the
// connection's. Safe for concurrent use as net.Conn is, except that two
// concurrent writes share one deadline (the servers that use it, net/http,
// crypto/tls and grpc's transport, never write concurrently).
type Conn struct {
	net.Conn
	timeout time.Duration
	// set is the write deadline the user set, in Unix nanoseconds (0:
	// none); read by Write, written by the setters, possibly from
	// another goroutine.
	set atomic.Int64
}

// SetWriteDeadline sets the deadline of writes, as net.Conn's does; a
// write still ends within the timeout of its start when that comes first.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.note(t)
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline sets the deadlines of reads and writes, as net.Conn's does.
func (c *Conn) SetDeadline(t time.Time) error {
	c.note(t)
	return c.Conn.SetDeadline(t)
}

func (c *Conn) note(t time.Time) {
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	c.set.Store(ns)
}

// Write writes p in pieces of at most Chunk, each under a fresh deadline.
func (c *Conn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		piece := p[:min(len(p), Chunk)]
		d := time.Now().Add(c.timeout)
		if set := c.set.Load(); set != 0 && set < d.UnixNano() {
			d = time.Unix(0, set)
		}
		if err := c.Conn.SetWriteDeadline(d); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(piece)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// CloseWrite half-closes the connection when the underlying one can (a
// TCP connection): net/http closes the write side first, so that the
// client reads the whole answer before the connection goes.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
