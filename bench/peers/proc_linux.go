package main

import "syscall"

// procAttr puts a server in a process group of its own and kills it when
// the harness's thread that started it dies, so that a harness killed with
// SIGKILL leaves no server behind. (Pdeathsig follows the starting OS
// thread; Go keeps its threads for the life of the process unless a
// goroutine locked to one exits, which the harness never does.)
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
