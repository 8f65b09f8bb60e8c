package backup_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/backup"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// testNode is a real node on a temporary data folder, serving real HTTP on
// a loopback port, with some events.
type testNode struct {
	*node.Node
	data string
}

func startNode(t *testing.T, events int) *testNode {
	t.Helper()
	data := t.TempDir()
	n, err := node.Open(node.Config{DataDir: data, API: api.Config{Addr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	tn := &testNode{Node: n, data: data}
	tn.append(t, events)
	return tn
}

func (n *testNode) client() *client.Client { return client.New(n.URL(), "") }

func (n *testNode) append(t *testing.T, count int) {
	t.Helper()
	for i := 0; i < count; i += 100 {
		evs := make([]wire.EventIn, min(100, count-i))
		for j := range evs {
			evs[j] = wire.EventIn{Type: "T", Data: fmt.Appendf(nil, `{"i":%d}`, i+j)}
		}
		if _, err := n.client().Append(t.Context(), fmt.Sprintf("s-%d", i%7), events.ExpectAny, evs); err != nil {
			t.Fatal(err)
		}
	}
}

func (n *testNode) fetch(t *testing.T, cfg backup.FetchConfig) *backup.FetchResult {
	t.Helper()
	res, err := backup.Fetch(t.Context(), n.client(), filepath.Join(t.TempDir(), "backup"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// openRestored opens a node on a restored data folder (no HTTP serving
// needed) and closes it at the end of the test.
func openRestored(t *testing.T, data string) *node.Node {
	t.Helper()
	r, err := node.Open(node.Config{DataDir: data, API: api.Config{Addr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

var errInjected = errors.New("injected failure")

// TestRestore_FailureMidCopyLeavesNoDataFolder: a restore that fails in
// the middle of copying (a write error), or that crashes there (writes
// fail and nothing can be removed any more, as after a power cut), never
// leaves a data folder a node would open as a partial ledger: the folder
// is absent, and only the staging folder may remain. A rerun removes
// what was left and restores a folder whose node serves the backup's
// head with the original's keys.
func TestRestore_FailureMidCopyLeavesNoDataFolder(t *testing.T) {
	n := startNode(t, 3000)
	bk := n.fetch(t, backup.FetchConfig{IncludePrivateKeys: true})
	tests := []struct {
		name          string
		failRemovals  bool
		leavesStaging bool
	}{
		{"a write fails", false, false},
		{"a crash mid-copy", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "restored")
			var writes atomic.Int64
			inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
				switch {
				case op.Kind == errorfs.OpFileWrite && writes.Add(1) > 5:
					return errInjected
				case tc.failRemovals && (op.Kind == errorfs.OpRemove || op.Kind == errorfs.OpRemoveAll):
					return errInjected
				}
				return nil
			})
			_, err := backup.Restore(t.Context(), bk.Dir, data, backup.RestoreConfig{FS: errorfs.Wrap(vfs.Default, inj)})
			if !errors.Is(err, errInjected) {
				t.Fatalf("restore with a failing disk: %v", err)
			}
			if exists(data) {
				t.Fatalf("a failed restore left %s", data)
			}
			if got := exists(data + ".restoring"); got != tc.leavesStaging {
				t.Fatalf("staging folder left: %t, want %t", got, tc.leavesStaging)
			}

			res, err := backup.Restore(t.Context(), bk.Dir, data, backup.RestoreConfig{})
			if err != nil {
				t.Fatalf("rerun: %v", err)
			}
			if exists(data+".restoring") || exists(filepath.Join(data, ".greffe-incomplete")) {
				t.Fatal("the rerun left its staging folder or marker")
			}
			r := openRestored(t, data)
			want := events.Head{Size: bk.Manifest.Size, Root: [32]byte(bk.Manifest.Root), RecordedAt: bk.Manifest.LastRecordedAt}
			if diff := cmp.Diff(want, r.Store.Head()); diff != "" || res.Size != want.Size {
				t.Fatalf("restored head (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(n.Keys.Verifiers, r.Keys.Verifiers); diff != "" || r.Store.LedgerID() != n.Store.LedgerID() {
				t.Fatalf("restored keys (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReceive_DamagedStreamLeavesNoBackup: a stream cut short (the node
// stopped mid-way, before the manifest or before its signature), with a
// changed byte, or with the signature of another backup never ends as a
// backup folder: the folder is absent and the staging folder removed.
func TestReceive_DamagedStreamLeavesNoBackup(t *testing.T) {
	n := startNode(t, 2000)
	resp, err := n.client().Stream(t.Context(), wire.BackupRoute)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(stream)
	flipped[len(flipped)/2] ^= 0x40
	// Another backup of the same node: its signature entry, as long as
	// this one's (one signature by the same key), signs another manifest.
	resp, err = n.client().Stream(t.Context(), wire.BackupRoute)
	if err != nil {
		t.Fatal(err)
	}
	another, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	sigAt := func(b []byte) int { return bytes.LastIndex(b, []byte(backup.ManifestSigFile)) }
	swapped := append(bytes.Clone(stream[:sigAt(stream)]), another[sigAt(another):]...)
	tests := []struct {
		name   string
		stream []byte
		ok     bool
		why    string // in the error, when not empty
	}{
		{"whole", stream, true, ""},
		{"cut in the middle", stream[:len(stream)/2], false, ""},
		{"cut in the manifest", stream[:bytes.LastIndex(stream, []byte(`"files"`))+10], false, ""},
		{"cut before the manifest's signature", stream[:sigAt(stream)], false, "before the manifest's signature"},
		{"the signature of another manifest", swapped, false, "of another manifest"},
		{"a byte changed", flipped, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "backup")
			m, err := backup.Receive(t.Context(), bytes.NewReader(tc.stream), dir, backup.ReceiveConfig{})
			if tc.ok {
				if err != nil || m.Size != n.Store.Head().Size || !exists(filepath.Join(dir, backup.ManifestFile)) {
					t.Fatalf("receive: %+v %v", m.Size, err)
				}
				return
			}
			if !errors.Is(err, backup.ErrBadStream) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("receive a damaged stream: %v (want %q in it)", err, tc.why)
			}
			if exists(dir) || exists(dir+".partial") {
				t.Fatal("a damaged stream left a folder")
			}
		})
	}
}

// TestRestore_WithoutKeys: a backup taken without the private keys (the
// default) holds the verifier keys and no private key. It verifies on
// first use (its verifier key signed its ledger's checkpoints) and with
// the ledger's verifier key given. Restored alone, its key is published
// retired and the node signs with a new one; restored with the original
// key folder (which must be this ledger's), the node signs with the
// original keys. Before issue #20 a backup without keys held none, could
// not be verified without --verifier, and was not restored without --keys.
func TestRestore_WithoutKeys(t *testing.T) {
	n := startNode(t, 500)
	other := startNode(t, 0)
	bk := n.fetch(t, backup.FetchConfig{})
	pubs, _ := filepath.Glob(filepath.Join(bk.Dir, backup.KeysDir, "*.pub"))
	privs, _ := filepath.Glob(filepath.Join(bk.Dir, backup.KeysDir, "*.key"))
	if bk.Manifest.Keys || len(privs) > 0 || len(pubs) != 1 {
		t.Fatalf("a backup without private keys holds %v and %v", privs, pubs)
	}
	rep, err := backup.Verify(t.Context(), bk.Dir, backup.VerifyConfig{})
	if err != nil || !rep.Verified || rep.Trust.Mode != backup.TrustFirstUse || fmt.Sprint(rep.Trust.Keys) != fmt.Sprint(n.Keys.Verifiers) {
		t.Fatalf("verify on first use: %+v %v", rep, err)
	}
	if rep, err := backup.Verify(t.Context(), bk.Dir, backup.VerifyConfig{Verifiers: n.Keys.Verifiers}); err != nil || !rep.Verified || rep.Trust.Mode != backup.TrustGiven {
		t.Fatalf("verify with the node's keys: %+v %v", rep, err)
	}

	keysOf := func(n *testNode) string { return filepath.Join(n.data, backup.KeysDir) }
	tests := []struct {
		name    string
		keys    string
		ok      bool
		signing bool
	}{
		{"no keys", "", true, false},
		{"another ledger's keys", keysOf(other), false, false},
		{"the node's keys", keysOf(n), true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "restored")
			res, err := backup.Restore(t.Context(), bk.Dir, data, backup.RestoreConfig{Keys: tc.keys})
			if !tc.ok {
				if !errors.Is(err, backup.ErrKeys) || exists(data) {
					t.Fatalf("restore with %s: %v", tc.name, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Signing != tc.signing || len(res.Keys) != 1 || res.Keys[0].Verifier != n.Keys.Verifiers[0] || res.Keys[0].Active != tc.signing {
				t.Fatalf("restored keys %+v, signing %t", res.Keys, res.Signing)
			}
			r := openRestored(t, data)
			if r.Store.Head().Size != bk.Manifest.Size {
				t.Fatalf("restored head %d, backup %d", r.Store.Head().Size, bk.Manifest.Size)
			}
			if tc.signing {
				if diff := cmp.Diff(n.Keys.Verifiers, r.Keys.Verifiers); diff != "" {
					t.Fatalf("restored keys (-want +got):\n%s", diff)
				}
				return
			}
			// A new active key, the original one retired (still published).
			if len(r.Keys.Active) != 1 || r.Keys.Active[0] == n.Keys.Verifiers[0] || len(r.Keys.Verifiers) != 2 || r.Keys.Verifiers[1] != n.Keys.Verifiers[0] {
				t.Fatalf("restored without private keys: active %v, published %v", r.Keys.Active, r.Keys.Verifiers)
			}
		})
	}
	// A backup with its private keys takes no others.
	full := n.fetch(t, backup.FetchConfig{IncludePrivateKeys: true})
	if _, err := backup.Restore(t.Context(), full.Dir, filepath.Join(t.TempDir(), "r"), backup.RestoreConfig{Keys: keysOf(n)}); !errors.Is(err, backup.ErrKeys) {
		t.Fatalf("--keys with a backup that holds keys: %v", err)
	}
}

// TestDestination_NewOrEmpty: a backup and a restore write into a folder
// that does not exist or is empty, never over anything; a staging folder
// of that name that greffe did not leave is never removed.
func TestDestination_NewOrEmpty(t *testing.T) {
	n := startNode(t, 10)
	bk := n.fetch(t, backup.FetchConfig{})
	tests := []struct {
		name    string
		prepare func(t *testing.T, dest string)
		ok      bool
	}{
		{"new", func(*testing.T, string) {}, true},
		{"empty", func(t *testing.T, dest string) { mkdir(t, dest) }, true},
		{"not empty", func(t *testing.T, dest string) { mkdir(t, dest); write(t, filepath.Join(dest, "keep"), "x") }, false},
		{"a file", func(t *testing.T, dest string) { write(t, dest, "x") }, false},
		{"someone else's staging folder", func(t *testing.T, dest string) {
			for _, suffix := range []string{".partial", ".restoring"} {
				mkdir(t, dest+suffix)
				write(t, filepath.Join(dest+suffix, "keep"), "x")
			}
		}, false},
	}
	for _, tc := range tests {
		for _, op := range []string{"backup", "restore"} {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				dest := filepath.Join(t.TempDir(), "dest")
				tc.prepare(t, dest)
				var err error
				if op == "backup" {
					_, err = backup.Fetch(t.Context(), n.client(), dest, backup.FetchConfig{})
				} else {
					_, err = backup.Restore(t.Context(), bk.Dir, dest, backup.RestoreConfig{})
				}
				if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, backup.ErrNotEmpty) {
					t.Fatalf("%s into %s: %v", op, tc.name, err)
				}
				for _, p := range []string{filepath.Join(dest, "keep"), dest + ".partial/keep", dest + ".restoring/keep"} {
					if b, err := os.ReadFile(p); err == nil && string(b) != "x" {
						t.Fatalf("%s was changed", p)
					}
				}
			})
		}
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
