//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package witness

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive, non-blocking lock on dir/LOCK, so that two
// witnesses never share a folder (each would cosign from its own memory of
// the logs, and one could cosign a checkpoint the other's state forbids).
// The lock goes with the process; unlock releases it earlier.
func lockDir(dir string) (unlock func() error, err error) {
	f, err := os.OpenFile(dir+"/LOCK", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("witness folder lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("witness folder %s is in use by another witness (%s/LOCK is held)", dir, dir)
		}
		return nil, fmt.Errorf("witness folder lock: %w", err)
	}
	return f.Close, nil
}
