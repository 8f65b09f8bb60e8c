package main

import (
	"fmt"
	"net/http"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// registerClusterFlags adds the cluster flags of `greffe serve`. The tuning
// flags are hidden: the defaults are the supported configuration, and the
// fault tests use them to force snapshots and put proxies on raft links.
func registerClusterFlags(f *pflag.FlagSet, cc *node.ClusterConfig) {
	f.StringVar(&cc.RaftAddr, "raft-addr", "", "raft listen address host:port; turns cluster mode on (docs/CLUSTER.md)")
	f.StringVar(&cc.Advertise, "raft-advertise", "", "raft address the other nodes dial (default --raft-addr)")
	f.BoolVar(&cc.Bootstrap, "bootstrap", false, "start a new cluster with this node as its only member (first start only)")
	f.StringVar(&cc.Join, "join", "", "HTTP URL of a cluster member to join through (first start only)")
	f.StringVar(&cc.RaftTLSCert, "raft-tls-cert", "", "this node's certificate for mutual TLS on the raft port (PEM; with --raft-tls-key and --raft-tls-ca; greffe cluster certs issues them); required beyond loopback unless --raft-insecure")
	f.StringVar(&cc.RaftTLSKey, "raft-tls-key", "", "the key of --raft-tls-cert (PEM)")
	f.StringVar(&cc.RaftTLSCA, "raft-tls-ca", "", "the cluster CA that signs every member's raft certificate (PEM)")
	f.BoolVar(&cc.RaftInsecure, "raft-insecure", false, "allow plain TCP raft beyond loopback, without --raft-tls-*: anyone who reaches the raft port can then write to the ledger; for a network you trust entirely (logged as a warning at start)")
	f.StringVar(&cc.JoinToken, "join-token", os.Getenv("GREFFE_JOIN_TOKEN"), "operator bearer token for --join (env GREFFE_JOIN_TOKEN)")
	hidden := []string{"raft-peer", "raft-snapshot-threshold", "raft-trailing-logs", "raft-snapshot-interval",
		"raft-heartbeat-timeout", "raft-election-timeout", "raft-lease-timeout"}
	f.StringToStringVar(&cc.Raft.Peers, "raft-peer", nil, "ID=host:port: dial this address to reach node ID (repeatable)")
	f.Uint64Var(&cc.Raft.SnapshotThreshold, "raft-snapshot-threshold", 0, "raft entries between snapshots (default 8192)")
	f.Uint64Var(&cc.Raft.TrailingLogs, "raft-trailing-logs", 0, "raft entries kept after a snapshot (default: about 256 MiB of log, derived from the write rate)")
	f.DurationVar(&cc.Raft.SnapshotInterval, "raft-snapshot-interval", 0, "how often the snapshot threshold is checked (default 2m)")
	f.DurationVar(&cc.Raft.HeartbeatTimeout, "raft-heartbeat-timeout", 0, "raft heartbeat timeout (default 1s)")
	f.DurationVar(&cc.Raft.ElectionTimeout, "raft-election-timeout", 0, "raft election timeout (default 1s)")
	f.DurationVar(&cc.Raft.LeaderLeaseTimeout, "raft-lease-timeout", 0, "raft leader lease timeout (default 500ms)")
	for _, h := range hidden {
		_ = f.MarkHidden(h)
	}
}

func newClusterCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect and change a raft cluster: status, join, remove, transfer-leader; issue its raft certificates",
	}
	c.AddCommand(newClusterStatusCmd(), newClusterJoinCmd(), newClusterRemoveCmd(), newClusterTransferCmd(), newClusterCertsCmd())
	return c
}

func newClusterStatusCmd() *cobra.Command {
	var r remote
	c := &cobra.Command{
		Use:   "status",
		Short: "Print the members as the --server node sees them: leader, suffrage, progress, reachability",
		Long: `status prints the raft cluster as the --server node sees it: its term,
the leader it knows, each member's suffrage, progress and reachability as
it last heard (GET /v1/cluster/status).

By default (--consistency local) the answer is that node's own view, which
is what you inspect when members disagree (a partitioned follower that
still names an old leader); --consistency leader (or linearizable) asks
the leader's view through it, the one that knows every follower's
progress. Compare every member's view with
greffe endpoint status --server URL1,URL2,URL3.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var st wire.Status
			if err := r.client().Do(c.Context(), http.MethodGet, "/v1/cluster/status", nil, &st); err != nil {
				return err
			}
			return printStatus(c, r.json, st)
		},
	}
	r.register(c)
	r.reads(c)
	return c
}

func printStatus(c *cobra.Command, asJSON bool, st wire.Status) error {
	if asJSON {
		return printJSON(c.OutOrStdout(), st)
	}
	leader := st.LeaderID
	if leader == "" {
		leader = "(none)"
	}
	c.Printf("node %s: %s in term %d; leader %s; commit %d, applied %d; snapshots installed %d\n",
		st.NodeID, st.State, st.Term, leader, st.CommitIndex, st.AppliedIndex, st.Restores)
	tw := tabwriter.NewWriter(c.OutOrStdout(), 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSUFFRAGE\tSTATE\tAPPLIED\tEVENTS\tHTTP\tRAFT")
	for _, s := range st.Servers {
		state := s.State
		if !s.Reachable {
			state = "unreachable"
		}
		if s.Leader {
			state += " *"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", s.ID, s.Suffrage, state, s.AppliedIndex, s.HeadSize, s.HTTPURL, s.RaftAddr)
	}
	return tw.Flush()
}

func newClusterJoinCmd() *cobra.Command {
	var (
		r        remote
		ledgerID string
	)
	c := &cobra.Command{
		Use:   "join NODE_ID RAFT_ADDR",
		Short: "Add a node as a non-voter; the leader promotes it once it has caught up (`serve --join` does this by itself)",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			cl := r.client()
			if ledgerID == "" {
				info, err := cl.Info(c.Context())
				if err != nil {
					return err
				}
				ledgerID = info.LedgerID
			}
			var st wire.Status
			req := wire.JoinRequest{NodeID: args[0], RaftAddr: args[1], LedgerID: ledgerID}
			if err := cl.Do(c.Context(), http.MethodPost, "/v1/cluster/join", req, &st); err != nil {
				return err
			}
			return printStatus(c, r.json, st)
		},
	}
	r.register(c)
	c.Flags().StringVar(&ledgerID, "ledger-id", "", "the ledger the node holds (default: the cluster's, read from --server)")
	return c
}

func newClusterRemoveCmd() *cobra.Command {
	var r remote
	c := &cobra.Command{
		Use:   "remove NODE_ID",
		Short: "Remove a member; the removed node's process exits with status 4",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var st wire.Status
			if err := r.client().Do(c.Context(), http.MethodPost, "/v1/cluster/remove", wire.NodeIn{NodeID: args[0]}, &st); err != nil {
				return err
			}
			return printStatus(c, r.json, st)
		},
	}
	r.register(c)
	r.reads(c)
	return c
}

func newClusterTransferCmd() *cobra.Command {
	var r remote
	c := &cobra.Command{
		Use:   "transfer-leader [NODE_ID]",
		Short: "Hand the leadership to NODE_ID (or to any up-to-date voter)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			in := wire.NodeIn{}
			if len(args) == 1 {
				in.NodeID = args[0]
			}
			var st wire.Status
			if err := r.client().Do(c.Context(), http.MethodPost, "/v1/cluster/transfer-leader", in, &st); err != nil {
				return err
			}
			return printStatus(c, r.json, st)
		},
	}
	r.register(c)
	r.reads(c)
	return c
}
