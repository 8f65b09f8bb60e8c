package faultfs

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// linkWhileCloning links files on fs while clone cuts the power of mem in
// a loop, for n rounds, and reports whether both finished within limit.
func linkWhileCloning(t *testing.T, fs vfs.FS, clone func() *vfs.MemFS, n int, limit time.Duration) bool {
	t.Helper()
	f, err := fs.Create("/a", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	done := make(chan struct{}, 2)
	go func() {
		for range n {
			if err := fs.Link("/a", "/l"); err != nil {
				t.Error(err)
				break
			}
			if err := fs.Remove("/l"); err != nil {
				t.Error(err)
				break
			}
		}
		done <- struct{}{}
	}()
	go func() {
		for range n {
			clone()
		}
		done <- struct{}{}
	}()
	timeout := time.After(limit)
	for range 2 {
		select {
		case <-done:
		case <-timeout:
			return false
		}
	}
	return true
}

// TestCloneGate_LinkDuringCrashClone: Pebble's crashable MemFS deadlocks a
// CrashClone that starts inside a Link (its clone lock read twice, nested);
// through an FS whose injector is a CloneGate, and cloning with the gate,
// links and clones run side by side and all finish.
func TestCloneGate_LinkDuringCrashClone(t *testing.T) {
	mem := vfs.NewCrashableMem()
	gate := &CloneGate{}
	fs := Wrap(mem, gate)
	if !linkWhileCloning(t, fs, func() *vfs.MemFS { return gate.CrashClone(mem, vfs.CrashCloneCfg{}) }, 200_000, 60*time.Second) {
		t.Fatal("links and clones through the gate did not finish within 60 s")
	}
}
