package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/export/kafka"
)

func newExportCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "export",
		Short: "Export the log of a node to other systems (kafka) or a file (jsonl)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newExportKafkaCmd(), newExportJSONLCmd())
	return c
}

func newExportKafkaCmd() *cobra.Command {
	var (
		r      remote
		cfg    kafka.Config
		follow bool
	)
	c := &cobra.Command{
		Use:   "kafka",
		Short: "Copy the log of --server into a Kafka topic, one message per event, resuming where the topic stops (docs/ECOSYSTEM.md)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			out := c.OutOrStdout()
			cl := r.client()
			info, err := cl.Info(ctx)
			if err != nil {
				return err
			}
			total := info.Head.Size
			if !follow {
				if total <= cfg.From {
					return printExport(out, r.json, cfg.From, cfg.From, nil)
				}
				cfg.Until = total
			}
			cfg.Logger = slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			progress := !r.json && isTerminal(out)
			if progress {
				cfg.Progress = func(ex uint64) { fmt.Fprint(out, exportLine(ex, total)) }
			}
			ex, err := kafka.New(cfg, cl)
			if err != nil {
				return usageError{err}
			}
			err = ex.Run(ctx)
			if progress {
				fmt.Fprintln(out)
			}
			if follow && ctx.Err() != nil {
				err = nil // interrupted: a normal end when following
			}
			if err != nil {
				return err
			}
			return printExport(out, r.json, cfg.From, ex.Exported(), ex)
		},
	}
	r.register(c)
	r.reads(c)
	f := c.Flags()
	f.StringSliceVar(&cfg.Brokers, "brokers", nil, "Kafka bootstrap brokers, HOST:PORT,... (required)")
	f.StringVar(&cfg.Topic, "topic", "", "topic to write to; it must exist (required)")
	f.Uint64Var(&cfg.From, "from", 0, "first position to export when the topic holds nothing of this ledger yet")
	f.BoolVar(&follow, "follow", false, "keep exporting new events; by default stop at the head seen at start (serve --export-kafka-* exports continuously)")
	f.IntVar(&cfg.MaxBatchEvents, "max-batch", kafka.DefaultMaxBatchEvents, "events per write")
	return c
}

// exportLine is one progress update on a terminal: a bar for the events
// below the head seen at start, then a count once past it.
func exportLine(exported, total uint64) string {
	// bar takes durations; counts scale the same way.
	return fmt.Sprintf("\r%s %d/%d events exported   ", bar(exported, total), exported, total)
}

func printExport(w io.Writer, asJSON bool, from, exported uint64, ex *kafka.Exporter) error {
	var resyncs, skipped uint64
	if ex != nil {
		resyncs, skipped = ex.Resyncs(), ex.Skipped()
	}
	if asJSON {
		return printJSON(w, map[string]any{"from": from, "exported": exported, "resyncs": resyncs, "skipped_at_tails": skipped})
	}
	_, err := fmt.Fprintf(w, "positions [%d, %d) are in the topic (%d resumes after errors, %d events found already there)\n", from, exported, resyncs, skipped)
	return err
}
