//go:build !unix

package client

import "net"

// connOpen cannot peek at a socket here without blocking: a pooled
// connection is never reused, and every direct request dials.
func connOpen(net.Conn) bool { return false }
