package replicator

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfig_RaftBeyondLoopback (issue #20, finding 1): plain raft used to
// be accepted on any address, while anyone who reaches a plain raft port
// writes to the ledger. An address beyond loopback (listened on or
// advertised) now needs TLS, or Insecure; a TLS certificate must name this
// node's id.
func TestConfig_RaftBeyondLoopback(t *testing.T) {
	pki := newTestPKI(t)
	own := pki.tlsFor(t, "n1", NodeURI("n1").String())
	other := pki.tlsFor(t, "n2", NodeURI("n2").String())
	anonymous := pki.tlsFor(t, "anonymous", "")
	cases := []struct {
		name      string
		addr, adv string
		tls       *tls.Config
		insecure  bool
		want      string // in the error; "" for valid
	}{
		{"loopback IPv4", "127.0.0.1:7001", "", nil, false, ""},
		{"loopback IPv6", "[::1]:7001", "", nil, false, ""},
		{"localhost", "localhost:7001", "", nil, false, ""},
		{"a wildcard address without TLS", "0.0.0.0:7001", "10.0.0.1:7001", nil, false, `RaftAddr "0.0.0.0:7001" is beyond loopback`},
		{"a private address without TLS", "10.0.0.1:7001", "", nil, false, "--raft-insecure"},
		{"an advertised address beyond loopback", "127.0.0.1:7001", "10.0.0.1:7001", nil, false, `Advertise "10.0.0.1:7001" is beyond loopback`},
		{"beyond loopback with Insecure", "10.0.0.1:7001", "", nil, true, ""},
		{"beyond loopback with TLS", "10.0.0.1:7001", "", own, false, ""},
		{"TLS with another node's certificate", "10.0.0.1:7001", "", other, false, `names node "n2", but this node is "n1"`},
		{"TLS with a certificate without node id", "127.0.0.1:7001", "", anonymous, false, CodeRaftPeerNoNodeID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{NodeID: "n1", RaftAddr: tc.addr, Advertise: tc.adv, Dir: t.TempDir(), TLS: tc.tls, Insecure: tc.insecure,
				Info: func() NodeInfo { return NodeInfo{} }}
			c.setDefaults()
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v, want valid", err)
			case tc.want != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want ErrInvalidConfig with %q", err, tc.want)
			}
		})
	}
}

// TestOpen_InsecureRaftWarns: Open refuses plain raft advertised beyond
// loopback before it creates anything; with Insecure it starts and logs a
// warning that says what anyone reaching the port can do.
func TestOpen_InsecureRaftWarns(t *testing.T) {
	n := &testNode{id: "n1"}
	dir := filepath.Join(t.TempDir(), "refused")
	cfg := testConfig("n1", func(c *Config) { c.Advertise = "192.0.2.10:7001"; c.Bootstrap = true })
	cfg.Dir, cfg.Info = dir, func() NodeInfo { return NodeInfo{} }
	if _, err := Open(cfg, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Open: %v, want ErrInvalidConfig", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused Open left %s behind: %v", dir, err)
	}
	var logs syncBuffer
	cfg = testConfig("n1", func(c *Config) { c.Advertise = "192.0.2.10:7001"; c.Bootstrap = true; c.Insecure = true })
	cfg.Logger = newBufferLogger(t, &logs, "n1")
	startNode(t, n, cfg)
	eventually(t, "n1 leads", 10*time.Second, func() bool { return n.rep.IsLeader() })
	if !strings.Contains(logs.String(), "INSECURE: raft runs on plain TCP beyond loopback") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
}
