package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/node"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version, commit, Go version, API version and the store formats it writes and reads",
		Long: `version prints what this binary is, without asking a node (a node
reports the same under "build" in GET /v1/info and greffe info).

A release build stamps the version and commit with -ldflags
(docs/OPERATIONS.md, "Install"); otherwise the version is the module's
(go install …@vX.Y.Z) or the source's with -dev, and the commit the one
the go command records when it builds inside a checkout.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b := node.Build()
			if asJSON {
				return printJSON(c.OutOrStdout(), b)
			}
			commit := b.Commit
			switch {
			case commit == "":
				commit = "unknown"
			case b.Modified:
				commit += " (modified)"
			}
			if !b.CommitTime.IsZero() {
				commit += " of " + b.CommitTime.UTC().Format("2006-01-02T15:04:05Z")
			}
			c.Printf("greffe %s\ncommit       %s\ngo           %s\napi          %s\nstore writes %s\nstore reads  %s\n",
				b.Version, commit, b.GoVersion, b.APIVersion, b.StoreFormat, strings.Join(b.StoreFormatsRead, "\n             "))
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
