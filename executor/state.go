package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The state file remembers where to resume following the log: the low-water
// mark, the position before which every request addressed to this host has
// been claimed or settled (by this executor or another). Everything from it
// on is read again after a restart; a request already claimed is seen
// claimed again and never run twice (a claim is never retried), so
// resuming early is always safe and resuming late never happens.
//
// Format: {"executor_id": "...", "host": "...", "from": N}, written to a
// temporary file and renamed over the old one, so a crash leaves the old
// or the new state, never half of one.

type stateFile struct {
	ExecutorID string `json:"executor_id"`
	Host       string `json:"host"`
	From       uint64 `json:"from"`
}

// loadFrom returns the position to resume from: 0 without a state file.
// A state file of another executor or host is refused rather than used.
func loadFrom(path, executorID, host string) (uint64, error) {
	if path == "" {
		return 0, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("state file: %w", err)
	}
	var s stateFile
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("state file %s: %w", path, err)
	}
	if s.ExecutorID != executorID || s.Host != host {
		return 0, fmt.Errorf("state file %s belongs to executor %q on host %q, not %q on %q", path, s.ExecutorID, s.Host, executorID, host)
	}
	return s.From, nil
}

// saveFrom writes the state atomically.
func saveFrom(path, executorID, host string, from uint64) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(stateFile{ExecutorID: executorID, Host: host, From: from})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("state file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("state file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}
