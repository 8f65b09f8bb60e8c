//go:build unix

package main

import (
	"syscall"
	"testing"
)

// mkfifo makes a named pipe at p: a file a backup folder must never hold
// (opening it for reading blocks until a writer comes).
func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
}
