package main

import (
	"golang.org/x/mod/sumdb/note"

	"github.com/spf13/cobra"
)

func newInfoCmd() *cobra.Command {
	var r remote
	c := &cobra.Command{
		Use:   "info",
		Short: "Print the node's ledger id, origin, verifier keys and head",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			info, err := r.client().Info(c.Context())
			if err != nil {
				return err
			}
			if r.json {
				return printJSON(c.OutOrStdout(), info)
			}
			c.Printf("ledger   %s\norigin   %s\nnode     %s (greffe %s)\nhead     %d events, root %s\n", info.LedgerID, info.Origin, info.NodeID, info.Version, info.Head.Size, info.Head.Root)
			for _, k := range info.VerifierKeys {
				c.Printf("verifier %s\n", k)
			}
			return nil
		},
	}
	r.register(c)
	r.reads(c)
	return c
}

// verifiers parses verifier keys, skipping malformed ones.
func verifiers(keys []string) []note.Verifier {
	var out []note.Verifier
	for _, k := range keys {
		if v, err := note.NewVerifier(k); err == nil {
			out = append(out, v)
		}
	}
	return out
}
