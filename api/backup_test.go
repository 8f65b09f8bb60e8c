package api_test

import (
	"crypto/rand"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/backup"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

var backupTokens = []api.Token{
	{Name: "reader", Role: api.RoleReader, Token: "reader-token-0123456789"},
	{Name: "writer", Role: api.RoleWriter, Token: "writer-token-0123456789"},
	{Name: "executor", Role: api.RoleExecutor, Token: "executor-token-0123456789"},
	{Name: "operator", Role: api.RoleOperator, Token: "operator-token-0123456789"},
	{Name: "admin", Role: api.RoleAdmin, Token: "admin-token-0123456789"},
}

// backupNode is a real store behind a real server with GET /v1/backup
// mounted; keys is the folder streamed as its key folder.
func backupNode(t *testing.T, keys string) (*pebblelog.Store, string) {
	t.Helper()
	tokens, err := api.NewTokens(backupTokens)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), LedgerID: "api-backup", CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	skey, _, _ := note.GenerateKey(rand.Reader, s.Origin())
	signer, _ := note.NewSigner(skey)
	if err := s.SetSigners([]note.Signer{signer}); err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Tokens: tokens, NodeID: "n7"}, s)
	if err != nil {
		t.Fatal(err)
	}
	srv.MountBackup(s, keys)
	url := serve(t, srv, s.Close)
	if _, err := client.New(url, "writer-token-0123456789").Append(t.Context(), "b", events.ExpectAny, []client.EventIn{{Type: "A"}, {Type: "B"}}); err != nil {
		t.Fatal(err)
	}
	return s, url
}

// TestAPI_BackupRoles: GET /v1/backup needs the operator or admin role;
// the others are refused with 403 forbidden, a missing token with 401, a
// bad ?keys with 400 invalid_query. An admitted caller gets the stream,
// announced by its headers, which Receive turns into a backup folder.
func TestAPI_BackupRoles(t *testing.T) {
	keys := t.TempDir()
	if err := os.WriteFile(filepath.Join(keys, "0000abcd.pub"), []byte("not a real key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, url := backupNode(t, keys)
	tests := []struct {
		name, token, query string
		status             int
		code               string
	}{
		{"no token", "", "", 401, "unauthorized"},
		{"reader", "reader-token-0123456789", "", 403, "forbidden"},
		{"writer", "writer-token-0123456789", "", 403, "forbidden"},
		{"executor", "executor-token-0123456789", "", 403, "forbidden"},
		{"bad keys query", "operator-token-0123456789", "?keys=maybe", 400, "invalid_query"},
		{"operator", "operator-token-0123456789", "", 200, ""},
		{"admin without keys", "admin-token-0123456789", "?keys=false", 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.New(url, tc.token).Stream(t.Context(), backup.Route+tc.query)
			if tc.status != http.StatusOK {
				if code := client.CodeOf(err); code != tc.code || err.(*client.Error).Status != tc.status {
					t.Fatalf("got %v, want %d %s", err, tc.status, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := resp.Header.Get(backup.HeaderSize); got != "2" {
				t.Errorf("%s: %q, want 2", backup.HeaderSize, got)
			}
			m, err := backup.Receive(t.Context(), resp.Body, filepath.Join(t.TempDir(), "bk"), backup.ReceiveConfig{})
			if err != nil {
				t.Fatal(err)
			}
			withKeys := tc.query == ""
			if m.Size != s.Head().Size || m.NodeID != "n7" || m.LedgerID != "api-backup" || m.Keys != withKeys {
				t.Fatalf("manifest %+v", m)
			}
			hasKey := false
			for _, f := range m.Files {
				hasKey = hasKey || f.Path == "keys/0000abcd.pub"
			}
			if hasKey != withKeys {
				t.Fatalf("key file in the backup: %t, want %t", hasKey, withKeys)
			}
		})
	}
}

// TestAPI_BackupOneAtATime: while one backup streams, a second is refused
// with 409 backup_in_progress. The first is held mid-stream by a reader
// that does not read: its key folder holds a 64 MiB (sparse) file, more
// than loopback's socket buffers.
func TestAPI_BackupOneAtATime(t *testing.T) {
	keys := t.TempDir()
	f, err := os.Create(filepath.Join(keys, "big.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, url := backupNode(t, keys)
	c := client.New(url, "operator-token-0123456789")
	first, err := c.Stream(t.Context(), backup.Route)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	_, err = c.Stream(t.Context(), backup.Route)
	if code := client.CodeOf(err); code != api.CodeBackupInProgress || err.(*client.Error).Status != http.StatusConflict {
		t.Fatalf("a second backup while one streams: %v", err)
	}
}
