// Package atomicfile replaces a small file so that a crash leaves its old
// content or its new one, never half: the state files of auditors
// (greffe verify --state, the verified client) and of witnesses.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces path with b: a temporary file in the same
// folder, fsynced, renamed over path, and the folder fsynced, so that a
// crash leaves the old content or the new, never half, and a rename that
// returned is not lost.
func WriteFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync folder: %w", path, err)
	}
	return nil
}
