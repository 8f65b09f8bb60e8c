package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/backup"
	"github.com/greffe/greffe/node"
)

func newRestoreCmd() *cobra.Command {
	var (
		vf               verifierFlags
		from, data, keys string
		allowUnsigned    bool
		asJSON           bool
	)
	c := &cobra.Command{
		Use:   "restore --from DIR --data NEWDIR",
		Short: "Make a new node data folder from a backup: the ledger and the keys its ledger committed to, checked against the signed manifest, put in place only once complete (exit 0 done, 1 the backup is damaged or forged, 2 could not run)",
		Long: `restore builds a node data folder from a backup folder (greffe backup).

NEWDIR must not exist or be empty. The backup is checked first: the
manifest's signature by a trusted key, every file (its size and SHA-256,
regular files only), the key files, and the checkpoint signed at the
backup's size: a damaged or forged backup restores nothing (exit 1, the
fault's kind printed). The trusted keys are the ledger's verifier keys
given with --verifier / --verifiers (or the key folder given with --keys);
without them, restore trusts on first use the backup's keys that signed
its ledger's checkpoints, and says so. The files are copied into
NEWDIR.restoring, hashed again, synced, and the folder is renamed to
NEWDIR only when complete: a failure or a crash never leaves a NEWDIR that
a node would open as a partial ledger (rerun the command: it removes what
an interrupted run left).

Only the keys the ledger committed to (it holds a checkpoint they signed)
or given from outside are restored, and so published by the restored
node; any other key file is left out, and named. A backup without the
private keys (the default) restores the verifier keys retired (they keep
the old checkpoints verifiable) and restore makes the node a new signing
key, printed: give it to the ledger's witnesses and auditors. --keys
DATA/keys takes the keys, private ones included, from the original node's
key folder instead.

A backup taken before backups were signed (format greffe-backup/1) is
restored only with --allow-unsigned.

The restored folder holds no raft state. greffe serve --data NEWDIR serves
it as a single node, with the same ledger id, its head the backup's size.
To seed a new cluster, start it with --raft-addr and --bootstrap
(docs/CLUSTER.md).

Exit codes: 0 restored, 1 the backup does not match its signed manifest, 2
could not run (NEWDIR not empty, no key to trust, unreadable backup).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if from == "" || data == "" {
				return usageError{errors.New("give --from DIR (a backup folder) and --data NEWDIR (a new or empty folder)")}
			}
			given, err := vf.texts()
			if err != nil {
				return err
			}
			cfg := backup.RestoreConfig{Verifiers: given, Keys: keys, AllowUnsigned: allowUnsigned}
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
			out := restoreSummary{RestoreResult: res}
			if !res.Signing {
				// A data folder without a signing key gets one now, so that
				// its verifier key is known before the node serves.
				if out.NewKey, err = node.AddKey(data, res.Origin); err != nil {
					return &exitError{exitCannot, fmt.Errorf("restored %s, but could not make its new signing key: %w", data, err)}
				}
			}
			printRestoreWarnings(errw, &out)
			return printRestore(c.OutOrStdout(), asJSON, &out)
		},
	}
	vf.register(c)
	f := c.Flags()
	f.StringVar(&from, "from", "", "the backup folder")
	f.StringVar(&data, "data", "", "the data folder to create (new or empty)")
	f.StringVar(&keys, "keys", "", "for a backup without the private keys: the node's key folder to restore the keys from")
	f.BoolVar(&allowUnsigned, "allow-unsigned", false, "restore a backup of format greffe-backup/1, taken before backups were signed")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// restoreSummary is what restore --json prints.
type restoreSummary struct {
	*backup.RestoreResult
	// NewKey is the verifier key of the signing key restore made, when
	// the backup held no private key to sign with.
	NewKey string `json:"new_key,omitempty"`
}

// printRestoreWarnings says loudly, on stderr, what the operator must
// know: trust on first use, an unsigned backup, keys left out, a new key.
func printRestoreWarnings(w io.Writer, s *restoreSummary) {
	if s.Trust.Mode == backup.TrustFirstUse {
		fmt.Fprintf(w, "WARNING: no verifier key given: trust on first use of the backup's own key(s) that signed its ledger's checkpoints, %s: compare them with the ledger's published keys, or give them (--verifier)\n",
			strings.Join(s.Trust.Keys, ", "))
	}
	if !s.Signed {
		fmt.Fprintln(w, "WARNING: the backup's manifest is not signed (format greffe-backup/1): restored with --allow-unsigned")
	}
	for _, d := range s.Dropped {
		fmt.Fprintf(w, "WARNING: %s left out: %s\n", d.Path, d.Reason)
	}
	if s.NewKey != "" {
		fmt.Fprintf(w, "WARNING: the backup holds no private key to sign with: the restored node signs with a new key, %s; its old verifier keys stay published, retired\n", s.NewKey)
	}
}

func printRestore(w io.Writer, asJSON bool, s *restoreSummary) error {
	if asJSON {
		return printJSON(w, s)
	}
	res := s.RestoreResult
	fmt.Fprintf(w, "restored    %s\n", res.Data)
	fmt.Fprintf(w, "ledger      %s, %d events, root %s\n", res.LedgerID, res.Size, base64.StdEncoding.EncodeToString(res.Root))
	fmt.Fprintf(w, "files       %d, %s in %s\n", res.Files, mib(res.Bytes), res.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "trust       %s: %s\n", res.Trust.Mode, strings.Join(res.Trust.Keys, ", "))
	for _, k := range res.Keys {
		state := "retired (verifies, does not sign)"
		if k.Active {
			state = "signs"
		}
		fmt.Fprintf(w, "key         %s %s\n", k.Hash, state)
	}
	if s.NewKey != "" {
		fmt.Fprintf(w, "new key     %s (signs)\n", s.NewKey)
	}
	_, err := fmt.Fprintf(w, "next        greffe serve --data %s (a single node; docs/CLUSTER.md seeds a cluster from it)\n", res.Data)
	return err
}
