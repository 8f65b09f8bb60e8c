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
}

// demoPolicy is the default policy with every fixture's overrides: the
// histories were written so that they hold together under it.
func demoPolicy(hs []fixtures.History) (aggregates.Policy, error) {
	p := aggregates.DefaultPolicy()
	for _, h := range hs {
		if len(h.Header.Policy) > 0 {
			if err := json.Unmarshal(h.Header.Policy, &p); err != nil {
				return p, fmt.Errorf("%s: policy: %w", h.Name, err)
			}
		}
	}
	return p, p.Validate()
}

// runDemo starts a node on a demo clock, applies every fixture history,
// prints the readiness matrix and the URL, calls ready, and serves until
// ctx ends.
func runDemo(ctx context.Context, cfg demoConfig, w io.Writer, ready func(url string)) error {
	hs, err := fixtures.All()
	if err != nil {
		return err
	}
	pol, err := demoPolicy(hs)
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
	// The demo's clock moves only with the histories' command times, so
	// their freshness windows and expiries mean what they were written
	// for; it stays at the last one while the node serves.
	clock := commands.NewManualClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	n, err := node.Open(node.Config{DataDir: dir, API: api.Config{Addr: cfg.Addr}, Clock: clock, Policy: &pol,
		Store: pebblelog.Config{CheckpointInterval: -1}})
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- n.Serve(sctx) }()
	if err := demoApply(ctx, w, n, hs); err != nil {
		stop()
		<-served
		return err
	}
	fmt.Fprintf(w, "\ngreffe demo serving %s (data %s, demo time %s)\n", n.URL(), dir, clock.Now().Format(time.RFC3339))
	fmt.Fprintf(w, "try: greffe matrix --server %s\n     curl %s/v1/projections/missions\n     curl %s/v1/projections/audit?key=m-glm\n", n.URL(), n.URL(), n.URL())
	if ready != nil {
		ready(n.URL())
	}
	return <-served
}

func demoApply(ctx context.Context, w io.Writer, n *node.Node, hs []fixtures.History) error {
	c := client.New(n.URL(), "")
	if head := n.Store.Head().Size; head > 0 {
		fmt.Fprintf(w, "the data folder already holds %d events: serving it as it is\n", head)
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
	b, err := c.Projection(ctx, "readiness", client.ProjectionQuery{MinPosition: n.Store.Head().Size})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\nthe readiness matrix at the demo's time (the last history's): probes of earlier histories are hours old, so stale;")
	fmt.Fprintln(w, "greffe matrix says why each cell is what it is, and which event proves it")
	return printMatrix(w, b, false)
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
		Short: "Start a node, apply the seeds' histories (fixtures), print the readiness matrix and the URL, and serve until interrupted",
		Long: `demo starts a node in a temporary data folder (or --data), on a demo clock
that follows the histories' command times, applies every fixture history
through HTTP (each command checked against its expected outcome), prints the
readiness matrix and serves until interrupted (Ctrl-C). Explore it with
greffe matrix, greffe cmd, greffe verify-projections or curl.`,
		Args: cobra.NoArgs,
		Annotations: map[string]string{noJSONAnnotation: "an interactive walkthrough that serves until interrupted; " +
			"read its data as JSON from the node it serves (greffe matrix --json, greffe read --json, curl)"},
		RunE: func(c *cobra.Command, _ []string) error {
			return runDemo(c.Context(), cfg, c.OutOrStdout(), nil)
		},
	}
	c.Flags().StringVar(&cfg.Data, "data", "", "data folder (default: a temporary one, removed at exit)")
	c.Flags().StringVar(&cfg.Addr, "http", "127.0.0.1:7070", "HTTP listen address")
	return c
}
