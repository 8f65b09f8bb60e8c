package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
	"github.com/greffe/greffe/internal/pebbleslog"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

const auditLedger = "00000000-0000-4000-8000-0000000000c1"

// auditNode runs a node of ledger auditLedger on data with a fixed clock
// (two nodes fed the same appends store the same bytes), optionally with
// the signing keys of another data folder. stop closes it.
func auditNode(t *testing.T, data, keysFrom string) (n *node.Node, stop func()) {
	t.Helper()
	return auditNodeWith(t, data, keysFrom, func(*node.Config) {})
}

// auditNodeWith is auditNode with tune changing the node's config first.
func auditNodeWith(t *testing.T, data, keysFrom string, tune func(*node.Config)) (n *node.Node, stop func()) {
	t.Helper()
	if keysFrom != "" {
		if err := os.CopyFS(filepath.Join(data, "keys"), os.DirFS(filepath.Join(keysFrom, "keys"))); err != nil {
			t.Fatal(err)
		}
	}
	cfg := node.Config{DataDir: data, LedgerID: auditLedger, API: api.Config{Addr: "127.0.0.1:0"}}
	cfg.Store.Clock = func() time.Time { return time.Unix(1_700_000_000, 0) }
	cfg.Store.CheckpointInterval = -1
	tune(&cfg)
	n, err := node.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	var stopped bool
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return n, stop
}

// appendSeq appends events [from, to) one per call, ids derived from seed.
func appendSeq(t *testing.T, url, seed string, from, to int) {
	t.Helper()
	c := client.New(url, "")
	for i := from; i < to; i++ {
		// Version 3: raw appends may not carry version-5 ids, the commands'.
		id := uuid.NewMD5(uuid.NameSpaceOID, fmt.Appendf(nil, "%s-%d", seed, i))
		if _, err := c.Append(t.Context(), fmt.Sprintf("v-%d", i%2), events.ExpectAny,
			[]wire.EventIn{{ID: id.String(), Type: "T", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCLI_VerifyOnlineAndOffline(t *testing.T) {
	data := t.TempDir()
	n, stop := auditNode(t, data, "")
	srv := "--server=" + n.URL()
	appendSeq(t, n.URL(), "a", 0, 300)

	code, out, errs := runCLI(t, "", "verify", srv)
	if code != exitOK || !strings.Contains(out, "VERIFIED") || !strings.Contains(out, "events      300 in 2 streams") {
		t.Fatalf("verify --server: %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = runCLI(t, "", "verify", srv, "--json")
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || !rep.Verified || rep.Events != 300 {
		t.Fatalf("verify --json: %d %v %s", code, err, out)
	}
	code, out, errs = runCLI(t, "", "verify", srv, "--projections")
	if code != exitOK || !strings.Contains(out, "VERIFIED\n") || !strings.Contains(out, "every live projection equals its rebuild") {
		t.Fatalf("verify --projections: %d\n%s\n%s", code, out, errs)
	}
	// The data folder is held by the running node: could not run.
	if code, _, errs := runCLI(t, "", "verify", "--data", data); code != exitCannot || !strings.Contains(errs, "stop the node") {
		t.Fatalf("verify --data of a running node: %d %s", code, errs)
	}
	stop()
	if code, out, errs := runCLI(t, "", "verify", "--data", data, "--projections"); code != exitOK || !strings.Contains(out, "VERIFIED") || !strings.Contains(out, "every live projection") {
		t.Fatalf("verify --data --projections: %d\n%s\n%s", code, out, errs)
	}

	// One byte of one event, changed through Pebble: fault at its position.
	dir := node.LedgerDir(data)
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleslog.Logger{}})
	if err != nil {
		t.Fatal(err)
	}
	k := layout.EventKey(41)
	v, closer, err := db.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	nv := append([]byte(nil), v...)
	closer.Close()
	nv[bytes.Index(nv, []byte(`{"i":41}`))+5] ^= 1 // 41 -> 51: still canonical, another hash
	if err := db.Set(k, nv, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "", "verify", "--data", data)
	if code != exitRefused || !strings.Contains(out, "FAULT       position 41: leaf_hash_mismatch") {
		t.Fatalf("tampered: %d\n%s\n%s", code, out, errs)
	}
}

// TestCLI_VerifyDamagedStorage is issue 13 through the CLI: a flipped byte
// in a table panicked verify --data ("pebble: on-disk corruption", exit 2),
// one in a blob file made it "could not run" (exit 2), and one in the
// MANIFEST read as an empty ledger ("store_identity: meta format missing",
// "events 0 in 0 streams"). Each is now a storage_corrupt fault naming the
// file, exit 1, in text and in --json. The node's data folder is written by
// a real node with a small memtable, so that its events are in tables and
// their bytes in blob files.
func TestCLI_VerifyDamagedStorage(t *testing.T) {
	data := t.TempDir()
	n, stop := auditNodeWith(t, data, "", func(c *node.Config) { c.Store.MemTableSize = 256 << 10 })
	c := client.New(n.URL(), "")
	pad := strings.Repeat("p", 400) // above the store's value-separation threshold
	for i := 0; i < 600; i += 10 {
		evs := make([]wire.EventIn, 10)
		for j := range evs {
			evs[j] = wire.EventIn{ID: uuid.NewMD5(uuid.NameSpaceOID, fmt.Appendf(nil, "damage-%d", i+j)).String(), Type: "T",
				Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i+j, pad))}
		}
		if _, err := c.Append(t.Context(), fmt.Sprintf("d-%d", i%3), events.ExpectAny, evs); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	ledger := node.LedgerDir(data)
	largest := func(pattern string) string {
		names, _ := filepath.Glob(filepath.Join(ledger, pattern))
		var best string
		var size int64
		for _, n := range names {
			if fi, err := os.Stat(n); err == nil && fi.Size() > size {
				best, size = filepath.Base(n), fi.Size()
			}
		}
		if best == "" {
			t.Fatalf("no %s in %s", pattern, ledger)
		}
		return best
	}
	for _, tc := range []struct{ name, file string }{
		{"table", largest("*.sst")},
		{"blob file", largest("*.blob")},
		{"MANIFEST", largest("MANIFEST-*")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			copyDir := t.TempDir()
			if err := os.CopyFS(copyDir, os.DirFS(data)); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(node.LedgerDir(copyDir), tc.file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0x5a
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errs := runCLI(t, "", "verify", "--data", copyDir)
			if code != exitRefused || !strings.Contains(out, "storage_corrupt in "+tc.file) || strings.Contains(errs, "panic") {
				t.Errorf("verify --data: exit %d, want %d naming %s\n%s\n%s", code, exitRefused, tc.file, out, errs)
			}
			code, out, _ = runCLI(t, "", "verify", "--data", copyDir, "--json")
			var rep audit.Report
			if err := json.Unmarshal([]byte(out), &rep); code != exitRefused || err != nil || rep.First == nil ||
				rep.First.Kind != audit.KindStorageCorrupt || rep.First.File != tc.file {
				t.Errorf("verify --data --json: exit %d, %v, first fault %+v", code, err, rep.First)
			}
		})
	}
}

func TestCLI_VerifyStateCatchesFork(t *testing.T) {
	dataA := t.TempDir()
	a, _ := auditNode(t, dataA, "")
	appendSeq(t, a.URL(), "orig", 0, 10)
	state := filepath.Join(t.TempDir(), "auditor.json")
	if code, out, errs := runCLI(t, "", "verify", "--server", a.URL(), "--state", state); code != exitOK || !strings.Contains(out, "first run") {
		t.Fatalf("first run: %d\n%s\n%s", code, out, errs)
	}
	b, _ := auditNode(t, t.TempDir(), dataA)
	appendSeq(t, b.URL(), "orig", 0, 6)
	appendSeq(t, b.URL(), "forged", 6, 15)
	code, out, errs := runCLI(t, "", "verify", "--server", b.URL(), "--state", state)
	if code != exitRefused || !strings.Contains(out, "position 6 (checkpoint of size 10): fork_detected") || !strings.Contains(out, "evidence    "+state+".evidence/consistency-10-15.json") {
		t.Fatalf("forked log: %d\n%s\n%s", code, out, errs)
	}
}

func TestCLI_Prove(t *testing.T) {
	n, _ := auditNode(t, t.TempDir(), "")
	appendSeq(t, n.URL(), "p", 0, 20)
	srv := "--server=" + n.URL()
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"inclusion at the latest checkpoint", []string{"prove", "inclusion", "--position", "7", srv}, exitOK, "position 7 is in the tree of size 20: VERIFIED"},
		{"inclusion at a past size", []string{"prove", "inclusion", "--position", "7", "--size", "9", srv}, exitOK, "tree of size 9: VERIFIED"},
		{"consistency", []string{"prove", "consistency", "--from", "5", "--to", "18", srv}, exitOK, "the tree of size 18 extends the tree of size 5: VERIFIED"},
		{"consistency from the empty tree", []string{"prove", "consistency", "--from", "0", srv}, exitOK, "proof     0 hashes"},
		{"a position beyond the tree", []string{"prove", "inclusion", "--position", "25", srv}, exitCannot, ""},
		{"no position", []string{"prove", "inclusion", srv}, exitCannot, ""},
		{"a verifier of another ledger", []string{"prove", "inclusion", "--position", "1", srv, "--verifier", "greffe/other+12345678+AUkD5IHfkZcdEjQP2mXNpkBnrIjKhOXfzxNl3LDjk0xx"}, exitCannot, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, "", tc.args...)
			if code != tc.code || !strings.Contains(out, tc.out) {
				t.Errorf("exit %d, want %d\n%s\n%s", code, tc.code, out, errs)
			}
		})
	}
	// A node whose proofs are altered in transit: exit 1, nothing printed.
	lying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(n.URL() + r.URL.String())
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		var out wire.InclusionOut
		if r.URL.Path != "/v1/proof/inclusion" {
			w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
			w.WriteHeader(resp.StatusCode)
			_, _ = copyBody(w, resp)
			return
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		out.Hashes[0][0] ^= 1
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	defer lying.Close()
	code, out, errs := runCLI(t, "", "prove", "inclusion", "--position", "7", "--server", lying.URL)
	if code != exitRefused || out != "" || !strings.Contains(errs, audit.KindProofInvalid) {
		t.Errorf("altered proof: exit %d\n%s\n%s", code, out, errs)
	}
}

func copyBody(w http.ResponseWriter, resp *http.Response) (int64, error) {
	var n int64
	buf := make([]byte, 32<<10)
	for {
		k, err := resp.Body.Read(buf)
		if k > 0 {
			m, werr := w.Write(buf[:k])
			n += int64(m)
			if werr != nil {
				return n, werr
			}
		}
		if err != nil {
			return n, nil
		}
	}
}

func TestCLI_Keys(t *testing.T) {
	data := t.TempDir()
	_, stop := auditNode(t, data, "")
	stop()
	code, out, _ := runCLI(t, "", "keys", "list", "--data", data, "--json")
	var keys []node.KeyInfo
	if err := json.Unmarshal([]byte(out), &keys); code != exitOK || err != nil || len(keys) != 1 {
		t.Fatalf("keys list: %d %v %s", code, err, out)
	}
	if code, _, errs := runCLI(t, "", "keys", "retire", keys[0].Hash, "--data", data); code != exitRefused || !strings.Contains(errs, "last active key") {
		t.Fatalf("retiring the last key: %d %s", code, errs)
	}
	if code, out, _ := runCLI(t, "", "keys", "add", "--data", data); code != exitOK || !strings.Contains(out, "added greffe/"+auditLedger+"+") {
		t.Fatalf("keys add: %d %s", code, out)
	}
	if code, _, errs := runCLI(t, "", "keys", "retire", keys[0].Hash, "--data", data); code != exitOK {
		t.Fatalf("keys retire: %d %s", code, errs)
	}
	code, out, _ = runCLI(t, "", "keys", "list", "--data", data)
	if code != exitOK || !strings.Contains(out, keys[0].Hash+"  retired") || strings.Count(out, "active") != 1 {
		t.Fatalf("keys list after rotation: %d\n%s", code, out)
	}
	// A folder without keys takes the origin of its ledger.
	_ = os.RemoveAll(filepath.Join(data, "keys"))
	if code, out, errs := runCLI(t, "", "keys", "add", "--data", data); code != exitOK || !strings.Contains(out, auditLedger) {
		t.Fatalf("keys add to a folder without keys: %d %s %s", code, out, errs)
	}
}

func TestCLI_VerifyUsage(t *testing.T) {
	if code, _, errs := runCLI(t, "", "verify", "--data", "x", "--server", "http://127.0.0.1:1"); code != exitCannot || !strings.Contains(errs, "not both") {
		t.Errorf("both sources: %d %s", code, errs)
	}
	if code, _, _ := runCLI(t, "", "verify", "--server", "http://127.0.0.1:1"); code != exitCannot {
		t.Errorf("unreachable node: %d", code)
	}
	if code, _, _ := runCLI(t, "", "verify", "--data", t.TempDir()+"/none"); code != exitCannot {
		t.Errorf("missing data folder: %d", code)
	}
}
