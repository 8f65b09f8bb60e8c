package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/events"
)

func newTailCmd() *cobra.Command {
	var (
		r      remote
		from   uint64
		prefix string
		types  string
	)
	c := &cobra.Command{
		Use:   "tail",
		Short: "Follow the log live (catch-up from --from, then new events), over Server-Sent Events",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			f := events.Filter{StreamPrefix: prefix}
			if types != "" {
				f.Types = strings.Split(types, ",")
			}
			out := c.OutOrStdout()
			err := r.client().Subscribe(c.Context(), from, f, func(e events.Event) error {
				if r.json { // as stored: events.Event.AppendJSONLine
					_, err := out.Write(append(e.AppendJSONLine(nil), '\n'))
					return err
				}
				printEvent(c.OutOrStdout(), e)
				return nil
			})
			if c.Context().Err() != nil {
				return nil // interrupted: a normal end for tail
			}
			return err
		},
	}
	r.register(c)
	r.reads(c)
	f := c.Flags()
	f.Uint64Var(&from, "from", 0, "first position")
	f.StringVar(&prefix, "stream-prefix", "", "only streams starting with this")
	f.StringVar(&types, "types", "", "only these event types (comma-separated)")
	return c
}
