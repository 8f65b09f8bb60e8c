package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/events"
)

func newExportJSONLCmd() *cobra.Command {
	var (
		r        remote
		outPath  string
		from, to uint64
		force    bool
	)
	c := &cobra.Command{
		Use:   "jsonl --out FILE",
		Short: "Write the log of --server to FILE as JSON Lines, one event per line, with a progress bar",
		Long: `export jsonl writes the events at positions [--from, --to) (--to 0: the
head when it starts) to FILE, one event per line as GET /v1/all shows it,
leaf_hash included. It reads the node's stored bytes
(GET /v1/all?format=entries), the fast read, and writes FILE.tmp, then
renames it to FILE once complete: a FILE that exists is whole. An
existing FILE is refused unless --force.

A progress bar is drawn on a terminal (stderr).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if outPath == "" {
				return usageError{errors.New("--out FILE is required")}
			}
			if _, err := os.Stat(outPath); err == nil && !force {
				return usageError{fmt.Errorf("--out %s exists; choose another name, or --force to replace it", outPath)}
			}
			ctx := c.Context()
			cl := r.client()
			if to == 0 {
				info, err := cl.Info(ctx)
				if err != nil {
					return err
				}
				to = info.Head.Size
			}
			if from > to {
				return usageError{fmt.Errorf("--from %d is beyond --to %d (or the head)", from, to)}
			}
			tmp := outPath + ".tmp"
			f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return &exitError{exitCannot, fmt.Errorf("--out: %w", err)}
			}
			defer func() {
				f.Close()
				os.Remove(tmp) // gone after the rename
			}()
			w := bufio.NewWriterSize(f, 1<<20)
			errw := c.ErrOrStderr()
			progress := isTerminal(errw)
			start := time.Now()
			var last time.Time
			var written int64
			next := from
			for next < to {
				n, err := cl.ReadEntries(ctx, next, int(min(to-next, 100_000)), func(raw []byte, e events.Event) error {
					e.LeafHash = events.LeafHash(raw)
					b := append(e.AppendJSONLine(nil), '\n') // data and metadata as stored
					written += int64(len(b))
					_, err = w.Write(b)
					return err
				})
				if err != nil {
					return err
				}
				if n == next {
					return &exitError{exitCannot, fmt.Errorf("the node answered no event at position %d, below %d", next, to)}
				}
				next = n
				if progress && time.Since(last) > 100*time.Millisecond {
					last = time.Now()
					fmt.Fprintf(errw, "\r%s %d/%d events   ", bar(next-from, to-from), next-from, to-from)
				}
			}
			if progress {
				fmt.Fprintf(errw, "\r%s %d/%d events\n", bar(next-from, to-from), next-from, to-from)
			}
			if err := w.Flush(); err != nil {
				return &exitError{exitCannot, fmt.Errorf("--out: %w", err)}
			}
			if err := f.Sync(); err != nil {
				return &exitError{exitCannot, fmt.Errorf("--out: %w", err)}
			}
			if err := f.Close(); err != nil {
				return &exitError{exitCannot, fmt.Errorf("--out: %w", err)}
			}
			if err := os.Rename(tmp, outPath); err != nil {
				return &exitError{exitCannot, fmt.Errorf("--out: %w", err)}
			}
			if d, err := os.Open(filepath.Dir(outPath)); err == nil {
				_ = d.Sync() // the rename, durable
				d.Close()
			}
			res := map[string]any{"out": outPath, "from": from, "to": next, "events": next - from, "bytes": written, "seconds": time.Since(start).Seconds()}
			if r.json {
				return printJSON(c.OutOrStdout(), res)
			}
			c.Printf("positions [%d, %d): %d events, %d bytes, written to %s in %s\n", from, next, next-from, written, outPath, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	r.register(c)
	r.reads(c)
	f := c.Flags()
	f.StringVar(&outPath, "out", "", "the file to write (required)")
	f.Uint64Var(&from, "from", 0, "first position")
	f.Uint64Var(&to, "to", 0, "stop before this position (0: the head when it starts)")
	f.BoolVar(&force, "force", false, "replace --out if it exists")
	return c
}
