//go:build unix

package executor

import (
	"errors"
	"syscall"
)

// killGroup kills every process of the group pgid leads. A group already
// gone is not an error.
func killGroup(pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
