package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/client"
)

// remote holds the flags of commands that talk to a node.
type remote struct {
	server      string
	token       string
	insecure    bool
	json        bool
	consistency string // --consistency, on commands that read (reads)
}

func (r *remote) register(c *cobra.Command) {
	def := os.Getenv("GREFFE_SERVER")
	if def == "" {
		def = "http://127.0.0.1:7070"
	}
	c.Flags().StringVar(&r.server, "server", def, "node URL, or several comma-separated (a cluster's members: tried in turn, the leader first); http:// when no scheme is given (env GREFFE_SERVER)")
	c.Flags().StringVar(&r.token, "token", os.Getenv("GREFFE_TOKEN"), "bearer token (env GREFFE_TOKEN)")
	c.Flags().BoolVar(&r.insecure, "insecure", false, "accept any TLS certificate (test nodes only)")
	c.Flags().BoolVar(&r.json, "json", false, "print JSON")
}

// reads adds --consistency to a command that reads: how fresh a cluster
// member's answer must be (docs/CLUSTER.md, "Consistency").
func (r *remote) reads(c *cobra.Command) {
	c.Flags().StringVar(&r.consistency, "consistency", "", "local (this node's state, the default), leader (served by the leader) or linearizable (the leader, after confirming it still leads)")
	c.PreRunE = func(*cobra.Command, []string) error { return r.checkConsistency() }
}

func (r *remote) client() *client.Client {
	c := client.New(r.server, r.token)
	c.Consistency = r.consistency
	if r.insecure {
		c.Insecure()
	}
	return c
}

// checkConsistency refuses a --consistency the node would refuse, before
// anything is sent (a single node does not check the parameter).
func (r *remote) checkConsistency() error {
	switch r.consistency {
	case "", "local", "leader", "linearizable":
		return nil
	}
	return usageError{fmt.Errorf("--consistency %q: use local, leader or linearizable", r.consistency)}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
