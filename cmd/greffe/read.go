package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func newReadCmd() *cobra.Command {
	var (
		r        remote
		all      bool
		from     string
		limit    int
		backward bool
		vf       verifiedFlags
	)
	c := &cobra.Command{
		Use:   "read [STREAM | --all]",
		Short: "Read a stream by version, or the global log by position (--verified: proven against a signed checkpoint)",
		Long: `read prints a page of a stream (by version) or of the global log (--all,
by position).

With --verified every event printed is proven included in a signed
checkpoint (one round trip: ?prove=1), the checkpoint is checked against its
keys (--verifier, default the node's published ones), against the trusted
state (--state FILE, greffe verify --state's format: a checkpoint older
than it is a rollback, one it does not extend a fork) and, with
--witness-quorum, for cosignatures by that many --witness keys.

Exit codes: 0 read (and proven), 1 refused, or not verified (the event or
checkpoint at fault is named), 2 could not run.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if all == (len(args) == 1) {
				return usageError{fmt.Errorf("give a STREAM or --all")}
			}
			o := events.ReadOptions{Limit: limit}
			if backward {
				o.Direction = events.Backward
				o.From = events.FromEnd
			}
			if from != "" && from != "end" {
				if _, err := fmt.Sscan(from, &o.From); err != nil {
					return usageError{fmt.Errorf("--from %q: %w", from, err)}
				}
			}
			vc, err := vf.client(c.Context(), r.client())
			if err != nil {
				return err
			}
			var out client.ReadOut
			switch {
			case vc != nil && all:
				out, err = vc.ReadAll(c.Context(), o)
			case vc != nil:
				out, err = vc.ReadStream(c.Context(), args[0], o)
			case all:
				out, err = r.client().ReadAll(c.Context(), o)
			default:
				out, err = r.client().ReadStream(c.Context(), args[0], o)
			}
			if err != nil {
				return proofFault(err)
			}
			if r.json {
				return printJSON(c.OutOrStdout(), out)
			}
			for _, e := range out.Events {
				printEvent(c.OutOrStdout(), e)
			}
			return nil
		},
	}
	r.register(c)
	vf.register(c)
	f := c.Flags()
	f.BoolVar(&all, "all", false, "read the global log")
	f.StringVar(&from, "from", "", "first version (stream) or position (--all); \"end\" for backward reads")
	f.IntVar(&limit, "limit", 100, "events per page (1–10000)")
	f.BoolVar(&backward, "backward", false, "read backwards")
	return c
}

func printEvent(w io.Writer, e events.Event) {
	data := strings.TrimSpace(string(e.Data))
	if len(data) > 120 {
		data = data[:117] + "..."
	}
	fmt.Fprintf(w, "%6d  %s@%d  %s  %s  %s\n", e.Position, e.Stream, e.Version, e.RecordedAt.Format("2006-01-02T15:04:05.000Z"), e.Type, data)
}
