package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/backup"
)

func newBackupCmd() *cobra.Command {
	var (
		r           remote
		out         string
		withoutKeys bool
		cfg         backup.FetchConfig
	)
	c := &cobra.Command{
		Use:   "backup --server URL --out DIR",
		Short: "Take an online, consistent backup of a running node into a new folder: its whole ledger, the checkpoint signed at the backup's size, its verifier keys, the manifest signed (operator role; exit 0 done, 1 refused, 2 could not run)",
		Long: `backup asks a running node (a single node or any cluster member) for a
consistent copy of its ledger while it keeps taking writes: the node flushes
and takes a Pebble checkpoint (hard links, so it is cheap), signs a
checkpoint at exactly the copy's size, and streams the files with its
verifier keys (GET /v1/backup, operator or admin role).

DIR must not exist or be empty. The backup is written next to it
(DIR.partial) and renamed into place only once every file matched the
manifest (backup.json: identity, size, root, the checkpoint note, and the
size and SHA-256 of every file) and its signature (backup.json.sig, by the
node's checkpoint keys) arrived, and everything was synced.

The node's private signing keys are in the backup only when an admin asks
for them with --include-private-keys (an operator is refused, 403
backup_keys_admin_only); protect such a backup like the keys. Without them,
restore --keys DATA/keys restores the keys from the node's key folder, or
the restored node signs with a new key.

--stall-timeout gives up when nothing arrived for that long, --timeout
when the whole backup took longer (exit 2, nothing kept); the node drops a
client that stops reading the same way.

--consistency chooses whose store is copied: local (the default) the
--server node's own, as it stands (a follower's may trail the leader by
what it has not applied yet, and taking it there spares the leader);
leader or linearizable the leader's, asked through --server (the member
forwards the request and streams the leader's answer back).

Check a backup with greffe backup verify DIR; restore it with greffe restore.
Exit codes: 0 done, 1 refused by the node (a role that may not back up),
2 could not run (unreachable node, DIR not empty, a stream cut short).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{errors.New("give --out DIR: a new or empty folder for the backup")}
			}
			if withoutKeys && cfg.IncludePrivateKeys {
				return usageError{errors.New("--without-keys and --include-private-keys contradict each other; a backup is without the private keys unless asked")}
			}
			errw := c.ErrOrStderr()
			for _, d := range []*time.Duration{&cfg.StallTimeout, &cfg.Timeout} {
				if *d == 0 {
					*d = -1 // the flag's 0 is "never"; the package's is "the default"
				}
			}
			drawing := !r.json && isTerminal(errw)
			if drawing {
				cfg.Progress = bytesBar(errw)
			}
			res, err := backup.Fetch(c.Context(), r.client(), out, cfg)
			if drawing {
				fmt.Fprintln(errw)
			}
			if err != nil {
				return err
			}
			return printBackup(c.OutOrStdout(), r.json, res)
		},
	}
	r.register(c)
	r.reads(c)
	f := c.Flags()
	f.StringVar(&out, "out", "", "the backup folder to create (new or empty)")
	f.BoolVar(&cfg.IncludePrivateKeys, "include-private-keys", false, "take the node's private signing keys too (admin role only)")
	f.BoolVar(&withoutKeys, "without-keys", false, "leave the private keys out: the default")
	_ = f.MarkDeprecated("without-keys", "a backup holds no private key unless asked with --include-private-keys")
	f.DurationVar(&cfg.StallTimeout, "stall-timeout", backup.DefaultStallTimeout, "give up when nothing arrived from the node for this long (0: never)")
	f.DurationVar(&cfg.Timeout, "timeout", backup.DefaultTimeout, "give up when the backup is not complete after this long (0: never)")
	c.AddCommand(newBackupVerifyCmd())
	return c
}

// backupSummary is what backup --json prints.
type backupSummary struct {
	Dir        string    `json:"dir"`
	LedgerID   string    `json:"ledger_id"`
	NodeID     string    `json:"node_id"`
	Events     uint64    `json:"events"`
	Bytes      int64     `json:"bytes"`
	Files      int       `json:"files"`
	Keys       bool      `json:"keys"`
	Signed     bool      `json:"signed"`
	RaftIndex  uint64    `json:"raft_index"`
	Checkpoint cpSummary `json:"checkpoint"`
	CreatedAt  time.Time `json:"created_at"`
	DurationNS int64     `json:"duration_ns"`
	Duration   string    `json:"duration"`
}

type cpSummary struct {
	Size uint64 `json:"size"`
	Root string `json:"root"`
}

func printBackup(w io.Writer, asJSON bool, res *backup.FetchResult) error {
	m := res.Manifest
	s := backupSummary{Dir: res.Dir, LedgerID: m.LedgerID, NodeID: m.NodeID, Events: m.Size, Bytes: m.Bytes(),
		Files: len(m.Files), Keys: m.Keys, Signed: m.Signed(), RaftIndex: m.RaftIndex,
		Checkpoint: cpSummary{Size: m.Size, Root: base64.StdEncoding.EncodeToString(m.Root)},
		CreatedAt:  m.CreatedAt, DurationNS: res.Elapsed.Nanoseconds(), Duration: res.Elapsed.Round(time.Millisecond).String()}
	if asJSON {
		return printJSON(w, s)
	}
	keys := "private keys included: protect this folder like the node's private keys"
	if !s.Keys {
		keys = "verifier keys only: a restore takes the private keys from --keys, or makes a new key"
	}
	fmt.Fprintf(w, "backup      %s\n", s.Dir)
	fmt.Fprintf(w, "ledger      %s (node %s)\n", s.LedgerID, s.NodeID)
	fmt.Fprintf(w, "events      %d, checkpoint size %d root %s\n", s.Events, s.Checkpoint.Size, s.Checkpoint.Root)
	fmt.Fprintf(w, "files       %d, %s (%s)\n", s.Files, mib(s.Bytes), keys)
	if s.Signed {
		fmt.Fprintf(w, "signed      the manifest, by the node's checkpoint keys (%s): check it with greffe backup verify --verifier KEY\n", backup.ManifestSigFile)
	}
	_, err := fmt.Fprintf(w, "time        %s\n", s.Duration)
	return err
}

// bytesBar returns a progress callback that draws a bar of bytes on w, at
// most ten times a second.
func bytesBar(w io.Writer) func(done, total int64) {
	start := time.Now()
	var last time.Time
	return func(done, total int64) {
		now := time.Now()
		if now.Sub(last) < 100*time.Millisecond && done < total {
			return
		}
		last = now
		if total == 0 {
			total = max(done, 1)
		}
		fmt.Fprintf(w, "\r%s %s/%s, %.1f MiB/s   ", bar(done, total), mib(done), mib(total), float64(done)/(1<<20)/time.Since(start).Seconds())
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
