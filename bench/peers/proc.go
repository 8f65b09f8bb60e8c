package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds on a server process's life, so that a run never hangs on one.
const (
	// readyTimeout bounds a server's start: from exec to its start line.
	readyTimeout = 60 * time.Second
	// stopGrace is how long a server has to exit after SIGTERM before its
	// process group is killed.
	stopGrace = 10 * time.Second
	// stderrTail is how much of a server's stderr is kept to explain a
	// failure.
	stderrTail = 8 << 10
)

// serverProc is a server process the harness started: a greffe node, or
// this binary re-executed as serve-etcd or serve-nats. It runs in a process
// group of its own (stop ends the group) and, on Linux, dies with the
// harness (Pdeathsig), so no run leaves a server behind. Safe for
// concurrent use once startServer has returned.
type serverProc struct {
	name string
	// URL is where the server listens, from its start line.
	URL string
	cmd *exec.Cmd
	// done is closed once the process has exited; waitErr is then set.
	done    chan struct{}
	waitErr error
	stderr  *tail
	stopped sync.Once
}

// startLine is the JSON object a server prints on stdout once it serves:
// `greffe serve --json` prints url among other fields, and serve-etcd and
// serve-nats print the same shape.
type startLine struct {
	URL string `json:"url"`
}

// startServer starts argv[0] with argv[1:] and waits, at most
// readyTimeout, for its start line. On any failure the process is gone
// when startServer returns, and the error carries the end of its stderr.
func startServer(ctx context.Context, name string, argv []string) (*serverProc, error) {
	s := &serverProc{name: name, done: make(chan struct{}), stderr: &tail{max: stderrTail}}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.SysProcAttr = procAttr()
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	lines := make(chan startLine, 1)
	go func() {
		var l startLine
		if json.NewDecoder(out).Decode(&l) == nil {
			lines <- l
		}
		close(lines)
		// Keep reading, so that a server writing to stdout never blocks.
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case l, ok := <-lines:
		if ok && l.URL != "" {
			s.URL = l.URL
			return s, nil
		}
		s.stop()
		return nil, fmt.Errorf("%s printed no start line: %v; stderr: %s", name, s.waitErr, s.stderr)
	case <-s.done:
		return nil, fmt.Errorf("%s exited before serving: %v; stderr: %s", name, s.waitErr, s.stderr)
	case <-timer.C:
		s.stop()
		return nil, fmt.Errorf("%s did not serve within %s; stderr: %s", name, readyTimeout, s.stderr)
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	}
}

// pid is the server's process id (strace attaches to it).
func (s *serverProc) pid() int { return s.cmd.Process.Pid }

// stop sends SIGTERM to the server's process group, waits up to stopGrace
// for the process to exit, then kills the group. It returns the end of
// stderr when the server exited badly on its own before stop. Idempotent.
func (s *serverProc) stop() error {
	var err error
	s.stopped.Do(func() {
		select {
		case <-s.done:
			if s.waitErr != nil {
				err = fmt.Errorf("%s had exited: %v; stderr: %s", s.name, s.waitErr, s.stderr)
			}
			return
		default:
		}
		pgid := -s.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-s.done
			err = fmt.Errorf("%s did not stop within %s of SIGTERM: killed", s.name, stopGrace)
		}
		// Anything else left in the group (nothing is expected) goes too.
		_ = syscall.Kill(pgid, syscall.SIGKILL)
	})
	return err
}

// tail keeps the last max bytes written to it. Safe for concurrent use.
type tail struct {
	max int
	mu  sync.Mutex
	b   []byte // guarded by mu
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return "(empty)"
	}
	return s
}

// freePort returns a loopback TCP port that was free a moment ago, for a
// server that needs its address before it listens (etcd's peer and client
// URLs, greffe's raft address). Another process could take it in between;
// the server then fails to start and the run says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// printStartLine writes the start line of serve-etcd and serve-nats.
func printStartLine(url string) error {
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"url": url, "pid": os.Getpid()})
}

// hostPort is "127.0.0.1:port".
func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
