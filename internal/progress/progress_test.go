package progress

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// pipe returns a Conn writing into a synchronous in-memory connection
// (net.Pipe: a write waits for the reader), and the reading end.
func pipe(t *testing.T, timeout time.Duration) (*Conn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &Conn{Conn: a, timeout: timeout}, b
}

// TestConn_PeerThatStopsReadingFails: a write the peer never takes fails
// once the timeout has passed, with an error that is a deadline's.
func TestConn_PeerThatStopsReadingFails(t *testing.T) {
	c, _ := pipe(t, 100*time.Millisecond)
	start := time.Now()
	n, err := c.Write(make([]byte, 1000))
	if !errors.Is(err, os.ErrDeadlineExceeded) || n != 0 {
		t.Fatalf("write to a peer that does not read: %d, %v; want a deadline error", n, err)
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > 10*time.Second {
		t.Fatalf("failed after %v, want about the timeout", took)
	}
}

// TestConn_SlowPeerThatReadsIsNotCut: the bound is on progress: a large
// write to a peer that takes a piece at a time, slower in total than the
// timeout but each piece within it, completes whole.
func TestConn_SlowPeerThatReadsIsNotCut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c, peer := pipe(t, timeout)
	const total = 8 * Chunk
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, Chunk)
		n := 0
		for n < total {
			time.Sleep(timeout / 4) // a slow client, not a synchronisation: 8 pieces take twice the timeout
			m, err := io.ReadFull(peer, buf)
			n += m
			if err != nil {
				break
			}
		}
		got <- n
	}()
	start := time.Now()
	if n, err := c.Write(make([]byte, total)); err != nil || n != total {
		t.Fatalf("write to a slow reader: %d, %v", n, err)
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("took %v: the reader was not slower than the timeout, the test proves nothing", took)
	}
	if n := <-got; n != total {
		t.Fatalf("the peer read %d of %d", n, total)
	}
}

// TestConn_UsersEarlierDeadlineHolds: a write deadline the connection's
// user sets (a handler's own stall bound) still ends a write when it comes
// before the timeout; one set later does not extend the timeout; a zero
// deadline clears it.
func TestConn_UsersEarlierDeadlineHolds(t *testing.T) {
	c, _ := pipe(t, time.Hour)
	if err := c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the user's deadline: %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the user's deadline of 100ms ended the write after %v", took)
	}

	c, _ = pipe(t, 100*time.Millisecond)
	if err := c.SetDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a later user deadline extended the timeout: %v", err)
	}

	c, peer := pipe(t, time.Hour)
	_ = c.SetWriteDeadline(time.Now().Add(-time.Second)) // passed
	_ = c.SetWriteDeadline(time.Time{})                  // cleared
	go func() { _, _ = io.ReadFull(peer, make([]byte, 1)) }()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("a write after the user cleared its deadline: %v", err)
	}
}
