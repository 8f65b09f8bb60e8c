package executor

import "syscall"

// groupAttr starts a run as the leader of its own process group (Setpgid),
// and has the kernel kill it if the executor itself is killed, kill -9
// included (Pdeathsig).
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// deathSignalNeedsThread: Pdeathsig fires when the thread that started the
// process exits, so that thread stays locked until Wait returns.
const deathSignalNeedsThread = true
