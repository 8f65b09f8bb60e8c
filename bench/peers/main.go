// Command peers compares greffe with etcd and NATS JetStream on the loads
// of issue #14 (shapes A–E), each server fresh per run in processes of its
// own, alternating the systems over the rounds, and prints one table of
// medians, ranges and ratios (README.md).
//
// It is a Go module of its own, so that etcd and NATS never enter greffe's
// go.mod.
//
//	go run . [--rounds 3] [--duration 10s] [--read-events 200000] [--json]
//	go run . fsyncs [--appends 2000] [--json]
//
// The hidden subcommands serve-etcd and serve-nats are the peers' server
// processes: this binary, re-executed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a bad command line.
type usageError struct{ error }

// run is the command: args without the program's name.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "serve-etcd", "serve-nats":
			fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
			dir := fs.String("dir", "", "data folder")
			if err := fs.Parse(args[1:]); err != nil {
				return usageError{err}
			}
			if *dir == "" {
				return usageError{errors.New(args[0] + ": --dir is required")}
			}
			if args[0] == "serve-etcd" {
				return serveEtcd(*dir)
			}
			return serveNats(*dir)
		case "fsyncs":
			return runFsyncs(ctx, args[1:], stdout, stderr)
		}
	}
	return runCompare(ctx, args, stdout, stderr)
}

// systemFlags are the flags of both the comparison and the fsync check.
type systemFlags struct {
	greffe     string
	greffeRead string
	systems    string
	dir        string
	json       bool
}

func (c *systemFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.greffe, "greffe", "", "the greffe binary to run (default: build ./cmd/greffe from the greffe source this module's go.mod replaces, ../..)")
	fs.StringVar(&c.greffeRead, "greffe-read", "entries", "how shape D reads greffe's log: entries (GET /v1/all?format=entries, the stored bytes framed), pages (GET /v1/all JSON pages of 10,000 events) or subscribe (GET /v1/subscribe, SSE)")
	fs.StringVar(&c.systems, "systems", "greffe,etcd,nats", "systems to run, comma-separated")
	fs.StringVar(&c.dir, "dir", "", "parent of the servers' temporary data folders (default: the system's temporary folder); put it on the disk to measure")
	fs.BoolVar(&c.json, "json", false, "print JSON")
}

// systems builds the systems c names, and the three-node greffe for
// shape E when greffe is among them. The greffe binary is built into a
// temporary folder that cleanup removes.
func (c *systemFlags) build(ctx context.Context, stderr io.Writer) (singles []system, cluster system, cleanup func(), err error) {
	cleanup = func() {}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, cleanup, err
	}
	reader, err := greffeReaderNamed(c.greffeRead)
	if err != nil {
		return nil, nil, cleanup, usageError{err}
	}
	for _, name := range strings.Split(c.systems, ",") {
		switch strings.TrimSpace(name) {
		case "greffe":
			bin := c.greffe
			if bin == "" {
				d, err := os.MkdirTemp("", "peers-bin-")
				if err != nil {
					return nil, nil, cleanup, err
				}
				cleanup = func() { os.RemoveAll(d) }
				fmt.Fprintln(stderr, "building greffe (go build ./cmd/greffe) …")
				if bin, err = buildGreffe(ctx, d); err != nil {
					return nil, nil, cleanup, err
				}
			}
			singles = append(singles, greffeSystem{bin: bin, reader: reader})
			cluster = greffeClusterSystem{bin: bin, reader: reader}
		case "etcd":
			singles = append(singles, etcdSystem{self: self})
		case "nats":
			singles = append(singles, natsSystem{self: self})
		case "":
		default:
			return nil, nil, cleanup, usageError{fmt.Errorf("--systems: unknown system %q (greffe, etcd, nats)", name)}
		}
	}
	if len(singles) == 0 {
		return nil, nil, cleanup, usageError{errNoSystems}
	}
	return singles, cluster, cleanup, nil
}

func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c systemFlags
	c.register(fs)
	st := settings{}
	fs.IntVar(&st.Rounds, "rounds", 3, "rounds: every shape runs against every system once per round")
	fs.DurationVar(&st.Duration, "duration", 10*time.Second, "length of each write run")
	fs.IntVar(&st.ReadEvents, "read-events", 200_000, "events shape D writes, then reads back in order")
	only := fs.String("shapes", "A,B,C,D,E", "shapes to run, comma-separated")
	quiet := fs.Bool("quiet", false, "do not print a line per run on stderr")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if st.Rounds < 1 || st.Duration <= 0 || st.ReadEvents < 1 {
		return usageError{errors.New("--rounds, --duration and --read-events must be positive")}
	}
	var shs []shape
	for _, n := range strings.Split(*only, ",") {
		found := false
		for _, sh := range shapes() {
			if sh.Name == strings.ToUpper(strings.TrimSpace(n)) {
				shs, found = append(shs, sh), true
			}
		}
		if !found {
			return usageError{fmt.Errorf("--shapes: unknown shape %q (A, B, C, D, E)", n)}
		}
	}
	singles, cluster, cleanup, err := c.build(ctx, stderr)
	defer cleanup()
	if err != nil {
		return err
	}
	st.Dir = c.dir
	if !*quiet {
		st.Log = stderr
	}
	h := newHeader(args, st)
	runs := runShapes(ctx, st, shs, singles, cluster)
	h.LoadEnd, h.LoadRuns = loadAverage(), loadRange(runs)
	var names []string
	for _, s := range singles {
		names = append(names, s.Name())
	}
	rows, failures := summarize(shs, names, st.ReadEvents, runs)
	r := report{Header: h, Systems: names, Shapes: rows, Runs: runs, Failures: failures}
	if c.json {
		err = writeJSON(stdout, r)
	} else {
		err = r.writeText(stdout)
	}
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

func runFsyncs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("peers fsyncs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c systemFlags
	c.register(fs)
	appends := fs.Int("appends", 2000, "acknowledged single-event appends to count fsyncs over")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *appends < 1 {
		return usageError{errors.New("--appends must be positive")}
	}
	singles, _, cleanup, err := c.build(ctx, stderr)
	defer cleanup()
	if err != nil {
		return err
	}
	counts := checkFsyncs(ctx, singles, *appends, c.dir)
	if c.json {
		return writeJSON(stdout, counts)
	}
	fmt.Fprintf(stdout, "fsync and fdatasync calls of each server process (strace -f -c -e trace=%s -p PID), shape A: 1 writer, %d acknowledged single-event appends of %d bytes; then as long with no load\n",
		syncCalls, *appends, payloadBytes)
	return writeFsyncsText(stdout, counts)
}

// newHeader records the run's context before it starts.
func newHeader(args []string, st settings) header {
	h := header{
		Command:   strings.TrimSpace("go run . " + strings.Join(args, " ")),
		Date:      time.Now().UTC().Format(time.RFC3339),
		CPUs:      runtime.NumCPU(),
		LoadStart: loadAverage(),
		Rounds:    st.Rounds,
		Duration:  st.Duration.String(),
		Read:      st.ReadEvents,
		Payload:   payloadBytes,
		With: map[string]string{
			"greffe": "greffe serve, its defaults (the store's own write-ahead log, fdatasync before each acknowledgement, six projections); Go client over HTTP, the requests of greffe bench --server",
			"etcd":   "etcd " + moduleVersion("go.etcd.io/etcd/server/v3") + " embedded (serve-etcd), its defaults (write-ahead log fdatasynced before each acknowledgement, unsafe-no-fsync off); clientv3 " + moduleVersion("go.etcd.io/etcd/client/v3"),
			"nats":   "nats-server " + moduleVersion("github.com/nats-io/nats-server/v2") + " embedded (serve-nats), JetStream file storage with SyncAlways (fsync of every message before its acknowledgement); nats.go " + moduleVersion("github.com/nats-io/nats.go"),
		},
	}
	return h
}

// moduleVersion is the version of module path this binary was built with.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "(unknown version)"
}

// loadAverage is /proc/loadavg's first three fields, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
