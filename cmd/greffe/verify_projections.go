package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/projections/pebblestore"
)

// liveProjections is where verifyProjections finds the live projections
// and the log they were folded from: a running node (remoteProjections)
// or a stopped node's data folder (offlineProjections).
type liveProjections interface {
	// Live returns projection name as rendered by the node, judged at at.
	Live(ctx context.Context, name string, at time.Time) ([]byte, error)
	// Log reads the log the projections were folded from.
	Log() projections.Reader
	// Policy returns the node's policy (timed models render with it).
	Policy(ctx context.Context) (aggregates.Policy, error)
	// Describe names the source for the report.
	Describe() string
}

// projectionCheck is one projection compared with its rebuild.
type projectionCheck struct {
	Name     string `json:"name"`
	Position uint64 `json:"position"`
	Bytes    int    `json:"bytes"`
	SHA256   string `json:"sha256"`
	Equal    bool   `json:"equal"`
	// Difference shows where the live and rebuilt bytes first differ.
	Difference string `json:"difference,omitempty"`
}

// projectionsReport is the outcome of verifyProjections.
type projectionsReport struct {
	Source      string            `json:"source"`
	At          time.Time         `json:"at"`
	Projections []projectionCheck `json:"projections"`
	Verified    bool              `json:"verified"`
	Elapsed     time.Duration     `json:"elapsed_ns"`
}

// verifyProjections rebuilds every projection from position 0 in memory,
// up to the position the live one reports, and compares the two renders
// byte for byte, both judged at time at. The greffe verify command calls
// it for --projections; greffe verify-projections runs it alone. An error
// means it could not run; a difference is a report with Verified false.
func verifyProjections(ctx context.Context, src liveProjections, at time.Time) (*projectionsReport, error) {
	start := time.Now()
	pol, err := src.Policy(ctx)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	rep := &projectionsReport{Source: src.Describe(), At: at.UTC(), Verified: true}
	live := map[string][]byte{}
	var targets []projections.Target
	for _, name := range projections.Names() {
		b, err := src.Live(ctx, name, at)
		if err != nil {
			return nil, fmt.Errorf("projection %s: %w", name, err)
		}
		b = bytes.TrimSpace(b)
		var head struct {
			Position uint64 `json:"position"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return nil, fmt.Errorf("projection %s: %w", name, err)
		}
		live[name] = b
		targets = append(targets, projections.Target{Name: name, Upto: head.Position})
	}
	snaps, err := projections.Rebuild(ctx, src.Log(), projections.Env{Policy: pol}, targets)
	if err != nil {
		return nil, err
	}
	for _, snap := range snaps {
		b, err := snap.Render(projections.Query{Time: at})
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		pc := projectionCheck{Name: snap.Spec.Name, Position: snap.Position, Bytes: len(b), SHA256: hex.EncodeToString(sum[:]),
			Equal: bytes.Equal(live[snap.Spec.Name], b)}
		if !pc.Equal {
			pc.Difference = firstDifference(live[snap.Spec.Name], b)
			rep.Verified = false
		}
		rep.Projections = append(rep.Projections, pc)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// firstDifference shows the bytes around the first offset where live and
// rebuilt differ.
func firstDifference(live, rebuilt []byte) string {
	i := 0
	for i < len(live) && i < len(rebuilt) && live[i] == rebuilt[i] {
		i++
	}
	window := func(b []byte) string {
		lo, hi := max(i-60, 0), min(i+60, len(b))
		return string(b[lo:hi])
	}
	return fmt.Sprintf("at byte %d: live …%s… rebuilt …%s…", i, window(live), window(rebuilt))
}

// remoteProjections reads a running node over HTTP.
type remoteProjections struct{ c *client.Client }

func (r remoteProjections) Live(ctx context.Context, name string, at time.Time) ([]byte, error) {
	return r.c.Projection(ctx, name, client.ProjectionQuery{Time: at})
}

func (r remoteProjections) Log() projections.Reader { return clientReader{r.c} }

func (r remoteProjections) Policy(ctx context.Context) (aggregates.Policy, error) {
	var p aggregates.Policy
	b, err := r.c.Policy(ctx)
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(b, &p)
}

func (r remoteProjections) Describe() string { return r.c.Base }

// clientReader reads the log over HTTP, page by page.
type clientReader struct{ c *client.Client }

func (r clientReader) ReadAll(ctx context.Context, o events.ReadOptions) ([]events.Event, error) {
	out, err := r.c.ReadAll(ctx, o)
	return out.Events, err
}

// offlineProjections reads a stopped node's data folder: its ledger and
// the rows its projections stored.
type offlineProjections struct {
	dir   string
	store *pebblelog.Store
	set   *projections.Set
}

func openOffline(dir string) (*offlineProjections, error) {
	st, err := pebblelog.Open(pebblelog.Config{Dir: node.LedgerDir(dir), CheckpointInterval: -1})
	if err != nil {
		return nil, fmt.Errorf("open the ledger (is the node stopped?): %w", err)
	}
	rows, err := pebblestore.Open(filepath.Join(dir, "projections"), nil)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	set, err := projections.Open(projections.Config{Store: rows, Source: st, LedgerID: st.LedgerID(),
		Env: projections.Env{Policy: aggregates.DefaultPolicy()}, Passive: true})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return &offlineProjections{dir: dir, store: st, set: set}, nil
}

func (o *offlineProjections) Close() error { return errors.Join(o.set.Close(), o.store.Close()) }

func (o *offlineProjections) Live(_ context.Context, name string, at time.Time) ([]byte, error) {
	b, _, err := o.set.Render(name, projections.Query{Time: at})
	return b, err
}

func (o *offlineProjections) Log() projections.Reader { return o.store }

// Policy is the default one: offline, the rows and the rebuild are both
// rendered here with it, so the node's own policy does not matter to the
// comparison.
func (o *offlineProjections) Policy(context.Context) (aggregates.Policy, error) {
	return aggregates.DefaultPolicy(), nil
}

func (o *offlineProjections) Describe() string { return o.dir }

// newVerifyProjectionsCmd is the hidden command that runs verifyProjections
// alone (greffe verify --projections calls the same function).
func newVerifyProjectionsCmd() *cobra.Command {
	var (
		r    remote
		data string
		at   string
	)
	c := &cobra.Command{
		Use:    "verify-projections (--server URL | --data DIR)",
		Short:  "Rebuild every projection from position 0 in memory and compare it byte for byte with the live one (exit 0 equal, 1 different, 2 could not run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if data != "" && c.Flags().Changed("server") {
				return usageError{errors.New("give --data or --server, not both")}
			}
			t := time.Now().UTC()
			if at != "" {
				var err error
				if t, err = parseTimeFlag("--time", at); err != nil {
					return err
				}
			}
			var src liveProjections = remoteProjections{r.client()}
			if data != "" {
				off, err := openOffline(data)
				if err != nil {
					return &exitError{exitCannot, err}
				}
				defer off.Close()
				src = off
			}
			rep, err := verifyProjections(c.Context(), src, t)
			if err != nil {
				return &exitError{exitCannot, fmt.Errorf("verify-projections could not run: %w", err)}
			}
			if r.json {
				if err := printJSON(c.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				printProjectionsReport(c.OutOrStdout(), rep)
			}
			if !rep.Verified {
				return &exitError{exitRefused, errors.New("a live projection differs from its rebuild from position 0")}
			}
			return nil
		},
	}
	r.register(c)
	r.reads(c)
	c.Flags().StringVar(&data, "data", "", "a stopped node's data folder")
	c.Flags().StringVar(&at, "time", "", "judge timed projections at this RFC 3339 time (default: now)")
	return c
}

func printProjectionsReport(w io.Writer, rep *projectionsReport) {
	fmt.Fprintf(w, "source      %s\n", rep.Source)
	fmt.Fprintf(w, "judged at   %s\n", rep.At.Format(time.RFC3339))
	for _, p := range rep.Projections {
		verdict := "equal"
		if !p.Equal {
			verdict = "DIFFERENT " + p.Difference
		}
		fmt.Fprintf(w, "%-12s position %-8d %8d bytes  sha256 %s…  %s\n", p.Name, p.Position, p.Bytes, p.SHA256[:16], verdict)
	}
	fmt.Fprintf(w, "time        %s\n", rep.Elapsed.Round(time.Millisecond))
	if rep.Verified {
		fmt.Fprintln(w, "VERIFIED: every live projection equals its rebuild from position 0")
	}
}
