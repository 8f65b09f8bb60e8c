//go:build unix && !linux

package executor

import "syscall"

// groupAttr starts a run as the leader of its own process group. These
// systems have no parent-death signal: a run outlives an executor killed
// with kill -9 (a clean stop still kills it, see Run).
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

const deathSignalNeedsThread = false
