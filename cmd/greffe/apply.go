package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/fixtures"
)

// loadHistories reads the histories named by args: JSONL files ("-" is
// stdin) or the names of embedded fixtures; all the fixtures with all.
func loadHistories(args []string, all bool, stdin io.Reader) ([]fixtures.History, error) {
	var out []fixtures.History
	if all {
		hs, err := fixtures.All()
		if err != nil {
			return nil, err
		}
		out = append(out, hs...)
	}
	for _, a := range args {
		var rd io.Reader
		switch f, err := os.Open(a); {
		case a == "-":
			rd = stdin
		case err == nil:
			defer f.Close()
			rd = f
		default:
			h, nerr := fixtures.Named(a)
			if nerr != nil {
				return nil, usageError{fmt.Errorf("%s is neither a readable file (%v) nor an embedded fixture", a, err)}
			}
			out = append(out, h)
			continue
		}
		h, err := fixtures.Parse(a, rd)
		if err != nil {
			return nil, usageError{err}
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, usageError{errors.New("name a history (FILE.jsonl, - for stdin, or a fixture name) or give --fixtures")}
	}
	return out, nil
}

// policyWarning says when the node's policy is not the one a history was
// written for: its outcomes may then differ.
func policyWarning(node json.RawMessage, h *fixtures.History) string {
	want, err := h.Policy()
	if err != nil {
		return err.Error()
	}
	var got aggregates.Policy
	if err := json.Unmarshal(node, &got); err != nil {
		return "the node's policy does not decode: " + err.Error()
	}
	a, _ := json.Marshal(want)
	b, _ := json.Marshal(got)
	if bytes.Equal(a, b) {
		return ""
	}
	return fmt.Sprintf("%s was written for the policy %s; the node runs %s: outcomes may differ", h.Name, a, b)
}

func newApplyCmd() *cobra.Command {
	var (
		r      remote
		noTime bool
		all    bool
	)
	c := &cobra.Command{
		Use:   "apply FILE.jsonl|FIXTURE ...",
		Short: "Apply command histories (JSONL: one command per line with its expected outcome), stopping at the first unexpected outcome",
		Long: `apply sends each command of a history (see fixtures/doc.go for the format)
and checks its outcome: the events it must append, or the code it must be
refused with; lines that check a read model's row are checked too. It stops
at the first unexpected outcome (exit 1) and says which line and what
differs.

A history's "at" times are sent with each command: the node must run on a
settable clock (greffe demo, or tests). --no-time sends none: the node's
clock decides, and histories whose gates depend on time may then differ.

Arguments are JSONL files, - for stdin, or names of the embedded fixtures
(glm_corrected, stagnation, …); --fixtures applies them all.`,
		RunE: func(c *cobra.Command, args []string) error {
			hs, err := loadHistories(args, all, c.InOrStdin())
			if err != nil {
				return err
			}
			cl := r.client()
			pol, err := cl.Policy(c.Context())
			if err != nil {
				return err
			}
			var reports []fixtures.Report
			for _, h := range hs {
				if w := policyWarning(pol, &h); w != "" {
					fmt.Fprintln(c.ErrOrStderr(), "warning:", w)
				}
				rep, err := applyOne(c, cl, h, !noTime, !r.json && isTerminal(c.ErrOrStderr()))
				if err != nil {
					return err
				}
				reports = append(reports, rep)
				if !r.json {
					fmt.Fprintf(c.OutOrStdout(), "%-24s %3d commands: %3d appended, %2d unchanged, %2d refused, %d malformed; %2d checks; log at %d\n",
						h.Name, rep.Commands, rep.Appended, rep.Unchanged, rep.Refused, rep.Errors, rep.Checks, rep.Position)
				}
			}
			if r.json {
				return printJSON(c.OutOrStdout(), reports)
			}
			return nil
		},
	}
	r.register(c)
	c.Flags().BoolVar(&noTime, "no-time", false, "send no command times: the node's clock decides")
	c.Flags().BoolVar(&all, "fixtures", false, "apply every embedded fixture history")
	return c
}

// applyOne runs one history, drawing a progress bar on a terminal.
func applyOne(c *cobra.Command, cl *client.Client, h fixtures.History, withTime, progress bool) (fixtures.Report, error) {
	o := fixtures.Options{Time: withTime}
	errw := c.ErrOrStderr()
	if progress {
		o.Progress = func(done, total int, _ *fixtures.Line) {
			fmt.Fprintf(errw, "\r%s %s %d/%d   ", bar(done, total), h.Name, done, total)
		}
	}
	rep, err := fixtures.Run(c.Context(), cl, h, o)
	if progress {
		fmt.Fprintln(errw)
	}
	var me *fixtures.MismatchError
	if errors.As(err, &me) {
		if strings.Contains(me.Got, "command_time_not_allowed") {
			err = fmt.Errorf("%w\nthe node runs on the system clock: apply with --no-time, or use greffe demo", err)
		}
		return rep, &exitError{exitRefused, err}
	}
	return rep, err
}
