package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/node"
)

func newKeysCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "keys",
		Short: "List, add and retire the node's checkpoint signing keys (in <data>/keys; docs/AUDIT.md has the rotation procedure)",
		Long: `The node signs every checkpoint with each of its active keys. Rotation:

  1. greffe keys add --data DIR         (a new key; restart the node: both keys sign)
  2. give the new verifier key to auditors and witnesses (greffe info shows it)
  3. greffe keys retire OLD --data DIR  (restart: only the new key signs)

A retired key signs no more but stays published as a verifier, so that
checkpoints it signed keep verifying. Keys are read when the node starts.`,
	}
	c.AddCommand(newKeysListCmd(), newKeysAddCmd(), newKeysRetireCmd())
	return c
}

func newKeysListCmd() *cobra.Command {
	var (
		data   string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "list --data DIR",
		Short: "List the signing keys: hash, active or retired, verifier key",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if _, err := os.Stat(data); err != nil {
				return &exitError{exitCannot, fmt.Errorf("--data %s: %w; give the data folder of a node (greffe serve --data DIR creates one)", data, err)}
			}
			keys, err := node.ListKeys(data)
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				return &exitError{exitCannot, fmt.Errorf("%s holds no signing key (no %s): is it a node's data folder? A node creates its first key when it starts", data, filepath.Join(data, "keys", "*.pub"))}
			}
			if asJSON {
				if keys == nil {
					keys = []node.KeyInfo{}
				}
				return printJSON(c.OutOrStdout(), keys)
			}
			for _, k := range keys {
				status := "retired"
				if k.Active {
					status = "active"
				}
				c.Printf("%s  %-7s  %s\n", k.Hash, status, k.Verifier)
			}
			return nil
		},
	}
	c.Flags().StringVar(&data, "data", node.DefaultDataDir, "the node's data folder")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newKeysAddCmd() *cobra.Command {
	var (
		data   string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "add --data DIR",
		Short: "Create a new signing key; after a restart every active key signs each checkpoint",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			origin, err := keysOrigin(data)
			if err != nil {
				return err
			}
			vkey, err := node.AddKey(data, origin)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), map[string]string{"verifier": vkey, "origin": origin})
			}
			c.Printf("added %s\nrestart the node: checkpoints are then signed by every active key; give this verifier key to auditors and witnesses\n", vkey)
			return nil
		},
	}
	c.Flags().StringVar(&data, "data", node.DefaultDataDir, "the node's data folder")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newKeysRetireCmd() *cobra.Command {
	var (
		data   string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "retire HASH --data DIR",
		Short: "Retire a signing key (its hash as in `keys list`, or its verifier key): it signs no more but stays published",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			origin, err := keysOrigin(data)
			if err != nil {
				return err
			}
			if err := node.RetireKey(data, origin, args[0]); err != nil {
				return &exitError{exitRefused, err}
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), map[string]string{"retired": args[0], "origin": origin})
			}
			c.Printf("retired %s; restart the node: it stays published as a verifier and signs no more\n", args[0])
			return nil
		},
	}
	c.Flags().StringVar(&data, "data", node.DefaultDataDir, "the node's data folder")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// keysOrigin returns the origin the keys of data are named after: that of
// the existing keys, or, in a folder without keys, the ledger's (read from
// the stopped store).
func keysOrigin(data string) (string, error) {
	origin, err := node.KeysOrigin(data)
	if !errors.Is(err, node.ErrNoKeys) {
		return origin, err
	}
	in, err := inspect.Open(inspect.Config{Dir: node.LedgerDir(data)})
	if err != nil {
		return "", fmt.Errorf("no key in %s and its ledger cannot be read (%w); start the node once to create its first key", data, err)
	}
	defer in.Close()
	m := in.Meta()
	if m.LedgerErr != nil {
		return "", m.LedgerErr
	}
	return events.Origin(m.LedgerID), nil
}
