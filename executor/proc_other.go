//go:build !unix

package executor

import (
	"errors"
	"os"
	"syscall"
)

// groupAttr: no process groups here; killGroup kills the run's process
// only, and its descendants may outlive it.
func groupAttr() *syscall.SysProcAttr { return nil }

const deathSignalNeedsThread = false

func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil // already gone
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
