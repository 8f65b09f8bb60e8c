package main

import (
	"encoding/json"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/client"
)

// remote holds the flags of commands that talk to a node.
type remote struct {
	server   string
	token    string
	insecure bool
	json     bool
}

func (r *remote) register(c *cobra.Command) {
	def := os.Getenv("GREFFE_SERVER")
	if def == "" {
		def = "http://127.0.0.1:7070"
	}
	c.Flags().StringVar(&r.server, "server", def, "node URL (env GREFFE_SERVER)")
	c.Flags().StringVar(&r.token, "token", os.Getenv("GREFFE_TOKEN"), "bearer token (env GREFFE_TOKEN)")
	c.Flags().BoolVar(&r.insecure, "insecure", false, "accept any TLS certificate (test nodes only)")
	c.Flags().BoolVar(&r.json, "json", false, "print JSON")
}

func (r *remote) client() *client.Client {
	c := client.New(r.server, r.token)
	if r.insecure {
		c.Insecure()
	}
	return c
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
