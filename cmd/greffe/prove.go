package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/audit/online"
)

func newProveCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "prove",
		Short: "Fetch an inclusion or consistency proof from a node and check it against its signed checkpoint before printing it",
	}
	c.AddCommand(newProveInclusionCmd(), newProveConsistencyCmd())
	return c
}

// proveError maps a proof's outcome to an exit code: a proof that does not
// verify is a finding (1); a bad request is a usage error (2); anything
// else goes through the usual mapping (a node's refusal is 1, unreachable 2).
func proveError(err error) error {
	var pe *audit.ProofError
	switch {
	case errors.As(err, &pe):
		return &exitError{exitRefused, err}
	case errors.Is(err, audit.ErrConfig):
		return usageError{err}
	}
	return err
}

func newProveInclusionCmd() *cobra.Command {
	var (
		r        remote
		vf       verifierFlags
		position uint64
		size     uint64
	)
	c := &cobra.Command{
		Use:   "inclusion --position P [--size N]",
		Short: "Prove that the event at position P is in the tree of size N (default: the latest signed checkpoint)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !c.Flags().Changed("position") {
				return usageError{errors.New("--position is required")}
			}
			vs, err := vf.parse()
			if err != nil {
				return err
			}
			p, err := online.ProveInclusion(c.Context(), r.client(), vs, position, size)
			if err != nil {
				return proveError(err)
			}
			if r.json {
				return printJSON(c.OutOrStdout(), p)
			}
			w := c.OutOrStdout()
			fmt.Fprintf(w, "position %d is in the tree of size %d: VERIFIED against the signed checkpoint\n", p.Position, p.Size)
			fmt.Fprintf(w, "leaf hash %s\nroot      %s\n", enc64(p.LeafHash), enc64(p.Root))
			printHashes(w, p.Hashes)
			fmt.Fprintf(w, "checkpoint:\n%s", p.Checkpoint)
			return nil
		},
	}
	r.register(c)
	r.reads(c)
	vf.register(c)
	c.Flags().Uint64Var(&position, "position", 0, "the event's position (required)")
	c.Flags().Uint64Var(&size, "size", 0, "tree size (0: the latest signed checkpoint's)")
	return c
}

func newProveConsistencyCmd() *cobra.Command {
	var (
		r        remote
		vf       verifierFlags
		from, to uint64
	)
	c := &cobra.Command{
		Use:   "consistency --from A [--to B]",
		Short: "Prove that the tree of size B extends the tree of size A (B default: the latest signed checkpoint; A = 0 is the empty tree)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !c.Flags().Changed("from") {
				return usageError{errors.New("--from is required")}
			}
			vs, err := vf.parse()
			if err != nil {
				return err
			}
			p, err := online.ProveConsistency(c.Context(), r.client(), vs, from, to)
			if err != nil {
				return proveError(err)
			}
			if r.json {
				return printJSON(c.OutOrStdout(), p)
			}
			w := c.OutOrStdout()
			fmt.Fprintf(w, "the tree of size %d extends the tree of size %d: VERIFIED against the signed checkpoints\n", p.To, p.From)
			fmt.Fprintf(w, "root %d %s\nroot %d %s\n", p.From, enc64(p.RootFrom), p.To, enc64(p.RootTo))
			if p.From == 0 {
				fmt.Fprintln(w, "(size 0 is the empty tree: its root is SHA-256 of the empty string and the proof is empty)")
			}
			printHashes(w, p.Hashes)
			return nil
		},
	}
	r.register(c)
	r.reads(c)
	vf.register(c)
	c.Flags().Uint64Var(&from, "from", 0, "the smaller tree size (required; 0 is the empty tree)")
	c.Flags().Uint64Var(&to, "to", 0, "the larger tree size (0: the latest signed checkpoint's)")
	return c
}

func printHashes(w io.Writer, hs [][]byte) {
	fmt.Fprintf(w, "proof     %d hashes (RFC 6962 order)\n", len(hs))
	for _, h := range hs {
		fmt.Fprintf(w, "  %s\n", enc64(h))
	}
}

func enc64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
