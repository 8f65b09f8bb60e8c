package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/replicator"
	"github.com/greffe/greffe/wire"
)

// The raft port's side of issue #20 through the CLI: greffe cluster certs,
// serve's refusals (raft beyond loopback without TLS, another --node-id on
// a folder) and the exit code of a removed member.

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(raw)
	if b == nil {
		t.Fatalf("%s holds no PEM", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClusterCerts: greffe cluster certs writes a CA and one certificate
// per member that names its node id and hosts, verifiable against the CA,
// keys 0600; run again on the same folder it issues a new member with the
// same CA; it never overwrites a file, and a refusal writes nothing.
func TestClusterCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, out, errs := runCLI(t, "", "cluster", "certs", "--out", dir, "--node", "n1=127.0.0.1:7101", "--node", "n2=10.0.0.2,node2.example:7102", "--json")
	if code != exitOK {
		t.Fatalf("cluster certs: exit %d: %s", code, errs)
	}
	var res replicator.ClusterCerts
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !res.NewCA || len(res.Nodes) != 2 {
		t.Fatalf("cluster certs answered %+v", res)
	}
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, res.CACert))
	verify := func(path, id string, ips, dns []string) {
		t.Helper()
		c := readCert(t, path)
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s does not verify against the CA: %v", path, err)
		}
		if got, err := replicator.NodeIDOf(c); err != nil || got != id {
			t.Errorf("%s names node %q, %v; want %q", path, got, err, id)
		}
		var gotIPs []string
		for _, ip := range c.IPAddresses {
			gotIPs = append(gotIPs, ip.String())
		}
		if strings.Join(gotIPs, ",") != strings.Join(ips, ",") || strings.Join(c.DNSNames, ",") != strings.Join(dns, ",") {
			t.Errorf("%s names hosts %v %v, want %v %v", path, gotIPs, c.DNSNames, ips, dns)
		}
	}
	verify(filepath.Join(dir, "n1.pem"), "n1", []string{"127.0.0.1"}, nil)
	verify(filepath.Join(dir, "n2.pem"), "n2", []string{"10.0.0.2"}, []string{"node2.example"})
	for _, key := range []string{"ca.key", "n1.key", "n2.key"} {
		fi, err := os.Stat(filepath.Join(dir, key))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", key, err, fi.Mode().Perm())
		}
	}

	// A member added later: the same CA signs it.
	if code, out, errs := runCLI(t, "", "cluster", "certs", "--out", dir, "--node", "n3=127.0.0.1"); code != exitOK || !strings.Contains(out, "issued with the cluster CA") {
		t.Fatalf("cluster certs for n3: exit %d: %s %s", code, out, errs)
	}
	verify(filepath.Join(dir, "n3.pem"), "n3", []string{"127.0.0.1"}, nil)

	before, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n1, _ := os.ReadFile(filepath.Join(dir, "n1.pem"))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an existing member", []string{"--node", "n4=127.0.0.1", "--node", "n1=127.0.0.1"}, "n1.pem exists"},
		{"a bad id", []string{"--node", "a b=127.0.0.1"}, `node id "a b"`},
		{"no host", []string{"--node", "n5="}, "ID=HOST"},
		{"no node", nil, "--node: name at least one member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, "", append([]string{"cluster", "certs", "--out", dir}, tc.args...)...)
			if code != exitCannot || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, %q; want exit %d with %q", code, errs, exitCannot, tc.want)
			}
			after, err := os.ReadDir(dir)
			if err != nil || len(after) != len(before) {
				t.Fatalf("the refusal wrote files: %d, then %d (%v)", len(before), len(after), err)
			}
			if again, _ := os.ReadFile(filepath.Join(dir, "n1.pem")); !bytes.Equal(again, n1) {
				t.Fatal("the refusal changed n1.pem")
			}
		})
	}
}

// TestCluster_SecureSetupTwoCommands: the secure setup of
// docs/CLUSTER.md: greffe cluster certs, then three greffe serve with the
// three --raft-tls-* flags; the members form a cluster over mutual TLS,
// every member answers the others (the info protocol over TLS), and a
// write through one is read through another.
func TestCluster_SecureSetupTwoCommands(t *testing.T) {
	dir := t.TempDir()
	ids := []string{"n1", "n2", "n3"}
	addrs := map[string]string{}
	args := []string{"cluster", "certs", "--out", filepath.Join(dir, "certs")}
	for _, id := range ids {
		addrs[id] = freeAddr(t)
		args = append(args, "--node", id+"="+addrs[id])
	}
	if code, _, errs := runCLI(t, "", args...); code != exitOK {
		t.Fatalf("cluster certs: exit %d: %s", code, errs)
	}
	procs := map[string]*proc{}
	t.Cleanup(func() {
		for _, p := range procs {
			p.kill9()
		}
	})
	for i, id := range ids {
		flags := []string{"--node-id", id, "--raft-addr", addrs[id],
			"--raft-tls-cert", filepath.Join(dir, "certs", id+".pem"), "--raft-tls-key", filepath.Join(dir, "certs", id+".key"),
			"--raft-tls-ca", filepath.Join(dir, "certs", "ca.pem")}
		if i == 0 {
			flags = append(flags, "--bootstrap")
		} else {
			flags = append(flags, "--join", procs["n1"].url)
		}
		procs[id] = startServe(t, filepath.Join(dir, id), flags...)
	}
	waitUntil(t, "three reachable voters over mutual TLS", 30*time.Second, func() bool {
		var st wire.Status
		if err := client.New(procs["n1"].url, "").Do(t.Context(), http.MethodGet, "/v1/cluster/status", nil, &st); err != nil || len(st.Servers) != 3 {
			return false
		}
		for _, s := range st.Servers {
			if s.Suffrage != "voter" || !s.Reachable {
				return false
			}
		}
		return true
	})
	if _, err := client.New(procs["n3"].url, "").Append(t.Context(), "secure", events.ExpectAny, []wire.EventIn{{Type: "T", Data: []byte(`{}`)}}); err != nil {
		t.Fatalf("append through n3: %v", err)
	}
	waitUntil(t, "n2 holds the event", 10*time.Second, func() bool {
		evs, err := client.New(procs["n2"].url, "").ReadStream(t.Context(), "secure", events.ReadOptions{})
		return err == nil && len(evs.Events) == 1
	})
}

// TestServe_RaftBeyondLoopbackNeedsTLS (issue #20, finding 1): serve used
// to run plain raft on any address. A raft address beyond loopback,
// listened on or advertised, without --raft-tls-* is refused at start (exit
// 2, naming the flags) and the data folder is not left behind; with
// --raft-insecure it starts and logs a warning.
func TestServe_RaftBeyondLoopbackNeedsTLS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"a wildcard listen address", []string{"--raft-addr", "0.0.0.0:0", "--raft-advertise", "192.0.2.10:7101"}},
		{"an advertised address beyond loopback", []string{"--raft-addr", "127.0.0.1:0", "--raft-advertise", "192.0.2.10:7101"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "d")
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			var out, errb bytes.Buffer
			code := run(ctx, append([]string{"serve", "--data", data, "--http", "127.0.0.1:0", "--bootstrap"}, tc.flags...), nil, &out, &errb)
			if code != exitCannot || !strings.Contains(errb.String(), "beyond loopback") || !strings.Contains(errb.String(), "--raft-insecure") {
				t.Fatalf("exit %d, %q; want exit %d naming --raft-tls-* and --raft-insecure", code, errb.String(), exitCannot)
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused start left %s: %v", data, err)
			}
		})
	}

	t.Run("with --raft-insecure", func(t *testing.T) {
		cmd := exec.Command(greffeBin, "serve", "--data", filepath.Join(t.TempDir(), "d"), "--http", "127.0.0.1:0", "--log-level", "warn",
			"--raft-addr", "127.0.0.1:0", "--raft-advertise", "192.0.2.10:7101", "--raft-insecure", "--bootstrap")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncWriter
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: cmd}
		t.Cleanup(p.kill9)
		served := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
					served <- m[1]
				}
			}
		}()
		select {
		case u := <-served:
			waitUntil(t, "the insecure node leads", 10*time.Second, func() bool {
				var st wire.Status
				return client.New(u, "").Do(t.Context(), http.MethodGet, "/v1/cluster/status", nil, &st) == nil && st.State == "Leader"
			})
		case <-time.After(20 * time.Second):
			t.Fatalf("serve --raft-insecure did not start: %s", stderr.String())
		}
		if !strings.Contains(stderr.String(), "INSECURE: raft runs on plain TCP beyond loopback") {
			t.Fatalf("no warning logged:\n%s", stderr.String())
		}
	})
}

// syncWriter collects a subprocess's output for a test to read.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestServe_NodeIDRemembered (issue #20; issue #24, item 7): serve on a
// member's folder with another --node-id used to start, conclude that the
// node had been removed and exit 0. It is refused at start: exit 2, the
// message naming both ids and the flag to use.
func TestServe_NodeIDRemembered(t *testing.T) {
	data := filepath.Join(t.TempDir(), "d1")
	n, err := node.Open(node.Config{DataDir: data, NodeID: "n1", API: api.Config{Addr: "127.0.0.1:0"},
		Cluster: node.ClusterConfig{RaftAddr: "127.0.0.1:0", Bootstrap: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"serve", "--data", data, "--http", "127.0.0.1:0", "--node-id", "n2", "--raft-addr", "127.0.0.1:0"}, nil, &out, &errb)
	if code != exitCannot || !strings.Contains(errb.String(), `belongs to node "n1"`) || !strings.Contains(errb.String(), `not to "n2"`) ||
		!strings.Contains(errb.String(), "--node-id n1") {
		t.Fatalf("serve as n2 on n1's folder: exit %d, %q; want exit %d naming n1, n2 and --node-id n1", code, errb.String(), exitCannot)
	}
}

// TestCluster_RemovedMemberExitCode (issue #20, finding 2): a removed
// member's greffe serve used to exit 0, as after a clean stop, so a
// service manager neither restarted nor alerted. It exits 4 (exitRemoved,
// README's table), and the cluster goes on.
func TestCluster_RemovedMemberExitCode(t *testing.T) {
	dir := t.TempDir()
	n1 := startServe(t, filepath.Join(dir, "n1"), "--node-id", "n1", "--raft-addr", freeAddr(t), "--bootstrap")
	t.Cleanup(n1.kill9)
	waitUntil(t, "n1 leads", 10*time.Second, func() bool {
		var st wire.Status
		return client.New(n1.url, "").Do(t.Context(), http.MethodGet, "/v1/cluster/status", nil, &st) == nil && st.State == "Leader"
	})
	n2 := startServe(t, filepath.Join(dir, "n2"), "--node-id", "n2", "--raft-addr", freeAddr(t), "--join", n1.url)
	t.Cleanup(n2.kill9)
	waitUntil(t, "n2 a voter", 20*time.Second, func() bool {
		var st wire.Status
		if client.New(n1.url, "").Do(t.Context(), http.MethodGet, "/v1/cluster/status", nil, &st) != nil || len(st.Servers) != 2 {
			return false
		}
		return st.Servers[0].Suffrage == "voter" && st.Servers[1].Suffrage == "voter"
	})
	exited := make(chan error, 1)
	go func() { exited <- n2.cmd.Wait() }()
	if code, _, errs := runCLI(t, "", "cluster", "remove", "n2", "--server", n1.url); code != exitOK {
		t.Fatalf("cluster remove n2: exit %d: %s", code, errs)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitRemoved {
			t.Fatalf("the removed member exited with %v, want exit status %d", err, exitRemoved)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the removed member did not exit")
	}
	if _, err := client.New(n1.url, "").Append(t.Context(), "after", events.ExpectAny, []wire.EventIn{{Type: "T", Data: []byte(`{}`)}}); err != nil {
		t.Fatalf("append after the removal: %v", err)
	}
}
