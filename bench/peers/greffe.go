package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// buildGreffe builds the greffe binary into dir from the source of the
// module github.com/greffe/greffe as this module resolves it (go.mod's
// replace: the repository around bench/peers) and returns its path.
func buildGreffe(ctx context.Context, dir string) (string, error) {
	list := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/greffe/greffe")
	out, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("find greffe's source (go list -m github.com/greffe/greffe): %w", err)
	}
	src := strings.TrimSpace(string(out))
	bin := filepath.Join(dir, "greffe")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/greffe")
	build.Dir = src
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/greffe in %s: %w", src, err)
	}
	return bin, nil
}

// greffeSystem runs `greffe serve` with its defaults (the store's own
// write-ahead log, an fdatasync before every acknowledgement, the six
// projections on) and drives it with the Go client over HTTP: the same
// requests as `greffe bench --server`.
type greffeSystem struct {
	bin    string
	reader greffeReader
}

func (greffeSystem) Name() string { return "greffe" }

func (g greffeSystem) Start(ctx context.Context, dir string) (instance, error) {
	s, err := startServer(ctx, "greffe serve", []string{g.bin, "serve", "--data", filepath.Join(dir, "n1"),
		"--http", "127.0.0.1:0", "--json"})
	if err != nil {
		return nil, err
	}
	return &greffeInstance{procs: []*serverProc{s}, c: client.New(s.URL, ""), reader: g.reader}, nil
}

// greffeClusterSystem is three `greffe serve` processes on loopback forming
// a raft cluster as docs/CLUSTER.md starts one: n1 bootstraps, n2 and n3
// join it. The load goes to the leader.
type greffeClusterSystem struct {
	bin    string
	reader greffeReader
}

func (greffeClusterSystem) Name() string { return "greffe-3" }

// clusterFormTimeout bounds the wait for three voters and a leader.
const clusterFormTimeout = 60 * time.Second

func (g greffeClusterSystem) Start(ctx context.Context, dir string) (inst instance, err error) {
	gi := &greffeInstance{reader: g.reader}
	defer func() {
		if err != nil {
			_ = gi.Close()
		}
	}()
	var leader string
	for i := 1; i <= 3; i++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("n%d", i)
		args := []string{g.bin, "serve", "--data", filepath.Join(dir, id), "--http", "127.0.0.1:0", "--json",
			"--node-id", id, "--raft-addr", hostPort(port)}
		if i == 1 {
			args = append(args, "--bootstrap")
		} else {
			args = append(args, "--join", leader)
		}
		s, err := startServer(ctx, "greffe serve "+id, args)
		if err != nil {
			return nil, err
		}
		gi.procs = append(gi.procs, s)
		if i == 1 {
			leader = s.URL
		}
	}
	gi.c = client.New(leader, "")
	if err := waitForVoters(ctx, gi.c, 3); err != nil {
		return nil, err
	}
	return gi, nil
}

// clusterStatus is the part of GET /v1/cluster/status (wire.Status)
// the harness reads.
type clusterStatus struct {
	NodeID   string `json:"node_id"`
	LeaderID string `json:"leader_id"`
	Servers  []struct {
		ID       string `json:"id"`
		Suffrage string `json:"suffrage"`
	} `json:"servers"`
}

// waitForVoters polls c's node (an external process: polling, with a
// deadline) until it leads a cluster of n voters: joiners start as
// non-voters and are promoted once they have caught up.
func waitForVoters(ctx context.Context, c *client.Client, n int) error {
	ctx, cancel := context.WithTimeout(ctx, clusterFormTimeout)
	defer cancel()
	var last clusterStatus
	for {
		var st clusterStatus
		err := c.Do(ctx, http.MethodGet, "/v1/cluster/status", nil, &st)
		if err == nil {
			last = st
			voters := 0
			for _, s := range st.Servers {
				if s.Suffrage == "voter" {
					voters++
				}
			}
			if voters == n && st.LeaderID == st.NodeID {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no cluster of %d voters led by the first node within %s: last status %+v (%v)", n, clusterFormTimeout, last, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// greffeInstance is one greffe node, or a cluster whose client talks to
// the leader.
type greffeInstance struct {
	procs  []*serverProc
	c      *client.Client
	reader greffeReader
}

// Append sends what `greffe bench --server` sends: one POST
// /v1/streams/{stream} with the events' ids, types and data (the client's
// fast encoding, client/fastwire.go).
func (g *greffeInstance) Append(ctx context.Context, stream string, evs []events.Proposed) error {
	in := make([]wire.EventIn, len(evs))
	for i, e := range evs {
		in[i] = wire.EventIn{ID: e.ID.String(), Type: e.Type, Data: e.Data}
	}
	_, err := g.c.Append(ctx, stream, events.ExpectAny, in)
	return err
}

func (g *greffeInstance) ReadInOrder(ctx context.Context, n int) (int, error) {
	return g.reader.ReadInOrder(ctx, g.c, n)
}

// settleTimeout bounds Settle.
const settleTimeout = 2 * time.Minute

// Settle polls GET /v1/projections (an external process: polling, with a
// deadline) until every projection has folded the log up to its head.
func (g *greffeInstance) Settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for {
		out, err := g.c.Projections(ctx)
		if err == nil {
			behind := 0
			for _, p := range out.Projections {
				if p.Position < out.Head {
					behind++
				}
			}
			if behind == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("projections not caught up within %s (%v)", settleTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var _ settler = (*greffeInstance)(nil)

func (g *greffeInstance) PID() int { return g.procs[0].pid() }

func (g *greffeInstance) Close() error {
	if g.c != nil {
		g.c.HTTP.CloseIdleConnections()
	}
	var eg errgroup.Group
	errs := make([]error, len(g.procs))
	for i, p := range g.procs {
		eg.Go(func() error { errs[i] = p.stop(); return nil })
	}
	_ = eg.Wait()
	return errors.Join(errs...)
}

// greffeReader is how shape D reads a greffe node's global log in order
// through the Go client. It is the one place to change when the API gains
// a faster way to read the log (--greffe-read picks one by name).
type greffeReader interface {
	// ReadInOrder reads the first n events of the node's global log from
	// position 0, checks that their positions are 0, 1, 2, …, and returns
	// how many it read (fewer when the log holds fewer).
	ReadInOrder(ctx context.Context, c *client.Client, n int) (int, error)
}

// greffeReaderNamed returns the reader --greffe-read names.
func greffeReaderNamed(name string) (greffeReader, error) {
	switch name {
	case "entries":
		return entriesReader{}, nil
	case "pages":
		return pagesReader{limit: events.MaxReadLimit}, nil
	case "subscribe":
		return subscribeReader{}, nil
	}
	return nil, fmt.Errorf("--greffe-read %q: want entries, pages or subscribe", name)
}

// entriesReader reads GET /v1/all?format=entries (client.ReadEntries): the
// stored bytes of each event, framed by their length, decoded by the
// client (docs/API.md). One request reads up to a million events; the
// reader asks again from where an answer ended until it has n.
type entriesReader struct{}

func (entriesReader) ReadInOrder(ctx context.Context, c *client.Client, n int) (int, error) {
	got := 0
	for got < n {
		before := got
		_, err := c.ReadEntries(ctx, uint64(got), n-got, func(_ []byte, e events.Event) error {
			if e.Position != uint64(got) {
				return fmt.Errorf("GET /v1/all?format=entries: position %d where %d was due", e.Position, got)
			}
			got++
			return nil
		})
		if err != nil {
			return got, err
		}
		if got == before {
			break // the log holds fewer than n
		}
	}
	return got, nil
}

// pagesReader reads GET /v1/all pages of limit events (client.ReadAll):
// the documented way to read the global log, and the fastest today.
type pagesReader struct{ limit int }

func (r pagesReader) ReadInOrder(ctx context.Context, c *client.Client, n int) (int, error) {
	got := 0
	for got < n {
		page, err := c.ReadAll(ctx, events.ReadOptions{From: uint64(got), Limit: min(r.limit, n-got)})
		if err != nil {
			return got, err
		}
		for _, e := range page.Events {
			if e.Position != uint64(got) {
				return got, fmt.Errorf("GET /v1/all: position %d where %d was due", e.Position, got)
			}
			got++
		}
		if len(page.Events) == 0 || page.Next == nil {
			break
		}
	}
	return got, nil
}

// subscribeReader reads the log over Server-Sent Events (GET
// /v1/subscribe?from=0, client.Subscribe): one request, one event per
// message.
type subscribeReader struct{}

// errEnough ends a subscription once it has delivered what was asked.
var errEnough = errors.New("enough events")

func (subscribeReader) ReadInOrder(ctx context.Context, c *client.Client, n int) (int, error) {
	got := 0
	if n == 0 {
		return 0, nil
	}
	err := c.Subscribe(ctx, 0, events.Filter{}, func(e events.Event) error {
		if e.Position != uint64(got) {
			return fmt.Errorf("GET /v1/subscribe: position %d where %d was due", e.Position, got)
		}
		got++
		if got == n {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return got, err
}
