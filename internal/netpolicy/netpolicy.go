// Package netpolicy holds the network policies several listeners share:
// what counts as loopback, where a listener without authentication is
// allowed. It imports the standard library only.
package netpolicy

import "net"

// IsLoopback reports whether addr (host:port) is on loopback only: a
// loopback IP (127.0.0.0/8, ::1) or "localhost". A wildcard host (""
// "0.0.0.0", "::") listens on every interface and is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
