package replicator

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/greffe/greffe/internal/testcert"
)

// TestReplicator_MutualTLS: three nodes whose raft ports speak mutual TLS
// with certificates of one CA form a cluster and store identical bytes; a
// plain TCP client, and a client with a certificate of another CA, get
// nothing from a raft port, while a member's certificate does.
func TestReplicator_MutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir)
	peerTLS := func(name string, ca *testcert.CA) func(*Config) {
		return func(c *Config) {
			cert, key := ca.Issue(t, dir, name)
			tc, err := PeerTLS(cert, key, ca.File)
			if err != nil {
				t.Fatal(err)
			}
			c.TLS = tc
		}
	}
	nodes := cluster(t, 3, func(c *Config) { peerTLS(c.NodeID, ca)(c) })
	for i := range 20 {
		if _, err := appendOne(t.Context(), nodes[0].store, "tls", i); err != nil {
			t.Fatal(err)
		}
	}
	converged(t, nodes, nodes[0])

	var member, stranger Config
	peerTLS("client", ca)(&member)
	peerTLS("stranger", testcert.NewCA(t, t.TempDir()))(&stranger)
	query := func(tc *tls.Config) (NodeInfo, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		return queryInfo(ctx, nodes[1].addr, tc)
	}
	if _, err := query(nil); err == nil {
		t.Error("a plain TCP client got the node's info from a TLS raft port")
	}
	if _, err := query(stranger.TLS); err == nil {
		t.Error("a client with another CA's certificate got the node's info")
	}
	info, err := query(member.TLS)
	if err != nil || info.HTTPURL != "http://n2.test" {
		t.Fatalf("a member's certificate: info %+v, %v; want n2's", info, err)
	}
}
