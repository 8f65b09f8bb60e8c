package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/client"
)

// greffe digest: the digests a client computes before sending a command,
// by the client package's functions (docs/COMMANDS.md, "Digests").

func newDigestCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "digest",
		Short: "Compute the digests a command carries: a binding's identity, an argv_hash, an executor key id",
		Long: `Compute a digest exactly as the node recomputes it (docs/COMMANDS.md, "Digests").

  greffe digest binding FILE.json       the identity of ProposeBinding's data (FILE.json, or - for stdin)
  greffe digest argv -- ARGV...         the argv_hash of an exact command line (RecordCheck)
  greffe digest executor-key FILE.pub   the key id of an executor's ed25519 public key

Digests greffe defines are printed "sha256:<64 hex>" (key ids "ed25519:<32 hex>").`,
	}
	c.AddCommand(newDigestBindingCmd(), newDigestArgvCmd(), newDigestExecutorKeyCmd())
	return c
}

// printDigest prints one digest, or {"digest": …} with --json.
func printDigest(c *cobra.Command, asJSON bool, kind, d string) error {
	if asJSON {
		return printJSON(c.OutOrStdout(), map[string]string{"kind": kind, "digest": d})
	}
	c.Println(d)
	return nil
}

// maxDigestInput bounds what digest reads from stdin: a command's data is
// at most the node's body limit.
const maxDigestInput = 6 << 20

func readArg(c *cobra.Command, name string) ([]byte, error) {
	if name == "-" {
		b, err := io.ReadAll(io.LimitReader(c.InOrStdin(), maxDigestInput))
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

func newDigestBindingCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "binding FILE.json",
		Short: "The identity of a proposed binding (ProposeBinding's data; its other fields are ignored)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := readArg(c, args[0])
			if err != nil {
				return err
			}
			id, err := client.BindingIdentityOfData(b)
			if err != nil {
				return usageError{fmt.Errorf("%s: %w", args[0], err)}
			}
			return printDigest(c, asJSON, "binding_identity", id)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newDigestArgvCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "argv -- ARGV...",
		Short: "The argv_hash of an exact command line",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return printDigest(c, asJSON, "argv_hash", client.ArgvHash(args))
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newDigestExecutorKeyCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "executor-key FILE.pub",
		Short: "The key id of an executor's ed25519 public key (PEM, base64 or 32 raw bytes)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := readArg(c, args[0])
			if err != nil {
				return err
			}
			pub, err := client.ParseExecutorPublicKey(b)
			if err != nil {
				return usageError{fmt.Errorf("%s: %w", args[0], err)}
			}
			return printDigest(c, asJSON, "executor_key_id", client.ExecutorKeyID(pub))
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
