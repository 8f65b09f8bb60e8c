// Package nodetest runs a real node in a test, as net/http/httptest runs a
// server: opened with its configuration, serving on its address, and
// stopped when the test ends, or before by the stop it returns. Only tests
// import it; it imports node and the standard library.
package nodetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/greffe/greffe/node"
)

// stopWait bounds how long stop waits for Serve to return: a node that
// does not stop is a failure to report, not a test that hangs.
const stopWait = 20 * time.Second

// Serve opens a node with cfg (failing the test if it cannot) and serves
// it until the test ends. stop ends it earlier and returns Serve's error
// (or that it did not stop within 20 s); it may be called again, and is
// called at cleanup, whose error the caller checks if it cares: a test
// that asserts it registers its own cleanup calling stop, which runs first.
func Serve(t testing.TB, cfg node.Config) (n *node.Node, stop func() error) {
	t.Helper()
	n, err := node.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx) }()
	var once sync.Once
	var serveErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case serveErr = <-served:
			case <-time.After(stopWait):
				serveErr = errors.New("the node did not stop within 20s")
			}
		})
		return serveErr
	}
	t.Cleanup(func() { _ = stop() })
	return n, stop
}
