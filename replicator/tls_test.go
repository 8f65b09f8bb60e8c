package replicator

import (
	"context"
	"crypto/tls"
	"testing"
	"time"
)

// TestReplicator_MutualTLS: three nodes whose raft ports speak mutual TLS
// with certificates of one CA, each naming its node id, form a cluster and
// store identical bytes; a plain TCP client, and a client with a
// certificate of another CA, get nothing from a raft port, while a
// member's certificate does.
func TestReplicator_MutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	nodes := cluster(t, 3, pki.member(t))
	appendRange(t, nodes[0].store, "tls", 20)
	converged(t, nodes, nodes[0])

	stranger := newTestPKI(t).tlsFor(t, "stranger", NodeURI("n1").String())
	query := func(tc *tls.Config) (NodeInfo, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		return queryInfo(ctx, nodes[1].addr, tc, "n2")
	}
	if _, err := query(nil); err == nil {
		t.Error("a plain TCP client got the node's info from a TLS raft port")
	}
	if _, err := query(stranger); err == nil {
		t.Error("a client with another CA's certificate got the node's info")
	}
	info, err := query(pki.tlsFor(t, "client", NodeURI("n1").String()))
	if err != nil || info.HTTPURL != "http://n2.test" {
		t.Fatalf("a member's certificate: info %+v, %v; want n2's", info, err)
	}
}
