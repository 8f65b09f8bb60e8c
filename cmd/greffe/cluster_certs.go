package main

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/node"
)

func newClusterCertsCmd() *cobra.Command {
	var (
		out          string
		nodes        []string
		valid, caFor time.Duration
		asJSON       bool
	)
	c := &cobra.Command{
		Use:   "certs --out DIR --node ID=HOST[:PORT][,HOST...] ...",
		Short: "Issue the raft port's certificates: a cluster CA and one certificate per member (mutual TLS)",
		Long: `certs issues the certificates that put mutual TLS on the raft port
(docs/CLUSTER.md, "Securing the raft port"): in --out, the cluster CA
(ca.pem, ca.key) and, for each --node, ID.pem and ID.key. A member's
certificate names its node id (URI SAN urn:greffe:node:ID), which the raft
port checks against every RPC, and the hosts its peers dial (IP or DNS
SANs; a port given with a host is ignored). Keys are written 0600 and never
over an existing file. When --out already holds ca.pem and ca.key, that
CA signs the new certificates: that is how a member added later gets one.

Then start each member with --raft-tls-cert DIR/ID.pem --raft-tls-key
DIR/ID.key --raft-tls-ca DIR/ca.pem. Keep ca.key off the members: it can
issue a certificate for any node id.`,
		Example: `  greffe cluster certs --out raft-certs --node n1=10.0.0.1:7001 --node n2=10.0.0.2:7001 --node n3=10.0.0.3:7001`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{fmt.Errorf("--out: name the folder to write the certificates to")}
			}
			if len(nodes) == 0 {
				return usageError{fmt.Errorf("--node: name at least one member, ID=HOST[:PORT][,HOST...]")}
			}
			cfg := node.ClusterCertsConfig{Dir: out, PeerValidity: valid, CAValidity: caFor}
			for _, n := range nodes {
				spec, err := parsePeerSpec(n)
				if err != nil {
					return usageError{fmt.Errorf("--node %q: %w", n, err)}
				}
				cfg.Nodes = append(cfg.Nodes, spec)
			}
			res, err := node.WriteClusterCerts(cfg)
			if err != nil {
				return fmt.Errorf("nothing written: %w", err)
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), res)
			}
			if res.NewCA {
				c.Printf("new cluster CA: %s (give it to every member) and %s (keep it off the members)\n", res.CACert, res.CAKey)
			} else {
				c.Printf("issued with the cluster CA in %s\n", res.CACert)
			}
			for _, n := range res.Nodes {
				c.Printf("%s (%s): --raft-tls-cert %s --raft-tls-key %s --raft-tls-ca %s\n",
					n.ID, strings.Join(n.Hosts, ", "), n.Cert, n.Key, res.CACert)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&out, "out", "", "folder that receives the files (created when missing)")
	f.StringArrayVar(&nodes, "node", nil, "a member: ID=HOST[:PORT][,HOST...], its node id and the hosts its peers dial (repeatable)")
	f.DurationVar(&valid, "valid", node.DefaultPeerValidity, "lifetime of the member certificates")
	f.DurationVar(&caFor, "ca-valid", node.DefaultCAValidity, "lifetime of a new CA")
	f.BoolVar(&asJSON, "json", false, "print the files written as JSON")
	return c
}

// parsePeerSpec reads ID=HOST[:PORT][,HOST[:PORT]...].
func parsePeerSpec(s string) (node.PeerSpec, error) {
	id, hosts, ok := strings.Cut(s, "=")
	if !ok || id == "" || hosts == "" {
		return node.PeerSpec{}, fmt.Errorf("use ID=HOST[:PORT][,HOST...], e.g. n1=10.0.0.1:7001")
	}
	spec := node.PeerSpec{ID: id}
	for _, h := range strings.Split(hosts, ",") {
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		h = strings.Trim(h, "[]")
		if h == "" {
			return node.PeerSpec{}, fmt.Errorf("an empty host")
		}
		spec.Hosts = append(spec.Hosts, h)
	}
	return spec, nil
}
