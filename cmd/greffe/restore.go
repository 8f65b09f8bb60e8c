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

func newRestoreCmd() *cobra.Command {
	var (
		from, data, keys string
		asJSON           bool
	)
	c := &cobra.Command{
		Use:   "restore --from DIR --data NEWDIR",
		Short: "Make a new node data folder from a backup: the ledger and the keys, checked against the manifest, put in place only once complete (exit 0 done, 1 the backup is damaged, 2 could not run)",
		Long: `restore builds a node data folder from a backup folder (greffe backup).

NEWDIR must not exist or be empty. The manifest is checked first (every
file, its size and SHA-256): a damaged backup restores nothing. The files
are copied into NEWDIR.restoring, hashed again, synced, and the folder is
renamed to NEWDIR only when complete: a failure or a crash never leaves a
NEWDIR that a node would open as a partial ledger (rerun the command: it
removes what an interrupted run left).

The restored folder holds no raft state. greffe serve --data NEWDIR serves
it as a single node, with the same ledger id and keys, its head the
backup's size. To seed a new cluster, start it with --raft-addr and
--bootstrap (docs/CLUSTER.md).

A backup taken --without-keys needs --keys: the original node's key folder
(DATA/keys), checked against the backup's checkpoint.

Exit codes: 0 restored, 1 the backup does not match its manifest, 2 could
not run (NEWDIR not empty, no keys, unreadable backup).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if from == "" || data == "" {
				return usageError{errors.New("give --from DIR (a backup folder) and --data NEWDIR (a new or empty folder)")}
			}
			cfg := backup.RestoreConfig{Keys: keys}
			errw := c.ErrOrStderr()
			drawing := !asJSON && isTerminal(errw)
			if drawing {
				cfg.Progress = bytesBar(errw)
			}
			res, err := backup.Restore(c.Context(), from, data, cfg)
			if drawing {
				fmt.Fprintln(errw)
			}
			var fe *backup.FaultError
			switch {
			case errors.As(err, &fe):
				return &exitError{exitRefused, err}
			case err != nil:
				return &exitError{exitCannot, err}
			}
			return printRestore(c.OutOrStdout(), asJSON, res)
		},
	}
	f := c.Flags()
	f.StringVar(&from, "from", "", "the backup folder")
	f.StringVar(&data, "data", "", "the data folder to create (new or empty)")
	f.StringVar(&keys, "keys", "", "for a backup taken --without-keys: the node's key folder to restore the keys from")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func printRestore(w io.Writer, asJSON bool, res *backup.RestoreResult) error {
	if asJSON {
		return printJSON(w, res)
	}
	fmt.Fprintf(w, "restored    %s\n", res.Data)
	fmt.Fprintf(w, "ledger      %s, %d events, root %s\n", res.LedgerID, res.Size, base64.StdEncoding.EncodeToString(res.Root))
	fmt.Fprintf(w, "files       %d, %s in %s\n", res.Files, mib(res.Bytes), res.Elapsed.Round(time.Millisecond))
	_, err := fmt.Fprintf(w, "next        greffe serve --data %s (a single node; docs/CLUSTER.md seeds a cluster from it)\n", res.Data)
	return err
}
