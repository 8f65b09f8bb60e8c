package replicator

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestNodeIDOf: a certificate names a node id in exactly one URI SAN
// urn:greffe:node:<id>; other URIs are ignored; none, two, or an id that
// is no valid node id name no node.
func TestNodeIDOf(t *testing.T) {
	uri := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	cases := []struct {
		name string
		uris []*url.URL
		want string // "" for a refusal
	}{
		{"one node", []*url.URL{NodeURI("n1")}, "n1"},
		{"an id that needs escaping", []*url.URL{NodeURI("rack#1?a")}, "rack#1?a"},
		{"another URI beside it", []*url.URL{uri("spiffe://example/n9"), NodeURI("n2")}, "n2"},
		{"no URI", nil, ""},
		{"another scheme only", []*url.URL{uri("spiffe://example/n1")}, ""},
		{"two nodes", []*url.URL{NodeURI("n1"), NodeURI("n2")}, ""},
		{"an empty id", []*url.URL{uri("urn:greffe:node:")}, ""},
		{"an id with a space", []*url.URL{uri("urn:greffe:node:a%20b")}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NodeIDOf(&x509.Certificate{Subject: pkix.Name{CommonName: "c"}, URIs: tc.uris})
			switch {
			case tc.want != "" && (err != nil || got != tc.want):
				t.Fatalf("NodeIDOf = %q, %v; want %q", got, err, tc.want)
			case tc.want == "" && (err == nil || !strings.HasPrefix(err.Error(), CodeRaftPeerNoNodeID)):
				t.Fatalf("NodeIDOf = %q, %v; want a %s refusal", got, err, CodeRaftPeerNoNodeID)
			}
		})
	}
}

// TestPeerCA: a member certificate the CA issues verifies against it for
// both server and client authentication, names its node id and hosts, and
// the CA round-trips through PEM.
func TestPeerCA(t *testing.T) {
	now := time.Now()
	ca, err := NewPeerCA(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadPeerCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := again.IssuePeer("n1", []string{"10.0.0.1", "node1.example"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(c)
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	cb, _ := pem.Decode(certPEM)
	root, _ := x509.ParseCertificate(cb.Bytes)
	roots.AddCert(root)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: "node1.example"}); err != nil {
			t.Errorf("verify for %v: %v", usage, err)
		}
	}
	if id, err := NodeIDOf(leaf); err != nil || id != "n1" {
		t.Errorf("NodeIDOf = %q, %v", id, err)
	}
	if len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != "10.0.0.1" {
		t.Errorf("IP SANs %v", leaf.IPAddresses)
	}
	if _, _, err := ca.IssuePeer("a b", []string{"h"}, now, time.Hour); err == nil {
		t.Error("issued a certificate for node id \"a b\"")
	}
	if _, _, err := ca.IssuePeer("n2", nil, now, time.Hour); err == nil {
		t.Error("issued a certificate naming no host")
	}
}
