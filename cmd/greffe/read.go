package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func newReadCmd() *cobra.Command {
	var (
		r        remote
		all      bool
		from     string
		to       string
		limit    int
		backward bool
		vf       verifiedFlags
		jsonl    bool
	)
	c := &cobra.Command{
		Use:   "read [STREAM | --all]",
		Short: "Read a stream by version, or the global log by position (--all: --from, --to, --limit 0 for all, --jsonl; --verified: proven)",
		Long: `read prints a stream's events by version, or the global log's by position.

A stream: one page of --limit events (1–10000) from --from.

--all (forward): the events at positions [--from, --to), at most --limit of
them (0: every one up to --to, or to the head), read page by page. When the
limit stops it before the head, a line on stderr says how to go on.

--jsonl prints one event per line (JSON Lines), for jq and other tools;
--json one object {"events": [...], "next": N} (next: where to go on).
greffe export jsonl --out FILE writes the whole log as JSON Lines.

With --verified (one page: no --to, --limit 1–10000) every event printed is
proven included in a signed checkpoint (one round trip: ?prove=1), the
checkpoint is checked against its keys (--verifier, default the node's
published ones), against the trusted state (--state FILE, greffe verify
--state's format: a checkpoint older than it is a rollback, one it does not
extend a fork) and, with --witness-quorum, for cosignatures by that many
--witness keys.

Exit codes: 0 read (and proven), 1 refused, or not verified (the event or
checkpoint at fault is named), 2 could not run.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if all == (len(args) == 1) {
				return usageError{fmt.Errorf("give a STREAM or --all")}
			}
			if r.json && jsonl {
				return usageError{fmt.Errorf("--json and --jsonl: choose one")}
			}
			o := events.ReadOptions{Limit: limit}
			if backward {
				o.Direction = events.Backward
				o.From = events.FromEnd
			}
			if from != "" && from != "end" {
				v, err := strconv.ParseUint(from, 10, 64)
				if err != nil {
					return usageError{fmt.Errorf("--from %q: use a non-negative integer (a version, or a position with --all), or \"end\" with --backward", from)}
				}
				o.From = v
			}
			var toPos *uint64
			if to != "" {
				v, err := strconv.ParseUint(to, 10, 64)
				if err != nil || !all || backward {
					return usageError{fmt.Errorf("--to %q: a position (a non-negative integer), with --all forward only", to)}
				}
				toPos = &v
			}
			if limit < 0 || (limit == 0 && !(all && !backward)) {
				return usageError{fmt.Errorf("--limit %d: use 1 to %d (0, to read to the head, with --all forward only)", limit, events.MaxReadLimit)}
			}
			cl := r.client()
			vc, err := vf.client(c.Context(), cl)
			if err != nil {
				return err
			}
			if vc != nil && (toPos != nil || limit == 0) {
				return usageError{fmt.Errorf("--verified reads one page: without --to, with --limit 1 to %d", events.MaxReadLimit)}
			}
			var out wire.ReadOut
			switch {
			case vc != nil && all:
				out, err = vc.ReadAll(c.Context(), o)
			case vc != nil:
				out, err = vc.ReadStream(c.Context(), args[0], o)
			case all && !backward:
				out, err = readAllRange(c, cl, o.From, toPos, limit)
			case all:
				out, err = cl.ReadAll(c.Context(), o)
			default:
				out, err = cl.ReadStream(c.Context(), args[0], o)
			}
			if err != nil {
				return proofFault(err)
			}
			w := bufio.NewWriter(c.OutOrStdout())
			defer w.Flush()
			switch {
			case r.json:
				return printJSON(w, out)
			case jsonl:
				for _, e := range out.Events { // as stored: events.Event.AppendJSONLine
					if _, err := w.Write(append(e.AppendJSONLine(nil), '\n')); err != nil {
						return err
					}
				}
			default:
				for _, e := range out.Events {
					printEvent(w, e)
				}
			}
			if all && !backward && out.Next != nil {
				fmt.Fprintf(c.ErrOrStderr(), "more events from position %d: --from %d, or --limit 0 to read to the head\n", *out.Next, *out.Next)
			}
			return w.Flush()
		},
	}
	r.register(c)
	vf.register(c)
	r.reads(c)
	f := c.Flags()
	f.BoolVar(&all, "all", false, "read the global log")
	f.StringVar(&from, "from", "", "first version (stream) or position (--all); \"end\" for backward reads")
	f.StringVar(&to, "to", "", "with --all: stop before this position (default: the head)")
	f.IntVar(&limit, "limit", 100, "events to print (a stream, --backward: one page, 1–10000; --all: any number, 0 for all)")
	f.BoolVar(&backward, "backward", false, "read backwards")
	f.BoolVar(&jsonl, "jsonl", false, "print JSON Lines: one event per line")
	return c
}

// readAllRange reads the global log's positions [from, to) (to nil: to the
// head as it grows while reading), at most limit events (0: no bound),
// page by page. Next is set when limit stopped it before to and the head.
func readAllRange(c *cobra.Command, cl *client.Client, from uint64, to *uint64, limit int) (wire.ReadOut, error) {
	out := wire.ReadOut{Events: []events.Event{}}
	next := from
	for {
		if to != nil && next >= *to {
			return out, nil
		}
		page := events.MaxReadLimit
		if limit > 0 {
			if len(out.Events) >= limit {
				// Is there more? A page full to the limit may end at
				// the head.
				more, err := cl.ReadAll(c.Context(), events.ReadOptions{From: next, Limit: 1})
				if err != nil {
					return out, err
				}
				if len(more.Events) > 0 && (to == nil || next < *to) {
					n := next
					out.Next = &n
				}
				return out, nil
			}
			page = min(page, limit-len(out.Events))
		}
		if to != nil {
			page = int(min(uint64(page), *to-next))
		}
		res, err := cl.ReadAll(c.Context(), events.ReadOptions{From: next, Limit: page})
		if err != nil {
			return out, err
		}
		out.Events = append(out.Events, res.Events...)
		// next says there may be more: a full page, or one the node cut
		// at its byte budget (fewer events than asked, issue #20).
		if res.Next == nil || len(res.Events) == 0 {
			return out, nil // the head
		}
		next = *res.Next
	}
}

func printEvent(w io.Writer, e events.Event) {
	data := strings.TrimSpace(string(e.Data))
	if len(data) > 120 {
		data = data[:117] + "..."
	}
	fmt.Fprintf(w, "%6d  %s@%d  %s  %s  %s\n", e.Position, e.Stream, e.Version, e.RecordedAt.Format("2006-01-02T15:04:05.000Z"), e.Type, data)
}
