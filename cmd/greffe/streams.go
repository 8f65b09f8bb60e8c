package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

func newStreamsCmd() *cobra.Command {
	var (
		r      remote
		prefix string
		after  string
		limit  int
	)
	c := &cobra.Command{
		Use:   "streams [--prefix P]",
		Short: "List the streams in name order, with their last version and position (GET /v1/streams)",
		Long: `streams lists the streams whose name starts with --prefix, in name order,
each with its event count, last version and the position of its last event.

--limit bounds how many are listed (0: all, page by page); when more are
left, the last line says how to go on (--after NAME).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageError{fmt.Errorf("--limit %d: use 0 (all) or more", limit)}
			}
			cl := r.client()
			all := wire.StreamsOut{Streams: []events.StreamInfo{}}
			for {
				page := events.MaxListStreams
				if limit > 0 {
					page = min(page, limit-len(all.Streams))
				}
				out, err := cl.Streams(c.Context(), prefix, after, page)
				if err != nil {
					return err
				}
				all.Streams = append(all.Streams, out.Streams...)
				after, all.Next = out.Next, out.Next
				if out.Next == "" || (limit > 0 && len(all.Streams) >= limit) {
					break
				}
			}
			if r.json {
				return printJSON(c.OutOrStdout(), all)
			}
			w := c.OutOrStdout()
			for _, s := range all.Streams {
				fmt.Fprintf(w, "%-40s %8d events  last version %d at position %d\n", s.Name, s.Version+1, s.Version, s.Position)
			}
			if all.Next != "" {
				fmt.Fprintf(c.ErrOrStderr(), "more streams after %s: --after %q\n", all.Next, all.Next)
			}
			return nil
		},
	}
	r.register(c)
	r.reads(c)
	f := c.Flags()
	f.StringVar(&prefix, "prefix", "", "only streams whose name starts with this")
	f.StringVar(&after, "after", "", "start after this stream name (the next page)")
	f.IntVar(&limit, "limit", 0, "list at most this many (0: all)")
	return c
}
