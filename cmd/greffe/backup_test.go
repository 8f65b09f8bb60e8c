package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/backup"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

var errBackupReached = errors.New("reached")

// waitForHead waits (through a subscription) until the node's log holds at
// least size events.
func waitForHead(t *testing.T, n *node.Node, size uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := n.Store.Subscribe(ctx, size-1, events.Filter{}, func(events.Event) error { return errBackupReached })
	if !errors.Is(err, errBackupReached) {
		t.Fatalf("the log did not reach %d events: %v", size, err)
	}
}

// TestBackup_EndToEnd: writers append to a real node over HTTP while
// `greffe backup` takes a backup through the CLI; `backup verify` verifies
// it; `restore` makes a new data folder, on which a node serves a head
// equal to the backup's checkpoint, with the same ledger id and keys (it
// signs the same checkpoint at that size, byte for byte). The original
// node keeps taking writes, and a consistency proof from the backup's
// checkpoint to the original's newer checkpoint verifies
// (transparency-dev/merkle): the restored ledger is a prefix of the live
// one.
func TestBackup_EndToEnd(t *testing.T) {
	n := startNode(t)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client.New(n.URL(), "")
			for i := 0; ctx.Err() == nil; i++ {
				evs := make([]wire.EventIn, 20)
				for j := range evs {
					evs[j] = wire.EventIn{Type: "Loaded", Data: fmt.Appendf(nil, `{"w":%d,"i":%d}`, w, i)}
				}
				if _, err := c.Append(ctx, fmt.Sprintf("load-%d", w), events.ExpectAny, evs); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	waitForHead(t, n, 3000)

	dir := filepath.Join(t.TempDir(), "backup")
	code, out, errs := runCLI(t, "", "backup", "--server="+n.URL(), "--out", dir, "--json", "--include-private-keys")
	if code != exitOK {
		t.Fatalf("backup: exit %d: %s", code, errs)
	}
	var sum backupSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("backup --json: %v\n%s", err, out)
	}
	if sum.Events < 3000 || sum.Checkpoint.Size != sum.Events || sum.Bytes == 0 || !sum.Keys || !sum.Signed || sum.LedgerID != n.Store.LedgerID() {
		t.Fatalf("backup summary %+v", sum)
	}
	// The node keeps taking writes after the backup.
	waitForHead(t, n, n.Store.Head().Size+1000)

	code, out, errs = runCLI(t, "", "backup", "verify", dir, "--verifier", n.Keys.Verifiers[0])
	if code != exitOK || !strings.Contains(out, "VERIFIED") {
		t.Fatalf("backup verify: exit %d\n%s%s", code, out, errs)
	}
	data := filepath.Join(t.TempDir(), "restored")
	code, out, errs = runCLI(t, "", "restore", "--from", dir, "--data", data, "--json", "--verifier", n.Keys.Verifiers[0])
	if code != exitOK {
		t.Fatalf("restore: exit %d: %s", code, errs)
	}
	var res backup.RestoreResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Size != sum.Events {
		t.Fatalf("restore --json: %+v %v\n%s", res, err, out)
	}
	stop()
	wg.Wait()

	r, err := node.Open(node.Config{DataDir: data, API: api.Config{Addr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	note, err := os.ReadFile(filepath.Join(dir, backup.CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := audit.ParseVerifiers(n.Keys.Verifiers)
	if err != nil {
		t.Fatal(err)
	}
	cp, _, err := events.OpenCheckpoint(note, n.Store.Origin(), vs...)
	if err != nil || cp.Size != sum.Events || base64.StdEncoding.EncodeToString(cp.Root[:]) != sum.Checkpoint.Root {
		t.Fatalf("the backup's checkpoint %+v: %v", cp, err)
	}
	if h := r.Store.Head(); h.Size != cp.Size || h.Root != cp.Root || r.Store.LedgerID() != n.Store.LedgerID() {
		t.Fatalf("restored node head %+v ledger %s, backup checkpoint %d", h, r.Store.LedgerID(), cp.Size)
	}
	if fmt.Sprint(r.Keys.Verifiers) != fmt.Sprint(n.Keys.Verifiers) {
		t.Fatalf("restored keys %v, original %v", r.Keys.Verifiers, n.Keys.Verifiers)
	}
	again, err := r.Store.CheckpointAt(t.Context(), cp.Size)
	if err != nil || !bytes.Equal(again.Note, note) {
		t.Fatalf("the restored node signs another checkpoint at %d: %v\n%s\n%s", cp.Size, err, again.Note, note)
	}

	latest, err := n.Store.LatestCheckpoint(t.Context())
	if err != nil || latest.Size <= cp.Size {
		t.Fatalf("the original's checkpoint %d after the backup's %d: %v", latest.Size, cp.Size, err)
	}
	if _, _, err := events.OpenCheckpoint(latest.Note, n.Store.Origin(), vs...); err != nil {
		t.Fatal(err)
	}
	hashes, err := events.ConsistencyProof(t.Context(), n.Store, cp.Size, latest.Size)
	if err != nil {
		t.Fatal(err)
	}
	if err := proof.VerifyConsistency(events.Hasher, cp.Size, latest.Size, hashes, cp.Root[:], latest.Root[:]); err != nil {
		t.Fatalf("consistency from the backup's checkpoint %d to the original's %d: %v", cp.Size, latest.Size, err)
	}
	// The restored node takes writes where the backup ends.
	o, err := r.Store.Append(t.Context(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: "after-restore",
		Events: []events.Proposed{{ID: [16]byte{1}, Type: "T", Data: []byte(`{}`), Metadata: []byte(`{}`)}}}}})
	if err != nil || o.Events[0].Position != cp.Size {
		t.Fatalf("append on the restored node: %+v %v", o, err)
	}
}

// TestBackupVerify_Faults: a good backup verifies (exit 0); a flipped byte
// in a file, a missing file, an extra file, a missing manifest, a
// checkpoint of another size with the manifest edited to match it (the
// manifest's signature no longer verifies: issue #20), the same in a
// backup of format 1 (unsigned: the checkpoint is found wrong), and a
// private key swapped in that backup each give exit 1, naming the fault's
// kind and the file.
func TestBackupVerify_Faults(t *testing.T) {
	n := startNode(t)
	c := client.New(n.URL(), "")
	for i := range 10 {
		evs := make([]wire.EventIn, 100)
		for j := range evs {
			evs[j] = wire.EventIn{Type: "T", Data: fmt.Appendf(nil, `{"i":%d}`, i*100+j)}
		}
		if _, err := c.Append(t.Context(), fmt.Sprintf("s-%d", i%3), events.ExpectAny, evs); err != nil {
			t.Fatal(err)
		}
	}
	good := filepath.Join(t.TempDir(), "backup")
	if code, _, errs := runCLI(t, "", "backup", "--server="+n.URL(), "--out", good, "--include-private-keys"); code != exitOK {
		t.Fatalf("backup: %d %s", code, errs)
	}
	m := readManifest(t, good)
	largest := m.Files[0]
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, "ledger/") && f.Size > largest.Size {
			largest = f
		}
	}
	var table string
	for _, f := range m.Files {
		if strings.HasSuffix(f.Path, ".sst") {
			table = f.Path
		}
	}
	other, err := n.Store.CheckpointAt(t.Context(), m.Size-1)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(n.Keys.Verifiers[0])
	if err != nil {
		t.Fatal(err)
	}
	nodeKey := fmt.Sprintf("keys/%08x.key", v.KeyHash()) // node/keys.go's name

	tests := []struct {
		name       string
		damage     func(t *testing.T, dir string)
		code       int
		kind, file string
	}{
		{"good", func(*testing.T, string) {}, exitOK, "", ""},
		{"a flipped byte", func(t *testing.T, dir string) {
			p := filepath.Join(dir, largest.Path)
			b := readFile(t, p)
			b[len(b)/2] ^= 1
			writeFile(t, p, b)
		}, exitRefused, backup.KindFileHashMismatch, largest.Path},
		{"a missing file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, table)); err != nil {
				t.Fatal(err)
			}
		}, exitRefused, backup.KindFileMissing, table},
		{"an extra file", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "ledger", "999999.sst"), []byte("extra"))
		}, exitRefused, backup.KindFileUnexpected, "ledger/999999.sst"},
		{"no manifest", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, backup.ManifestFile)); err != nil {
				t.Fatal(err)
			}
		}, exitRefused, backup.KindManifestMissing, backup.ManifestFile},
		{"a wrong checkpoint", func(t *testing.T, dir string) {
			wrongCheckpoint(t, dir, other.Note)
		}, exitRefused, backup.KindManifestSignature, backup.ManifestSigFile},
		{"a wrong checkpoint, unsigned", func(t *testing.T, dir string) {
			wrongCheckpoint(t, dir, other.Note)
			unsign(t, dir)
		}, exitRefused, backup.KindCheckpointMismatch, backup.CheckpointFile},
		{"a private key swapped, unsigned", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, filepath.FromSlash(nodeKey)), []byte(newPlantedKey(t, n.Store.Origin()).skey+"\n"))
			listInManifest(t, dir, nodeKey)
			unsign(t, dir)
		}, exitRefused, backup.KindKeyInvalid, nodeKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "backup")
			copyDir(t, good, dir)
			tc.damage(t, dir)
			code, out, errs := runCLI(t, "", "backup", "verify", dir, "--json")
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errs)
			}
			var rep backup.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if tc.kind == "" {
				if !rep.Verified || rep.Ledger == nil || rep.Ledger.Events != m.Size {
					t.Fatalf("report %+v", rep)
				}
				return
			}
			if len(rep.Faults) == 0 || rep.Faults[0].Kind != tc.kind || rep.Faults[0].File != tc.file || !strings.Contains(errs, tc.kind) {
				t.Fatalf("faults %+v, want %s in %s first; stderr %q", rep.Faults, tc.kind, tc.file, errs)
			}
		})
	}
}

// TestRestore_Refusals: a restore into a folder that holds something
// exits 2 and changes nothing; a backup that does not match its manifest
// exits 1 and restores nothing; a backup taken by a role that may not
// exits 1 (403 forbidden).
func TestRestore_Refusals(t *testing.T) {
	tokens, err := api.NewTokens([]api.Token{
		{Name: "w", Role: api.RoleWriter, Token: "writer-token-0123456789"},
		{Name: "o", Role: api.RoleOperator, Token: "operator-token-0123456789"},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeWith(t, node.Config{DataDir: t.TempDir(), API: api.Config{Addr: "127.0.0.1:0", Tokens: tokens}})

	dir := filepath.Join(t.TempDir(), "backup")
	code, _, errs := runCLI(t, "", "backup", "--server="+n.URL(), "--token", "writer-token-0123456789", "--out", dir)
	if code != exitRefused || !strings.Contains(errs, "forbidden") || exists(dir) {
		t.Fatalf("backup with a writer token: exit %d %q", code, errs)
	}
	if code, _, errs = runCLI(t, "", "backup", "--server="+n.URL(), "--token", "operator-token-0123456789", "--out", dir); code != exitOK {
		t.Fatalf("backup with an operator token: exit %d %q", code, errs)
	}

	busy := t.TempDir()
	writeFile(t, filepath.Join(busy, "keep"), []byte("x"))
	code, _, errs = runCLI(t, "", "restore", "--from", dir, "--data", busy)
	if code != exitCannot || !strings.Contains(errs, "not empty") || string(readFile(t, filepath.Join(busy, "keep"))) != "x" {
		t.Fatalf("restore into a folder that is not empty: exit %d %q", code, errs)
	}
	damaged := filepath.Join(t.TempDir(), "damaged")
	copyDir(t, dir, damaged)
	writeFile(t, filepath.Join(damaged, backup.CheckpointFile), []byte("changed"))
	data := filepath.Join(t.TempDir(), "restored")
	code, _, errs = runCLI(t, "", "restore", "--from", damaged, "--data", data)
	if code != exitRefused || !strings.Contains(errs, backup.KindFileSizeMismatch) || exists(data) {
		t.Fatalf("restore of a damaged backup: exit %d %q", code, errs)
	}
}

// wrongCheckpoint puts note in place of the backup's checkpoint, and in
// the manifest.
func wrongCheckpoint(t *testing.T, dir string, note []byte) {
	t.Helper()
	writeFile(t, filepath.Join(dir, backup.CheckpointFile), note)
	m := readManifest(t, dir)
	m.Checkpoint = string(note)
	for i, f := range m.Files {
		if f.Path == backup.CheckpointFile {
			sum := sha256.Sum256(note)
			m.Files[i].Size, m.Files[i].SHA256 = int64(len(note)), hex.EncodeToString(sum[:])
		}
	}
	writeManifest(t, dir, m)
}

// unsign makes a backup one of format 1, before backups were signed: what
// a forger does to be rid of the signature.
func unsign(t *testing.T, dir string) {
	t.Helper()
	m := readManifest(t, dir)
	m.Format = backup.FormatUnsigned
	writeManifest(t, dir, m)
	if err := os.Remove(filepath.Join(dir, backup.ManifestSigFile)); err != nil {
		t.Fatal(err)
	}
}

func readManifest(t *testing.T, dir string) backup.Manifest {
	t.Helper()
	var m backup.Manifest
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, backup.ManifestFile)), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// copyDir copies the regular files of src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(filepath.Join(dst, rel))
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}
