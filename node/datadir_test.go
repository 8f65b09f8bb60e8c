package node

import (
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestMakeDataDir_OneCreator: of several nodes starting at once on a new
// folder, exactly one is told it made it, so only that one may remove it
// when its start fails (Open); the others never delete a folder another
// node may be writing.
func TestMakeDataDir_OneCreator(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "parent", "data")
	var creators atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			created, err := makeDataDir(dir)
			if err != nil {
				t.Errorf("makeDataDir: %v", err)
			}
			if created {
				creators.Add(1)
			}
		})
	}
	wg.Wait()
	if got := creators.Load(); got != 1 {
		t.Fatalf("%d calls were told they created %s, want exactly 1", got, dir)
	}
	if created, err := makeDataDir(dir); created || err != nil {
		t.Fatalf("makeDataDir on an existing folder: created %v, %v; want false, nil", created, err)
	}
}
