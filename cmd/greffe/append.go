package main

import (
	"bufio"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

func newAppendCmd() *cobra.Command {
	var (
		r        remote
		ev       wire.EventIn
		data     string
		meta     string
		expected string
	)
	c := &cobra.Command{
		Use:   "append STREAM",
		Short: "Append one event from flags, or events as JSONL on stdin (one {type, data, …} per line), atomically",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var x events.Expected
			if err := json.Unmarshal([]byte(jsonScalar(expected)), &x); err != nil {
				return usageError{fmt.Errorf("--expected-version: %w", err)}
			}
			var evs []wire.EventIn
			if ev.Type != "" {
				ev.Data, ev.Metadata = json.RawMessage(data), json.RawMessage(meta)
				evs = append(evs, ev)
			} else {
				sc := bufio.NewScanner(c.InOrStdin())
				sc.Buffer(make([]byte, 1<<20), events.MaxAppendBytes)
				for line := 1; sc.Scan(); line++ {
					if len(sc.Bytes()) == 0 {
						continue
					}
					var e wire.EventIn
					if err := api.DecodeStrict(bytesReader(sc.Bytes()), &e); err != nil {
						return usageError{fmt.Errorf("stdin line %d: %w", line, err)}
					}
					evs = append(evs, e)
				}
				if err := sc.Err(); err != nil {
					return err
				}
				if len(evs) == 0 {
					return usageError{fmt.Errorf("no event: give --type (and --data) or JSONL on stdin")}
				}
			}
			out, err := r.client().Append(c.Context(), args[0], x, evs)
			if err != nil {
				return err
			}
			if r.json {
				return printJSON(c.OutOrStdout(), out)
			}
			for _, e := range out.Events {
				c.Printf("%s@%d position %d id %s\n", e.Stream, e.Version, e.Position, e.ID)
			}
			if out.Duplicate {
				c.Println("(already in the log: nothing written)")
			}
			return nil
		},
	}
	r.register(c)
	f := c.Flags()
	f.StringVar(&ev.Type, "type", "", "event type (one event from flags)")
	f.StringVar(&ev.ID, "id", "", "event id (UUID; generated if empty) — the idempotency key")
	f.StringVar(&data, "data", "{}", "event data (a JSON object)")
	f.StringVar(&meta, "metadata", "{}", "event metadata (a JSON object)")
	f.StringVar(&ev.CorrelationID, "correlation-id", "", "correlation id")
	f.StringVar(&ev.CausationID, "causation-id", "", "causation id")
	f.StringVar(&expected, "expected-version", "any", "condition: any, no_stream, exists or a version number")
	return c
}

// jsonScalar turns a flag value into JSON for events.Expected.
func jsonScalar(s string) string {
	if s == "" {
		return `"any"`
	}
	if s[0] >= '0' && s[0] <= '9' {
		return s
	}
	return fmt.Sprintf("%q", s)
}
