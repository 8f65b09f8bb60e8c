//go:build unix

package client

import (
	"net"
	"syscall"
)

// connOpen peeks at nc's socket without blocking: open when a read would
// block (EAGAIN); closed, reset or holding unasked bytes otherwise.
func connOpen(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true // never wait for the socket to become readable
	})
	return err == nil && open
}
