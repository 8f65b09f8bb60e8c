package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/greffe/greffe/bench"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

// httpTarget appends over HTTP.
type httpTarget struct{ c *client.Client }

func (t httpTarget) Append(ctx context.Context, stream string, evs []events.Proposed) error {
	in := make([]wire.EventIn, len(evs))
	for i, e := range evs {
		in[i] = wire.EventIn{ID: e.ID.String(), Type: e.Type, Data: e.Data}
	}
	_, err := t.c.Append(ctx, stream, events.ExpectAny, in)
	return err
}

func newBenchCmd() *cobra.Command {
	var (
		r        remote
		cfg      bench.Config
		embedded bool
		dir      string
		fsyncFor time.Duration
		rounds   int
		walMode  string
		reads    bool
	)
	c := &cobra.Command{
		Use:   "bench",
		Short: "Load a node (--server) or an embedded store (--embedded) and print events/s and latency percentiles, with the disk's fsync rate as the baseline",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			d, err := bench.TempDir(dir)
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			if reads { // verified against unverified reads (bench_reads.go)
				cl := r.client()
				if embedded {
					base, stop, err := embeddedReadNode(ctx, d, cfg.PayloadBytes)
					if err != nil {
						return err
					}
					defer stop()
					cl = client.New(base, "")
				}
				figs, err := benchReads(ctx, cl, cfg.Duration)
				if err != nil {
					return err
				}
				if r.json {
					return printJSON(c.OutOrStdout(), map[string]any{"reads": figs, "embedded": embedded})
				}
				printReadFigures(c.OutOrStdout(), figs)
				return nil
			}
			// The disk's fsync rate drifts by tens of percent over seconds
			// on shared machines: it is sampled between the rounds of the
			// load and after the last, and the run is compared with the
			// mean of the samples.
			cfg.Rounds = max(rounds, 1)
			var samples []float64
			cfg.Between = func() error {
				r, err := bench.FsyncRate(d, fsyncFor/time.Duration(cfg.Rounds+1))
				samples = append(samples, r)
				return err
			}
			engine, err := bench.PebbleSyncRate(d, fsyncFor)
			if err != nil {
				return err
			}
			inPlace, err := bench.InPlaceFsyncRate(d, fsyncFor/time.Duration(cfg.Rounds+1))
			if err != nil {
				return err
			}
			var t bench.Target
			if embedded {
				s, err := pebblelog.Open(pebblelog.Config{Dir: d, CheckpointInterval: -1, WAL: walMode})
				if err != nil {
					return err
				}
				defer s.Close()
				t = bench.InProcess(s)
			} else {
				t = httpTarget{r.client()}
			}
			if !r.json && isTerminal(c.OutOrStdout()) {
				cfg.Progress = func(done uint64, el time.Duration) {
					fmt.Fprintf(c.OutOrStdout(), "\r%s %d events, %.0f events/s   ", bar(el, cfg.Duration), done, float64(done)/el.Seconds())
				}
			}
			res := bench.Run(ctx, t, cfg)
			if cfg.Progress != nil {
				fmt.Fprintln(c.OutOrStdout())
			}
			fsync := 0.0
			for _, r := range samples {
				fsync += r / float64(len(samples))
			}
			if r.json {
				return printJSON(c.OutOrStdout(), map[string]any{"result": res, "disk_fsync_per_sec": fsync,
					"disk_fsync_per_sec_samples": samples, "disk_inplace_fsync_per_sec": inPlace,
					"pebble_sync_commits_per_sec": engine, "embedded": embedded, "wal": walMode})
			}
			if res.WarmedUp > 0 {
				c.Printf("warm-up: %d events appended before the load, not counted\n", res.WarmedUp)
			}
			c.Println(res.String())
			c.Printf("disk baseline: %.0f fsyncs/s (300-byte write appended + fdatasync, in %s; mean of %d samples between the %d rounds of the load: %.0f)\n",
				fsync, d, len(samples), cfg.Rounds, samples)
			c.Printf("in-place baseline: %.0f fsyncs/s (300-byte write rewriting a synced file + fdatasync: no size change to journal)\n", inPlace)
			c.Printf("engine baseline: %.0f synced Pebble commits/s (one 500-byte key each, fresh database)\n", engine)
			if cfg.Writers == 1 && cfg.EventsPerAppend == 1 {
				c.Printf("single-writer efficiency: %.0f%% of the disk's fsync rate (%.0f%% of the in-place rate), %.0f%% of Pebble's synced commit rate\n",
					100*res.EventsPerSec/fsync, 100*res.EventsPerSec/inPlace, 100*res.EventsPerSec/engine)
			}
			if res.FirstError != "" {
				c.Printf("first error: %s\n", res.FirstError)
			}
			return nil
		},
	}
	r.register(c)
	f := c.Flags()
	f.BoolVar(&embedded, "embedded", false, "bench an in-process store in a temporary folder instead of --server")
	f.StringVar(&dir, "dir", "", "parent folder for the embedded store and the fsync baseline (default: the system temp dir)")
	f.IntVar(&cfg.Writers, "writers", 1, "concurrent writers")
	f.IntVar(&cfg.EventsPerAppend, "events-per-append", 1, "events per append call")
	f.IntVar(&cfg.PayloadBytes, "payload", 256, "bytes of each event's data")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to load")
	f.DurationVar(&fsyncFor, "fsync-baseline", 2*time.Second, "how long to measure the disk's fsync rate, in all")
	f.IntVar(&cfg.WarmUp, "warm-up", 0, "append this many events (16 writers × 100) before the load, not counted: measures a store that has been running (Pebble recycles its log files after a few memtable flushes; 300000 is enough with the default 32 MiB memtable)")
	f.StringVar(&walMode, "wal", pebblelog.WALGreffe, "with --embedded, the store's write-ahead log: greffe (its own) or pebble (Pebble's), to compare them in one run")
	f.BoolVar(&reads, "reads", false, "measure reads instead of appends: 1 event by id and global-log pages of 100 and 1,000, unverified and verified (client/verified), one reader; with --embedded, on a temporary log of 20,000 events; --duration per kind of read")
	f.IntVar(&rounds, "rounds", 4, "split the load into this many rounds, sampling the disk's fsync rate between them")
	return c
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// bar draws a 20-cell progress bar for done out of total (events, commands,
// or nanoseconds of a timed run); done beyond total draws a full bar.
func bar[N ~int64 | ~uint64 | ~int](done, total N) string {
	n := 20
	if done < total {
		n = int(20 * float64(done) / float64(total))
	}
	n = max(n, 0)
	b := []byte("[                    ]")
	for i := range n {
		b[1+i] = '='
	}
	return string(b)
}
