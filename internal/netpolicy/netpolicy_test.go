package netpolicy

import "testing"

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7001": true, "127.9.9.9:1": true, "[::1]:7001": true, "localhost:7001": true,
		"0.0.0.0:7001": false, ":7001": false, "[::]:7001": false, "10.0.0.1:7001": false,
		"node1.example:7001": false, "127.0.0.1": false, "": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
