//go:build !linux

package main

import "syscall"

// procAttr puts a server in a process group of its own. Without Linux's
// Pdeathsig, a harness killed with SIGKILL leaves its servers running.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
