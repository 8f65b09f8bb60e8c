package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/export/kurrent"
)

func newMirrorCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "mirror",
		Short: "Mirror the ledger of a node into another event store (kurrentdb)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newMirrorKurrentCmd())
	return c
}

func newMirrorKurrentCmd() *cobra.Command {
	var (
		r      remote
		cfg    kurrent.Config
		url    string
		follow bool
	)
	c := &cobra.Command{
		Use:   "kurrentdb",
		Short: "Copy the ledger of --server into a KurrentDB/EventStoreDB (--url esdb://...), resuming where the target stops (docs/ECOSYSTEM.md)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			out := c.OutOrStdout()
			if url == "" {
				return usageError{fmt.Errorf("--url is required, e.g. esdb://127.0.0.1:2113?tls=false")}
			}
			ec, err := esdb.ParseConnectionString(url)
			if err != nil {
				return usageError{fmt.Errorf("--url: %w", err)}
			}
			logger := slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			ec.Logger = esdbLogger(logger)
			target, err := esdb.NewClient(ec)
			if err != nil {
				return usageError{fmt.Errorf("--url: %w", err)}
			}
			defer target.Close()
			cl := r.client()
			info, err := cl.Info(ctx)
			if err != nil {
				return err
			}
			total := info.Head.Size
			if !follow {
				if total <= cfg.From {
					return printMirror(out, r.json, cfg.From, cfg.From)
				}
				cfg.Until = total
			}
			cfg.Logger = logger
			progress := !r.json && isTerminal(out)
			if progress {
				cfg.Progress = func(n uint64) {
					fmt.Fprintf(out, "\r%s %d/%d events mirrored   ", bar(n, total), n, total)
				}
			}
			m, err := kurrent.New(cfg, httpSource{cl}, target)
			if err != nil {
				return usageError{err}
			}
			start, err := m.Resume(ctx)
			if err != nil {
				return err
			}
			if !r.json {
				fmt.Fprintf(out, "mirroring from position %d (head %d) into %s\n", start, total, url)
			}
			err = m.Run(ctx)
			if progress {
				fmt.Fprintln(out)
			}
			if follow && ctx.Err() != nil {
				err = nil // interrupted: a normal end when following
			}
			if err != nil {
				return err
			}
			return printMirror(out, r.json, start, m.Mirrored())
		},
	}
	r.register(c)
	r.reads(c)
	f := c.Flags()
	f.StringVar(&url, "url", "", "target connection string, e.g. esdb://127.0.0.1:2113?tls=false (required)")
	f.Uint64Var(&cfg.From, "from", 0, "first position to copy when the target holds nothing of this ledger yet (above 0: appends use expected revision any)")
	f.BoolVar(&follow, "follow", false, "keep copying new events; by default stop at the head seen at start")
	f.IntVar(&cfg.MaxBatchEvents, "max-batch", 100, "events of one stream per append")
	return c
}

func printMirror(w io.Writer, asJSON bool, from, mirrored uint64) error {
	if asJSON {
		return printJSON(w, map[string]any{"from": from, "mirrored": mirrored})
	}
	_, err := fmt.Fprintf(w, "mirrored positions [%d, %d) into the target\n", from, mirrored)
	return err
}

// httpSource reads the ledger to mirror from a node's HTTP API: the
// subscription is the client's, and EventByID translates the API's
// not_found into events.ErrNotFound.
type httpSource struct{ *client.Client }

func (s httpSource) EventByID(ctx context.Context, id uuid.UUID) (events.Event, error) {
	e, err := s.Event(ctx, id.String())
	if client.CodeOf(err) == events.CodeNotFound {
		return events.Event{}, fmt.Errorf("event %s: %w", id, events.ErrNotFound)
	}
	return e, err
}

// esdbLogger sends the EventStore client's warnings and errors to logger
// (its default writes everything to standard output).
func esdbLogger(logger *slog.Logger) esdb.LoggingFunc {
	return func(level esdb.LogLevel, format string, args ...any) {
		switch level {
		case esdb.LogError:
			logger.Error("kurrentdb client: " + fmt.Sprintf(format, args...))
		case esdb.LogWarn:
			logger.Warn("kurrentdb client: " + fmt.Sprintf(format, args...))
		}
	}
}
