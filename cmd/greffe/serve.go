package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/witness"
)

func newServeCmd() *cobra.Command {
	var (
		cfg        node.Config
		tokens     string
		policy     string
		level      string
		asJSON     bool
		cpuProfile string
		witnesses  []string
	)
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run a node: the ledger on Pebble in --data, served over HTTP on --http",
		Long: `serve runs a node: the ledger on Pebble in --data (created on first start),
served over HTTP on --http, until SIGINT or SIGTERM stops it gracefully.

Exit codes: 0 stopped by a signal; 2 could not start (a bad flag or file,
an address in use, a damaged store, a data folder of another --node-id,
raft beyond loopback without TLS, …); 4 removed from its cluster by a
committed configuration (do not restart it: its folder can no longer
serve the cluster); not 0 when it stops on another error.
A damaged store (a MANIFEST or write-ahead log record that does not
read back) is refused before anything in the folder is written, in one line
naming the file: see greffe verify --data and docs/OPERATIONS.md, Disaster
recovery.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			lv, err := parseLogLevel(level)
			if err != nil {
				return err
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
			if asJSON {
				cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
			}
			if policy != "" {
				b, err := os.ReadFile(policy)
				if err != nil {
					return usageError{fmt.Errorf("--policy: %w", err)}
				}
				p, err := aggregates.ParsePolicy(b)
				if err != nil {
					return usageError{fmt.Errorf("--policy %s: %w; GET /v1/policy shows every field and its default", policy, err)}
				}
				cfg.Policy = &p
			}
			if tokens != "" {
				t, err := api.LoadTokens(tokens)
				if err != nil {
					return usageError{err}
				}
				cfg.API.Tokens = t
			}
			for _, w := range witnesses {
				pw, err := witness.ParseWitness(w)
				if err != nil {
					return usageError{fmt.Errorf("--witness: %w", err)}
				}
				cfg.Witness.Witnesses = append(cfg.Witness.Witnesses, pw)
			}
			if q := cfg.Witness.Quorum; q < 0 || q > len(cfg.Witness.Witnesses) {
				return usageError{fmt.Errorf("--witness-quorum %d: give at least as many --witness as the quorum (%d given)", q, len(cfg.Witness.Witnesses))}
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return usageError{fmt.Errorf("--cpu-profile: %w", err)}
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpu-profile: %w", err)
				}
				defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
			}
			n, err := node.Open(cfg)
			if errors.Is(err, events.ErrCorrupt) {
				return &exitError{exitCannot, damagedStore(cfg.DataDir, err)}
			}
			if err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(c.OutOrStdout(), map[string]any{"version": node.Build().Version, "url": n.URL(), "data": cfg.DataDir,
					"ledger_id": n.Store.LedgerID(), "head": n.Store.Head().Size}); err != nil {
					n.Close()
					return err
				}
			} else {
				c.Printf("greffe %s serving %s (data %s, ledger %s, %d events)\n", node.Build().Version, n.URL(), cfg.DataDir, n.Store.LedgerID(), n.Store.Head().Size)
			}
			return n.Serve(c.Context())
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.DataDir, "data", node.DefaultDataDir, "data folder (created on first start)")
	f.StringVar(&cfg.API.Addr, "http", "127.0.0.1:7070", "HTTP listen address")
	f.StringVar(&cfg.NodeID, "node-id", "n1", "this node's id")
	f.StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the node to this file until it stops (go tool pprof), for performance work")
	f.StringVar(&cfg.Store.WAL, "wal", pebblelog.WALGreffe, "the ledger's write-ahead log: greffe (the store's own, the default) or pebble (Pebble's); a folder can switch between restarts (docs/FORMAT.md)")
	f.StringVar(&policy, "policy", "", "JSON file of the node's policy (budgets, freshness windows, admission screens): the fields it names override the defaults of GET /v1/policy")
	f.StringVar(&tokens, "tokens", "", "JSON file of bearer tokens [{name, role, token}]; required to listen beyond loopback")
	f.StringVar(&cfg.API.TLSCert, "tls-cert", "", "TLS certificate (PEM)")
	f.StringVar(&cfg.API.TLSKey, "tls-key", "", "TLS private key (PEM)")
	f.DurationVar(&cfg.API.BodyReadTimeout, "body-read-timeout", api.DefaultBodyReadTimeout, "how long a request's body may take to arrive once its headers have; a client still sending then gets 408 body_timeout and its connection is closed (negative: no bound)")
	f.DurationVar(&cfg.API.WriteTimeout, "write-timeout", api.DefaultWriteTimeout, "how long a client may take nothing of an answer (each write of up to 64 KiB, HTTP and gRPC): one that stops reading, such as a stalled subscriber, is then disconnected and what it held released (negative: no bound)")
	f.IntVar(&cfg.API.MaxSubscriptions, "max-subscriptions", api.DefaultMaxSubscriptions, "SSE subscriptions the node serves at once; one more is refused with 429 too_many_subscriptions")
	f.IntVar(&cfg.API.MaxSubscriptionsPerPrincipal, "max-subscriptions-per-principal", api.DefaultMaxSubscriptionsPerPrincipal, "SSE subscriptions one principal (a token's name; without tokens, everyone) may hold at once")
	f.StringVar(&level, "log-level", "info", "log level: debug, info, warn, error")
	f.BoolVar(&asJSON, "json", false, "print the start line as JSON and log JSON lines (to stderr)")
	f.StringArrayVar(&witnesses, "witness", nil, "send every new checkpoint to this witness (C2SP tlog-witness): URL=VKEY, URL its base URL (greffe appends /add-checkpoint), VKEY its cosignature/v1 verifier key; repeatable (docs/AUDIT.md, Witnesses)")
	f.IntVar(&cfg.Witness.Quorum, "witness-quorum", 0, "GET /v1/checkpoint serves the newest checkpoint that this many --witness cosigned (0: the newest, with the cosignatures it has)")
	registerClusterFlags(f, &cfg.Cluster)
	f.StringVar(&cfg.Ecosystem.GRPC.Addr, "grpc", "", "also serve the KurrentDB/EventStoreDB gRPC protocol on this address, e.g. 127.0.0.1:2113; beyond loopback only with --tls-cert, --tls-key and --tokens (a token's name and value are the user and password of esdb://NAME:TOKEN@host?tls=true)")
	f.StringSliceVar(&cfg.Ecosystem.Kafka.Brokers, "export-kafka-brokers", nil, "export the log to Kafka: bootstrap brokers HOST:PORT,... (with --export-kafka-topic)")
	f.StringVar(&cfg.Ecosystem.Kafka.Topic, "export-kafka-topic", "", "Kafka topic the export writes to; it must exist")
	f.Uint64Var(&cfg.Ecosystem.Kafka.From, "export-kafka-from", 0, "first position to export when the topic holds nothing of this ledger yet")
	return c
}

// damagedStore words the refusal of a data folder whose store is damaged
// (err matches events.ErrCorrupt): which file, where and what, whether the
// folder was left as it was, and what the operator does next (the
// disaster-recovery runbook of docs/OPERATIONS.md). serve exits 2 with it:
// the node could not run, and starting it again will not change that.
func damagedStore(data string, err error) error {
	what, changed := err.Error(), ""
	// Open refuses a damaged MANIFEST or write-ahead log with a
	// *inspect.DamageError before Pebble opens the folder read-write,
	// and changes nothing in it then.
	var de *inspect.DamageError
	if errors.As(err, &de) {
		what = de.File
		if de.Offset >= 0 {
			what += fmt.Sprintf(", at offset %d", de.Offset)
		}
		what += ": " + de.Err.Error()
		changed = " and changed nothing in " + data
	}
	return fmt.Errorf("the store in %s is damaged: %s; the node did not start%s: keep the folder as it is, run \"greffe verify --data %s\" to see what is damaged, "+
		"and restore the last backup (\"greffe restore --from BACKUP --data NEWDIR\"; in a cluster, replace the member instead): docs/OPERATIONS.md, Disaster recovery",
		data, what, changed, data)
}
