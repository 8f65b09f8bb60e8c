package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/backup"
)

func newBackupVerifyCmd() *cobra.Command {
	var (
		vf     verifierFlags
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "verify DIR",
		Short: "Check a backup folder offline: the manifest's signature, every file against the manifest, the ledger as verify --data does, and the checkpoint at the backup's size (exit 0 verified, 1 fault found, 2 could not run)",
		Long: `backup verify checks a backup folder without any node:

  - the manifest's signature (backup.json.sig) by a trusted key;
  - the manifest (backup.json): every file it lists is there with its size
    and SHA-256, and no other file is (Pebble's ledger/LOCK excepted);
    folders and regular files only (no symlink, pipe or device);
  - the key files (keys/), and which of them the ledger committed to
    (signed one of its stored checkpoints): only those are restored;
  - the ledger, as greffe verify --data does: leaves, tree, stored
    checkpoints and their signatures, indexes, signed events;
  - that its identity, size and root are the manifest's, and that the
    checkpoint file is this ledger's checkpoint at exactly that size,
    signed by a trusted key.

The trusted keys are the ledger's verifier keys given with --verifier or
--verifiers (from /v1/info of the node, over TLS, or your records). Without
them, backup verify trusts on first use the backup's own keys that signed
its ledger's checkpoints, says so on stderr (and in --json: trust.mode
"first_use", and the keys): a backup rewritten whole passes that, so
compare the keys it names with the ledger's.

A backup taken before backups were signed (format greffe-backup/1) is
still checked, and reported as unsigned.

Exit codes: 0 verified, 1 a fault was found (its kind and the file are
printed), 2 could not run (no such folder, no key to trust).`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			keys, err := vf.texts()
			if err != nil {
				return err
			}
			cfg := backup.VerifyConfig{Verifiers: keys}
			errw := c.ErrOrStderr()
			drawing := !asJSON && isTerminal(errw)
			if drawing {
				start := time.Now()
				cfg.Audit.Progress = func(done, total uint64) {
					fmt.Fprintf(errw, "\r%s %d/%d events, %.0f events/s   ", bar(done, max(total, 1)), done, total, float64(done)/time.Since(start).Seconds())
				}
			}
			rep, err := backup.Verify(c.Context(), args[0], cfg)
			if drawing {
				fmt.Fprintln(errw)
			}
			if err != nil {
				return &exitError{exitCannot, fmt.Errorf("backup verify could not run: %w", err)}
			}
			printWarnings(errw, rep.Warnings)
			if asJSON {
				err = printJSON(c.OutOrStdout(), rep)
			} else {
				printBackupReport(c.OutOrStdout(), rep)
			}
			if err != nil {
				return err
			}
			if !rep.Verified {
				return &exitError{exitRefused, fmt.Errorf("%d fault(s) found; first: %s", len(rep.Faults), rep.Faults[0])}
			}
			return nil
		},
	}
	vf.register(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// texts returns the verifier keys given, as text (checked to parse):
// package backup compares keys by their text, not their 32-bit hash.
func (v *verifierFlags) texts() ([]string, error) {
	keys, err := v.given()
	if err != nil {
		return nil, err
	}
	if _, err := audit.ParseVerifiers(keys); err != nil {
		return nil, usageError{err}
	}
	return keys, nil
}

// printWarnings writes what a backup check must say loudly, on stderr.
func printWarnings(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintf(w, "WARNING: %s\n", s)
	}
}

func printBackupReport(w io.Writer, rep *backup.Report) {
	fmt.Fprintf(w, "backup      %s\n", rep.Dir)
	if rep.LedgerID != "" {
		fmt.Fprintf(w, "ledger      %s (node %s, taken %s)\n", rep.LedgerID, rep.NodeID, rep.CreatedAt.Format(time.RFC3339))
		fmt.Fprintf(w, "events      %d, root %s\n", rep.Size, base64.StdEncoding.EncodeToString(rep.Root))
		fmt.Fprintf(w, "files       %d, %s\n", rep.Files, mib(rep.Bytes))
	}
	if rep.Trust.Mode != "" {
		signed := "signed manifest"
		if !rep.Signed {
			signed = "manifest NOT signed"
		}
		fmt.Fprintf(w, "trust       %s (%s): %s\n", rep.Trust.Mode, signed, strings.Join(rep.Trust.Keys, ", "))
	}
	if l := rep.Ledger; l != nil {
		fmt.Fprintf(w, "verified    %d events, %d checkpoints, %d signatures (%.0f events/s)\n", l.Events, l.Checkpoints, l.Signatures, l.EventsPerSec)
	}
	fmt.Fprintf(w, "time        %s\n", rep.Elapsed.Round(time.Millisecond))
	if rep.Verified {
		fmt.Fprintln(w, "VERIFIED")
		return
	}
	for _, f := range rep.Faults {
		fmt.Fprintf(w, "FAULT       %s\n", f)
	}
}
