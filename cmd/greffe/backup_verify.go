package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/backup"
)

func newBackupVerifyCmd() *cobra.Command {
	var (
		vf     verifierFlags
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "verify DIR",
		Short: "Check a backup folder offline: every file against the manifest, the ledger as verify --data does, and the checkpoint at the backup's size (exit 0 verified, 1 fault found, 2 could not run)",
		Long: `backup verify checks a backup folder without any node:

  - the manifest (backup.json): every file it lists is there with its size
    and SHA-256, and no other file is (Pebble's ledger/LOCK excepted);
  - the ledger, as greffe verify --data does: leaves, tree, stored
    checkpoints and their signatures, indexes, signed events;
  - that its identity, size and root are the manifest's, and that the
    checkpoint file is this ledger's checkpoint at exactly that size,
    signed by a key of the backup's own key folder (or of --verifier /
    --verifiers, required for a backup taken --without-keys).

Exit codes: 0 verified, 1 a fault was found (its kind and the file are
printed), 2 could not run (no such folder, no verifier key).`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			vs, err := vf.parse()
			if err != nil {
				return err
			}
			cfg := backup.VerifyConfig{Verifiers: vs}
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

func printBackupReport(w io.Writer, rep *backup.Report) {
	fmt.Fprintf(w, "backup      %s\n", rep.Dir)
	if rep.LedgerID != "" {
		fmt.Fprintf(w, "ledger      %s (node %s, taken %s)\n", rep.LedgerID, rep.NodeID, rep.CreatedAt.Format(time.RFC3339))
		fmt.Fprintf(w, "events      %d, root %s\n", rep.Size, base64.StdEncoding.EncodeToString(rep.Root))
		fmt.Fprintf(w, "files       %d, %s\n", rep.Files, mib(rep.Bytes))
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
