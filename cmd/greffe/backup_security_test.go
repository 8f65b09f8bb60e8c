package main

import (
	"archive/tar"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/backup"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// Backups trust themselves (issue #20, finding 12): the attacks are made
// the way a backup holder would make them, on a real backup folder taken
// through the CLI from a real node, and checked through the CLI.

// plantedKey is a checkpoint signing key an attacker made for a ledger's
// origin: valid, named like the node's, never used by the node.
type plantedKey struct {
	signer   note.Signer
	skey     string
	vkey     string
	verifier note.Verifier
	hash     string // the file name's 8 hex digits, as node/keys.go names them
}

func newPlantedKey(t *testing.T, origin string) plantedKey {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return plantedKey{signer: s, skey: skey, vkey: vkey, verifier: v, hash: fmt.Sprintf("%08x", v.KeyHash())}
}

// writeManifest writes m as backup.json, as the node writes it.
func writeManifest(t *testing.T, dir string, m backup.Manifest) {
	t.Helper()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, backup.ManifestFile), append(b, '\n'))
}

// listInManifest adds (or updates) the manifest entry of a file of dir with
// its size and SHA-256: what a forger does after changing a file.
func listInManifest(t *testing.T, dir, path string) {
	t.Helper()
	m := readManifest(t, dir)
	b := readFile(t, filepath.Join(dir, filepath.FromSlash(path)))
	sum := sha256.Sum256(b)
	f := backup.File{Path: path, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
	found := false
	for i := range m.Files {
		if m.Files[i].Path == path {
			m.Files[i], found = f, true
		}
	}
	if !found {
		m.Files = append(m.Files, f)
		sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	}
	writeManifest(t, dir, m)
}

// plant writes a planted key pair into dir's keys/ folder and lists both
// files in the manifest.
func plant(t *testing.T, dir string, k plantedKey) {
	t.Helper()
	mkdirAll(t, filepath.Join(dir, backup.KeysDir))
	for ext, text := range map[string]string{".key": k.skey, ".pub": k.vkey} {
		writeFile(t, filepath.Join(dir, backup.KeysDir, k.hash+ext), []byte(text+"\n"))
		listInManifest(t, dir, backup.KeysDir+"/"+k.hash+ext)
	}
}

func mkdirAll(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

// resign replaces the manifest's signature with one by k over the
// manifest as it now is.
func resign(t *testing.T, dir string, k plantedKey) {
	t.Helper()
	m := readManifest(t, dir)
	sum := sha256.Sum256(readFile(t, filepath.Join(dir, backup.ManifestFile)))
	text := fmt.Sprintf("%s manifest\n%s\n%s\n", backup.Format, m.Origin, hex.EncodeToString(sum[:]))
	msg, err := note.Sign(&note.Note{Text: text}, k.signer)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, backup.ManifestSigFile), msg)
}

func appendSome(t *testing.T, url string, count int) {
	t.Helper()
	c := client.New(url, "")
	for i := 0; i < count; i += 100 {
		evs := make([]wire.EventIn, min(100, count-i))
		for j := range evs {
			evs[j] = wire.EventIn{Type: "T", Data: fmt.Appendf(nil, `{"i":%d}`, i+j)}
		}
		if _, err := c.Append(t.Context(), fmt.Sprintf("s-%d", i%3), events.ExpectAny, evs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackupVerify_ForgedBackupRefused: a backup edited after it was taken
// (the manifest changed, a file swapped and the manifest updated to match,
// a planted signing key listed in the manifest, the same re-signed with
// the planted key) fails `backup verify` with the node's verifier key
// given from outside, and without it (trust on first use: the keys the
// ledger committed to), naming manifest_signature_invalid; `restore`
// refuses it and writes nothing. Before the fix the manifest was unsigned:
// every forgery verified (exit 0) and restored.
func TestBackupVerify_ForgedBackupRefused(t *testing.T) {
	n := startNode(t)
	appendSome(t, n.URL(), 300)
	good := filepath.Join(t.TempDir(), "backup")
	if code, _, errs := runCLI(t, "", "backup", "--server="+n.URL(), "--out", good); code != exitOK {
		t.Fatalf("backup: %d %s", code, errs)
	}
	real := n.Keys.Verifiers[0]
	evil := newPlantedKey(t, n.Store.Origin())
	m := readManifest(t, good)
	var options string
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, "ledger/OPTIONS-") {
			options = f.Path
		}
	}
	if options == "" {
		t.Fatalf("no OPTIONS file in %v", m.Files)
	}

	tests := []struct {
		name  string
		forge func(t *testing.T, dir string)
	}{
		{"manifest edited", func(t *testing.T, dir string) {
			m := readManifest(t, dir)
			m.NodeID = "someone-else"
			writeManifest(t, dir, m)
		}},
		{"a file swapped", func(t *testing.T, dir string) {
			p := filepath.Join(dir, filepath.FromSlash(options))
			writeFile(t, p, append(readFile(t, p), "; swapped\n"...))
			listInManifest(t, dir, options)
		}},
		{"a planted key", func(t *testing.T, dir string) { plant(t, dir, evil) }},
		{"a planted key, the manifest re-signed with it", func(t *testing.T, dir string) {
			plant(t, dir, evil)
			resign(t, dir, evil)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "backup")
			copyDir(t, good, dir)
			tc.forge(t, dir)
			for _, trust := range [][]string{{"--verifier", real}, nil} {
				args := append([]string{"backup", "verify", dir, "--json"}, trust...)
				code, out, errs := runCLI(t, "", args...)
				var rep backup.Report
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatalf("%v: %v\n%s%s", args, err, out, errs)
				}
				if code != exitRefused || rep.Verified || len(rep.Faults) == 0 || rep.Faults[0].Kind != backup.KindManifestSignature ||
					rep.Faults[0].File != backup.ManifestSigFile || !strings.Contains(errs, backup.KindManifestSignature) {
					t.Fatalf("%v: exit %d, faults %+v\n%s", args, code, rep.Faults, errs)
				}
				data := filepath.Join(t.TempDir(), "restored")
				args = append([]string{"restore", "--from", dir, "--data", data}, trust...)
				code, _, errs = runCLI(t, "", args...)
				if code != exitRefused || !strings.Contains(errs, backup.KindManifestSignature) || exists(data) || exists(data+".restoring") {
					t.Fatalf("%v: exit %d %q", args, code, errs)
				}
			}
		})
	}

	// The backup as taken verifies both ways; without a key given, verify
	// says loudly that it trusted on first use, and which key.
	code, out, errs := runCLI(t, "", "backup", "verify", good, "--verifier", real, "--json")
	var rep backup.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK || !rep.Verified || !rep.Signed ||
		rep.Trust.Mode != backup.TrustGiven || strings.Contains(errs, "trust on first use") {
		t.Fatalf("verify --verifier: exit %d %+v %v %q", code, rep, err, errs)
	}
	code, out, errs = runCLI(t, "", "backup", "verify", good)
	if code != exitOK || !strings.Contains(out, "VERIFIED") || !strings.Contains(errs, "trust on first use") || !strings.Contains(errs, real) {
		t.Fatalf("verify on first use: exit %d\n%s%s", code, out, errs)
	}
}

// TestRestore_PlantedKeyNotPublished: a signing key planted in the node's
// own key folder before the backup (so that the node's signed manifest
// lists it) is not one the ledger committed to: `restore` leaves it out and
// says so, and the restored node neither publishes it (/v1/info) nor signs
// with it, while it keeps the node's own key. Before the fix the restored
// node published the planted key and signed its checkpoints with it.
func TestRestore_PlantedKeyNotPublished(t *testing.T) {
	data := t.TempDir()
	n := startNodeIn(t, data)
	appendSome(t, n.URL(), 200)
	evil := newPlantedKey(t, n.Store.Origin())
	for ext, text := range map[string]string{".key": evil.skey, ".pub": evil.vkey} {
		writeFile(t, filepath.Join(data, "keys", evil.hash+ext), []byte(text+"\n"))
	}
	dir := filepath.Join(t.TempDir(), "backup")
	if code, _, errs := runCLI(t, "", "backup", "--server="+n.URL(), "--out", dir, "--include-private-keys"); code != exitOK {
		t.Fatalf("backup: %d %s", code, errs)
	}
	if !exists(filepath.Join(dir, "keys", evil.hash+".key")) {
		t.Fatal("the planted key is not in the backup: the test plants nothing")
	}
	restored := filepath.Join(t.TempDir(), "restored")
	code, out, errs := runCLI(t, "", "restore", "--from", dir, "--data", restored, "--json")
	if code != exitOK {
		t.Fatalf("restore: exit %d %s", code, errs)
	}
	var res backup.RestoreResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	dropped := false
	for _, d := range res.Dropped {
		dropped = dropped || strings.Contains(d.Path, evil.hash)
	}
	if !dropped || !strings.Contains(errs, evil.hash) {
		t.Fatalf("restore does not say it left the planted key out: %+v %q", res.Dropped, errs)
	}

	r := startNodeIn(t, restored)
	info, err := client.New(r.URL(), "").Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range info.VerifierKeys {
		if k == evil.vkey {
			t.Fatalf("the restored node publishes the planted key: %v", info.VerifierKeys)
		}
	}
	if fmt.Sprint(info.VerifierKeys) != fmt.Sprint(n.Keys.Verifiers[:1]) {
		t.Fatalf("the restored node publishes %v, the original %v", info.VerifierKeys, n.Keys.Verifiers[:1])
	}
	appendSome(t, r.URL(), 10)
	cp, err := r.Store.LatestCheckpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var unverified *note.UnverifiedNoteError
	if _, err := note.Open(cp.Note, note.VerifierList(evil.verifier)); !errors.As(err, &unverified) {
		t.Fatalf("the restored node's checkpoint and the planted key: %v\n%s", err, cp.Note)
	}
	realV, err := note.NewVerifier(n.Keys.Verifiers[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(cp.Note, note.VerifierList(realV)); err != nil {
		t.Fatalf("the restored node does not sign with the node's key: %v", err)
	}
}

// TestBackup_PrivateKeysAdminOnly: private keys leave the node only on an
// admin's explicit request. An operator's backup holds the verifier keys
// and no private key, and asking for them is refused (403
// backup_keys_admin_only, nothing written); an admin's backup holds none
// either unless asked with --include-private-keys. Before the fix the
// operator role downloaded the private keys by default.
func TestBackup_PrivateKeysAdminOnly(t *testing.T) {
	tokens, err := api.NewTokens([]api.Token{
		{Name: "o", Role: api.RoleOperator, Token: "operator-token-0123456789"},
		{Name: "a", Role: api.RoleAdmin, Token: "admin-token-0123456789"},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeWith(t, node.Config{DataDir: t.TempDir(), API: api.Config{Addr: "127.0.0.1:0", Tokens: tokens}})

	tests := []struct {
		name, token string
		include     bool
		code        int
		private     bool
	}{
		{"operator", "operator-token-0123456789", false, exitOK, false},
		{"operator asking for the private keys", "operator-token-0123456789", true, exitRefused, false},
		{"admin", "admin-token-0123456789", false, exitOK, false},
		{"admin asking for the private keys", "admin-token-0123456789", true, exitOK, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "backup")
			args := []string{"backup", "--server=" + n.URL(), "--token", tc.token, "--out", dir, "--json"}
			if tc.include {
				args = append(args, "--include-private-keys")
			}
			code, out, errs := runCLI(t, "", args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errs)
			}
			if tc.code != exitOK {
				if !strings.Contains(errs, wire.CodeBackupKeysAdminOnly) || exists(dir) || exists(dir+".partial") {
					t.Fatalf("refusal %q, folder left: %t", errs, exists(dir))
				}
				return
			}
			var sum backupSummary
			if err := json.Unmarshal([]byte(out), &sum); err != nil {
				t.Fatal(err)
			}
			pub, _ := filepath.Glob(filepath.Join(dir, "keys", "*.pub"))
			priv, _ := filepath.Glob(filepath.Join(dir, "keys", "*.key"))
			if sum.Keys != tc.private || (len(priv) > 0) != tc.private || len(pub) != 1 {
				t.Fatalf("summary keys %t, private key files %v, verifier files %v; want private %t", sum.Keys, priv, pub, tc.private)
			}
		})
	}
}

// TestBackup_NonRegularFilesRefused: a symlink (to a file outside the
// backup, or a folder), or a FIFO in a backup folder is refused by `backup
// verify` and `restore` (file_not_regular, naming it; nothing restored).
// Before the fix the symlinked file verified and was restored (its target's
// bytes copied in), and the FIFO hung verify forever.
func TestBackup_NonRegularFilesRefused(t *testing.T) {
	n := startNode(t)
	appendSome(t, n.URL(), 100)
	good := filepath.Join(t.TempDir(), "backup")
	if code, _, errs := runCLI(t, "", "backup", "--server="+n.URL(), "--out", good); code != exitOK {
		t.Fatalf("backup: %d %s", code, errs)
	}
	pubs, _ := filepath.Glob(filepath.Join(good, "keys", "*.pub"))
	if len(pubs) != 1 {
		t.Fatalf("verifier files %v", pubs)
	}
	pub := "keys/" + filepath.Base(pubs[0])
	outside := t.TempDir()
	moveOut := func(t *testing.T, dir, name string) string {
		dst := filepath.Join(outside, strings.ReplaceAll(name, "/", "_")+fmt.Sprint(time.Now().UnixNano()))
		if err := os.Rename(filepath.Join(dir, filepath.FromSlash(name)), dst); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	tests := []struct {
		name, file string
		make       func(t *testing.T, dir string)
	}{
		{"a symlink to a file outside", backup.CheckpointFile, func(t *testing.T, dir string) {
			if err := os.Symlink(moveOut(t, dir, backup.CheckpointFile), filepath.Join(dir, backup.CheckpointFile)); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symlinked folder", backup.KeysDir, func(t *testing.T, dir string) {
			if err := os.Symlink(moveOut(t, dir, backup.KeysDir), filepath.Join(dir, backup.KeysDir)); err != nil {
				t.Fatal(err)
			}
		}},
		{"a FIFO", pub, func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(pub))); err != nil {
				t.Fatal(err)
			}
			mkfifo(t, filepath.Join(dir, filepath.FromSlash(pub)))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "backup")
			copyDir(t, good, dir)
			tc.make(t, dir)
			code, out, errs := runCLI(t, "", "backup", "verify", dir, "--json")
			var rep backup.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s%s", err, out, errs)
			}
			found := false
			for _, f := range rep.Faults {
				found = found || f.Kind == backup.KindFileNotRegular && f.File == tc.file
			}
			if code != exitRefused || !found {
				t.Fatalf("verify: exit %d, faults %+v, want %s in %s", code, rep.Faults, backup.KindFileNotRegular, tc.file)
			}
			data := filepath.Join(t.TempDir(), "restored")
			code, _, errs = runCLI(t, "", "restore", "--from", dir, "--data", data)
			if code != exitRefused || !strings.Contains(errs, backup.KindFileNotRegular) || exists(data) || exists(data+".restoring") {
				t.Fatalf("restore: exit %d %q", code, errs)
			}
		})
	}
}

// TestBackup_StalledDownloadCut: `greffe backup` against a node that stops
// sending (before its headers, or in the middle of a file) gives up once
// nothing arrived for --stall-timeout, and one that trickles bytes is cut
// at --timeout: exit 2, nothing left behind, well within a deadline.
// Before the fix the command waited forever.
func TestBackup_StalledDownloadCut(t *testing.T) {
	// A lying node: a tar entry announced with 1 MiB, 4 KiB of it, then
	// (as asked) nothing, or a byte every 50 ms.
	head := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/x-tar")
		w.WriteHeader(http.StatusOK)
		tw := tar.NewWriter(w)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "ledger/000001.sst", Mode: 0o600, Size: 1 << 20}); err != nil {
			panic(err)
		}
		_, _ = w.Write(make([]byte, 4096))
		w.(http.Flusher).Flush()
	}
	lying := map[string]http.HandlerFunc{
		"before the headers": func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
		"mid-file": func(w http.ResponseWriter, r *http.Request) {
			head(w)
			<-r.Context().Done()
		},
		"a trickle": func(w http.ResponseWriter, r *http.Request) {
			head(w)
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
					if _, err := w.Write([]byte{0}); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
			}
		},
	}
	tests := []struct {
		name  string
		flags []string
		want  string
	}{
		{"before the headers", []string{"--stall-timeout", "1s"}, "nothing arrived"},
		{"mid-file", []string{"--stall-timeout", "1s"}, "nothing arrived"},
		{"a trickle", []string{"--stall-timeout", "1s", "--timeout", "2s"}, "2s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(lying[tc.name])
			defer srv.Close()
			dir := filepath.Join(t.TempDir(), "backup")
			type result struct {
				code int
				errs string
			}
			got := make(chan result, 1)
			start := time.Now()
			go func() {
				code, _, errs := runCLI(t, "", append([]string{"backup", "--server=" + srv.URL, "--out", dir}, tc.flags...)...)
				got <- result{code, errs}
			}()
			select {
			case r := <-got:
				if r.code != exitCannot || !strings.Contains(r.errs, tc.want) || exists(dir) || exists(dir+".partial") {
					t.Fatalf("exit %d %q; folder left %t", r.code, r.errs, exists(dir) || exists(dir+".partial"))
				}
				t.Logf("cut after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.errs))
			case <-time.After(20 * time.Second):
				t.Fatal("greffe backup did not give up within 20 s")
			}
		})
	}
}

// TestRestore_UnsignedBackup: a backup of format 1 (before backups were
// signed; a forger can make any backup one by removing the signature) is
// still verified, and reported unsigned. `restore` refuses it
// (manifest_unsigned) unless --allow-unsigned, and then still restores
// only the keys the ledger committed to: a planted key listed in the
// unsigned manifest is left out, not published, and verify warns of it.
func TestRestore_UnsignedBackup(t *testing.T) {
	n := startNode(t)
	appendSome(t, n.URL(), 200)
	good := filepath.Join(t.TempDir(), "backup")
	if code, _, errs := runCLI(t, "", "backup", "--server="+n.URL(), "--out", good, "--include-private-keys"); code != exitOK {
		t.Fatalf("backup: %d %s", code, errs)
	}
	evil := newPlantedKey(t, n.Store.Origin())
	tests := []struct {
		name    string
		planted bool
	}{{"unsigned", false}, {"unsigned, with a planted key", true}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "backup")
			copyDir(t, good, dir)
			if tc.planted {
				plant(t, dir, evil)
			}
			unsign(t, dir)
			code, out, errs := runCLI(t, "", "backup", "verify", dir, "--json", "--verifier", n.Keys.Verifiers[0])
			var rep backup.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK || !rep.Verified || rep.Signed || !strings.Contains(errs, "unsigned manifest") {
				t.Fatalf("verify: exit %d %+v %v %q", code, rep, err, errs)
			}
			if tc.planted && !strings.Contains(errs, evil.hash) {
				t.Fatalf("verify does not warn of the planted key: %q", errs)
			}
			data := filepath.Join(t.TempDir(), "restored")
			code, _, errs = runCLI(t, "", "restore", "--from", dir, "--data", data)
			if code != exitRefused || !strings.Contains(errs, backup.KindManifestUnsigned) || exists(data) {
				t.Fatalf("restore without --allow-unsigned: exit %d %q", code, errs)
			}
			code, out, errs = runCLI(t, "", "restore", "--from", dir, "--data", data, "--allow-unsigned", "--json")
			var res backup.RestoreResult
			if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitOK || res.Signed || !res.Signing {
				t.Fatalf("restore --allow-unsigned: exit %d %+v %v %q", code, res, err, errs)
			}
			r := startNodeIn(t, data)
			info, err := client.New(r.URL(), "").Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(info.VerifierKeys) != fmt.Sprint(n.Keys.Verifiers) {
				t.Fatalf("the restored node publishes %v, the original %v (planted %s)", info.VerifierKeys, n.Keys.Verifiers, evil.hash)
			}
		})
	}
}
