package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/projections"
)

func newMatrixCmd() *cobra.Command {
	var (
		r  remote
		at string
		tm string
	)
	c := &cobra.Command{
		Use:   "matrix",
		Short: "Print the readiness matrix: one row per provider, each column's state and why, with the event that proves it",
		Long: `matrix prints the readiness projection as a table. Each provider has four
columns (configuration_ready, eligible_for_attempt, live_proven,
activation_ready); a cell shows ✓ or ✗ and its state, and the lines under the
row say why and which event proves it. not_probed and failed stay distinct;
dormant providers are shown and marked.

--at P shows the matrix as of log position P (replayed from position 0);
--at TIME (RFC 3339) or --time judges freshness at that time instead of the
node's clock.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var q client.ProjectionQuery
			if at != "" {
				if p, err := strconv.ParseUint(at, 10, 64); err == nil {
					q.At = &p
				} else if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
					q.Time = t
				} else {
					return usageError{fmt.Errorf("--at %q: use a log position (an integer) or an RFC 3339 time, e.g. %s", at, events.RFC3339Example)}
				}
			}
			if tm != "" {
				t, err := parseTimeFlag("--time", tm)
				if err != nil {
					return err
				}
				q.Time = t
			}
			b, err := r.client().Projection(c.Context(), "readiness", q)
			if err != nil {
				return err
			}
			if r.json {
				_, err := c.OutOrStdout().Write(b)
				return err
			}
			return printMatrix(c.OutOrStdout(), b, true)
		},
	}
	r.register(c)
	r.reads(c)
	c.Flags().StringVar(&at, "at", "", "a log position (the matrix as of then) or an RFC 3339 time")
	c.Flags().StringVar(&tm, "time", "", "judge freshness at this RFC 3339 time")
	return c
}

// printMatrix writes the readiness projection b as a table and, with
// reasons, why each cell is what it is and which event proves it.
func printMatrix(w io.Writer, b []byte, reasons bool) error {
	var out struct {
		Position uint64                     `json:"position"`
		At       *time.Time                 `json:"at"`
		Rows     []projections.ReadinessRow `json:"rows"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("readiness: %w", err)
	}
	when := ""
	if out.At != nil {
		when = " at " + out.At.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "readiness%s, as of position %d: %d provider(s)\n", when, out.Position, len(out.Rows))
	if len(out.Rows) == 0 {
		fmt.Fprintln(w, "no provider is declared: nothing is ready (an empty inventory is never ready)")
		return nil
	}
	cell := func(f aggregates.Fact) string {
		if f.Ready {
			return "✓ " + f.State
		}
		return "✗ " + f.State
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tKIND\tCONFIGURATION\tELIGIBLE\tLIVE\tACTIVATION\t")
	for _, r := range out.Rows {
		name := r.Provider
		if r.Dormant {
			name += " (dormant)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", name, r.Kind, cell(r.ConfigurationReady), cell(r.EligibleForAttempt), cell(r.LiveProven), cell(r.ActivationReady))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !reasons {
		return nil
	}
	for _, r := range out.Rows {
		fmt.Fprintf(w, "\n%s (%s, %s):\n", r.Provider, r.Profile, r.ModelTag)
		for _, col := range []struct {
			name string
			f    aggregates.Fact
		}{{"configuration", r.ConfigurationReady}, {"eligible", r.EligibleForAttempt}, {"live", r.LiveProven}, {"activation", r.ActivationReady}} {
			proof := "no proving event"
			if p := col.f.Proof; p != nil {
				proof = fmt.Sprintf("%s@%d, position %d", p.Stream, p.Version, p.Position)
			}
			fmt.Fprintf(w, "  %-14s %s (%s)\n", col.name+":", strings.TrimSpace(col.f.Reason), proof)
		}
	}
	return nil
}
