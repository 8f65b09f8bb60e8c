package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/fixtures"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/projections"
)

// demoConfig is what greffe demo runs.
type demoConfig struct {
	// Data is the data folder; empty means a temporary one, removed at exit.
	Data string
	// Addr is the HTTP listen address.
	Addr string
	// ProbeInterval is the live part's probe schedules' interval; zero
	// means defaultDemoProbeInterval.
	ProbeInterval time.Duration
}

// demoPolicy is the default policy with every fixture's overrides: the
// histories were written so that they hold together under it. The probe
// schedules' floor is lowered to interval when that is shorter, so the
// live part can probe as often as asked.
func demoPolicy(hs []fixtures.History, interval time.Duration) (aggregates.Policy, error) {
	p := aggregates.DefaultPolicy()
	for _, h := range hs {
		if len(h.Header.Policy) > 0 {
			if err := json.Unmarshal(h.Header.Policy, &p); err != nil {
				return p, fmt.Errorf("%s: policy: %w", h.Name, err)
			}
		}
	}
	if interval > 0 && interval < p.ProbeSchedule.MinInterval.Duration {
		p.ProbeSchedule.MinInterval = aggregates.D(interval)
	}
	return p, p.Validate()
}

// runDemo applies every fixture history on a demo clock (when the folder
// is empty), then reopens the node on the wall clock, never before the
// ledger's last recorded time, starts the live part (stand-in runtimes,
// an executor, probe schedules), prints the readiness matrix and how to
// watch it, calls ready, and serves until ctx ends.
func runDemo(ctx context.Context, cfg demoConfig, w io.Writer, ready func(url string)) error {
	interval := cfg.ProbeInterval
	if interval <= 0 {
		interval = defaultDemoProbeInterval
	}
	if interval < time.Millisecond {
		return &exitError{code: exitCannot, err: fmt.Errorf("--probe-interval %s: must be at least 1ms", interval)}
	}
	hs, err := fixtures.All()
	if err != nil {
		return err
	}
	pol, err := demoPolicy(hs, interval)
	if err != nil {
		return err
	}
	dir := cfg.Data
	if dir == "" {
		if dir, err = os.MkdirTemp("", "greffe-demo-*"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	floor, err := demoHistories(ctx, w, dir, pol, hs)
	if err != nil {
		return err
	}
	// The live part runs on the wall clock, shifted to never read before
	// what the ledger already holds: a second run on the same folder
	// stamps nothing earlier than events stored by the first.
	clock := commands.NewFloorClock(floor, nil)
	n, err := node.Open(node.Config{DataDir: dir, API: api.Config{Addr: cfg.Addr}, Clock: clock.Now, Policy: &pol,
		Store: pebblelog.Config{CheckpointInterval: -1}})
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- n.Serve(sctx) }()
	live, err := startLive(ctx, w, n, dir, interval)
	if err != nil {
		stop()
		<-served
		return err
	}
	defer live.stop()
	c := client.New(n.URL(), "")
	waitFirstProbes(ctx, c, 3*interval+10*time.Second)
	b, err := c.Projection(ctx, "readiness", client.ProjectionQuery{MinPosition: n.Store.Head().Size})
	if err != nil {
		stop()
		<-served
		return err
	}
	fmt.Fprintln(w, "\nthe readiness matrix now; greffe matrix says why each cell is what it is, and which event proves it")
	if err := printMatrix(w, b, false); err != nil {
		stop()
		<-served
		return err
	}
	if err := printHistory(ctx, w, c); err != nil {
		stop()
		<-served
		return err
	}
	fmt.Fprintf(w, "\ngreffe demo serving %s (data %s, clock %s)\n", n.URL(), dir, clock.Now().Format(time.RFC3339))
	fmt.Fprintf(w, "watch it:  %s/ (the dashboard)\n           greffe matrix --server %s\n           greffe tail --server %s\n", n.URL(), n.URL(), n.URL())
	fmt.Fprintf(w, "turn rows red: curl -X POST %s   (stops the ollama stand-in; its rows fail at the next probe)\n", live.standIns["ollama"].StopURL())
	fmt.Fprintf(w, "try:       curl %s/v1/projections/missions\n           curl %s/v1/projections/audit?key=m-glm\n", n.URL(), n.URL())
	if ready != nil {
		ready(n.URL())
	}
	return <-served
}

// demoHistories opens the folder on a demo clock that follows the
// histories' command times (so their freshness windows and expiries mean
// what they were written for), applies them when the folder is empty,
// closes it, and returns the time the live part's clock may not go below:
// the ledger's last recorded time, or the last history's time when later.
func demoHistories(ctx context.Context, w io.Writer, dir string, pol aggregates.Policy, hs []fixtures.History) (time.Time, error) {
	clock := commands.NewManualClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	n, err := node.Open(node.Config{DataDir: dir, API: api.Config{Addr: "127.0.0.1:0"}, Clock: clock.Now, SetClock: clock.Set, Policy: &pol,
		Store: pebblelog.Config{CheckpointInterval: -1}})
	if err != nil {
		return time.Time{}, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- n.Serve(sctx) }()
	err = demoApply(ctx, w, n, hs)
	floor := time.Unix(0, n.Store.Head().RecordedAt).UTC()
	if t := clock.Now(); t.After(floor) && n.Store.Head().Size > 0 {
		floor = t
	}
	stop()
	if serr := <-served; err == nil {
		err = serr
	}
	return floor, err
}

func demoApply(ctx context.Context, w io.Writer, n *node.Node, hs []fixtures.History) error {
	c := client.New(n.URL(), "")
	if head := n.Store.Head().Size; head > 0 {
		fmt.Fprintf(w, "the data folder already holds %d events: the histories are not applied again\n", head)
	} else {
		for _, h := range hs {
			rep, err := fixtures.Run(ctx, c, h, fixtures.Options{Time: true})
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%-22s %3d commands, %2d refused as expected: %s\n", h.Name, rep.Commands, rep.Refused, h.Title)
			if err := demoProviders(ctx, w, c, h, rep); err != nil {
				return err
			}
		}
	}
	return nil
}

// demoProviders prints the readiness of the providers a history declared,
// judged when the history ended.
func demoProviders(ctx context.Context, w io.Writer, c *client.Client, h fixtures.History, rep fixtures.Report) error {
	seen := map[string]bool{}
	for _, l := range h.Lines {
		var d struct {
			Name string `json:"name"`
		}
		if l.Command != "DeclareProvider" || json.Unmarshal(l.Data, &d) != nil || seen[d.Name] {
			continue
		}
		seen[d.Name] = true
		b, err := c.Projection(ctx, "readiness", client.ProjectionQuery{Key: d.Name, Time: rep.At, MinPosition: rep.Position})
		if err != nil {
			return err
		}
		var out struct {
			Rows []projections.ReadinessRow `json:"rows"`
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Rows) != 1 {
			continue
		}
		r := out.Rows[0]
		mark := func(f aggregates.Fact) string {
			if f.Ready {
				return "✓ " + f.State
			}
			return "✗ " + f.State
		}
		fmt.Fprintf(w, "    %-18s configuration %-18s live %-18s activation %s\n", d.Name, mark(r.ConfigurationReady), mark(r.LiveProven), mark(r.ActivationReady))
	}
	return nil
}

func newDemoCmd() *cobra.Command {
	var cfg demoConfig
	c := &cobra.Command{
		Use:   "demo",
		Short: "Start a node, apply the seeds' histories (fixtures), start stand-in runtimes, an executor and probe schedules, and serve until interrupted",
		Long: `demo starts a node in a temporary data folder (or --data) and applies every
fixture history through HTTP on a demo clock that follows the histories'
command times (each command checked against its expected outcome; skipped
when the folder already holds events). It then reopens the node on the wall
clock (never before the ledger's last recorded time) and starts a live part:
two OpenAI-compatible stand-in runtimes on 127.0.0.1 (one like Ollama, one
like a llama.cpp server listing only an alias), providers declared on them,
an executor whose key is registered under an approval, and a probe schedule
per live provider (--probe-interval). Within seconds the Ollama rows are
green, the llama.cpp row stays not live (alias_not_exact), and stopping the
Ollama stand-in (the curl it prints) turns its rows red at the next probe.
The seeds' providers stay, marked as history. It serves until interrupted
(Ctrl-C). Explore it with the dashboard, greffe matrix, greffe cmd, greffe
verify-projections or curl.`,
		Args: cobra.NoArgs,
		Annotations: map[string]string{noJSONAnnotation: "an interactive walkthrough that serves until interrupted; " +
			"read its data as JSON from the node it serves (greffe matrix --json, greffe read --json, curl)"},
		RunE: func(c *cobra.Command, _ []string) error {
			return runDemo(c.Context(), cfg, c.OutOrStdout(), nil)
		},
	}
	c.Flags().StringVar(&cfg.Data, "data", "", "data folder (default: a temporary one, removed at exit)")
	c.Flags().StringVar(&cfg.Addr, "http", "127.0.0.1:7070", "HTTP listen address")
	c.Flags().DurationVar(&cfg.ProbeInterval, "probe-interval", defaultDemoProbeInterval, "interval of the live part's probe schedules")
	return c
}
