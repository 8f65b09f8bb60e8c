package api_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/backup"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

var backupTokens = []api.Token{
	{Name: "reader", Role: api.RoleReader, Token: "reader-token-0123456789"},
	{Name: "writer", Role: api.RoleWriter, Token: "writer-token-0123456789"},
	{Name: "executor", Role: api.RoleExecutor, Token: "executor-token-0123456789"},
	{Name: "operator", Role: api.RoleOperator, Token: "operator-token-0123456789"},
	{Name: "admin", Role: api.RoleAdmin, Token: "admin-token-0123456789"},
}

// backupNode is a real store behind a real server with GET /v1/backup
// mounted; keys is the folder streamed as its key folder. opts adjust the
// server's and the route's configurations.
func backupNode(t *testing.T, keys string, opts ...func(*api.Config, *api.BackupConfig)) (*pebblelog.Store, string) {
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
	cfg := api.Config{Addr: "127.0.0.1:0", Tokens: tokens, NodeID: "n7"}
	var bc api.BackupConfig
	for _, o := range opts {
		o(&cfg, &bc)
	}
	srv, err := api.New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	srv.MountBackup(&backup.Taker{Ledger: s, KeysDir: keys, Signers: []note.Signer{signer}, NodeID: cfg.NodeID}, bc)
	url := serve(t, srv, s.Close)
	if _, err := client.New(url, "writer-token-0123456789").Append(t.Context(), "b", events.ExpectAny, []wire.EventIn{{Type: "A"}, {Type: "B"}}); err != nil {
		t.Fatal(err)
	}
	return s, url
}

// TestAPI_BackupRoles: GET /v1/backup needs the operator or admin role;
// the others are refused with 403 forbidden, a missing token with 401, a
// bad ?keys or ?include_keys with 400 invalid_query. The private keys
// leave only on an admin's explicit request (?include_keys=true, or the
// former ?keys=true): an operator asking is refused with 403
// backup_keys_admin_only. An admitted caller gets the stream, announced by
// its headers, which Receive turns into a backup folder whose manifest is
// signed and holds the verifier keys, and the private keys only when an
// admin asked. Before issue #20 the operator got the private keys by
// default.
func TestAPI_BackupRoles(t *testing.T) {
	keys := t.TempDir()
	for name, text := range map[string]string{"0000abcd.pub": "not a real key\n", "0000abcd.key": "not a real private key\n"} {
		if err := os.WriteFile(filepath.Join(keys, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, url := backupNode(t, keys)
	const operator, admin = "operator-token-0123456789", "admin-token-0123456789"
	tests := []struct {
		name, token, query string
		status             int
		code               string
		private            bool
	}{
		{"no token", "", "", 401, "unauthorized", false},
		{"reader", "reader-token-0123456789", "", 403, "forbidden", false},
		{"writer", "writer-token-0123456789", "", 403, "forbidden", false},
		{"executor", "executor-token-0123456789", "", 403, "forbidden", false},
		{"bad keys query", operator, "?keys=maybe", 400, "invalid_query", false},
		{"bad include_keys query", admin, "?include_keys=maybe", 400, "invalid_query", false},
		{"operator asking for the private keys", operator, "?include_keys=true", 403, wire.CodeBackupKeysAdminOnly, false},
		{"operator asking the former way", operator, "?keys=true", 403, wire.CodeBackupKeysAdminOnly, false},
		{"operator", operator, "", 200, "", false},
		{"operator, the former keys=false", operator, "?keys=false", 200, "", false},
		{"admin", admin, "", 200, "", false},
		{"admin asking for the private keys", admin, "?include_keys=true", 200, "", true},
		{"admin asking the former way", admin, "?keys=true", 200, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.New(url, tc.token).Stream(t.Context(), wire.BackupRoute+tc.query)
			if tc.status != http.StatusOK {
				if code := client.CodeOf(err); code != tc.code || err.(*wire.Error).Status != tc.status {
					t.Fatalf("got %v, want %d %s", err, tc.status, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := resp.Header.Get(wire.HeaderBackupSize); got != "2" {
				t.Errorf("%s: %q, want 2", wire.HeaderBackupSize, got)
			}
			dir := filepath.Join(t.TempDir(), "bk")
			m, err := backup.Receive(t.Context(), resp.Body, dir, backup.ReceiveConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if m.Size != s.Head().Size || m.NodeID != "n7" || m.LedgerID != "api-backup" || m.Keys != tc.private || !m.Signed() {
				t.Fatalf("manifest %+v", m)
			}
			files := map[string]bool{}
			for _, f := range m.Files {
				files[f.Path] = true
			}
			if !files["keys/0000abcd.pub"] || files["keys/0000abcd.key"] != tc.private {
				t.Fatalf("key files in the backup %v; want the private one: %t", files, tc.private)
			}
			if _, err := os.Stat(filepath.Join(dir, backup.ManifestSigFile)); err != nil {
				t.Fatalf("no signature: %v", err)
			}
		})
	}
}

// TestAPI_BackupOneAtATime: while one backup streams, a second is refused
// with 409 backup_in_progress. The first is held mid-stream by a reader
// that does not read: its key folder holds a 64 MiB (sparse) private key
// file, more than loopback's socket buffers, asked for by an admin.
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
	c := client.New(url, "admin-token-0123456789")
	first, err := c.Stream(t.Context(), wire.BackupRoute+"?include_keys=true")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	_, err = c.Stream(t.Context(), wire.BackupRoute)
	if code := client.CodeOf(err); code != wire.CodeBackupInProgress || err.(*wire.Error).Status != http.StatusConflict {
		t.Fatalf("a second backup while one streams: %v", err)
	}
}

// recordSink is a slog handler that hands each record to a channel (or
// drops it when the channel is full): a test waits on the log line an
// event writes.
type recordSink chan slog.Record

func (h recordSink) Enabled(context.Context, slog.Level) bool { return true }
func (h recordSink) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Clone():
	default:
	}
	return nil
}
func (h recordSink) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordSink) WithGroup(string) slog.Handler      { return h }

// waitAborted waits for the node's log line of a backup stream cut, and
// returns its reason.
func waitAborted(t *testing.T, logs recordSink, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case r := <-logs:
			if !strings.HasPrefix(r.Message, "backup stream aborted") {
				continue
			}
			var reason string
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "reason" {
					reason = a.Value.String()
				}
				return true
			})
			return reason
		case <-deadline:
			t.Fatalf("no backup stream was cut within %s", within)
			return ""
		}
	}
}

// bigKeys returns a key folder holding a 64 MiB (sparse) verifier key file,
// streamed to every caller: more than loopback's socket buffers, so that a
// client that does not read blocks the stream.
func bigKeys(t *testing.T) string {
	t.Helper()
	keys := t.TempDir()
	f, err := os.Create(filepath.Join(keys, "big.pub"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestAPI_BackupStalledClientDropped: a client that asks for a backup and
// then stops reading (a raw connection that reads the headers and nothing
// more) is dropped once a write waited StallTimeout, and one that reads a
// trickle (4 KiB every 20 ms) once the stream ran MaxDuration: the node
// logs why, frees its one backup slot, and the next backup streams whole.
// Before issue #20 the stalled client held the slot for as long as it
// kept the connection open (409 backup_in_progress to everyone else).
func TestAPI_BackupStalledClientDropped(t *testing.T) {
	tests := []struct {
		name        string
		stall, max  time.Duration
		read        bool
		reason      string
		cutBy, upTo time.Duration
	}{
		{"a client that stops reading", 300 * time.Millisecond, time.Minute, false, "read nothing for 300ms", 0, 8 * time.Second},
		{"a client that reads a trickle", 10 * time.Second, 1500 * time.Millisecond, true, "not done after 1.5s", 1500 * time.Millisecond, 8 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := make(recordSink, 256)
			_, url := backupNode(t, bigKeys(t), func(c *api.Config, b *api.BackupConfig) {
				c.Logger = slog.New(logs)
				b.StallTimeout, b.MaxDuration = tc.stall, tc.max
			})
			conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer operator-token-0123456789\r\n\r\n", wire.BackupRoute, strings.TrimPrefix(url, "http://")); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("the backup was not served: %v %v", resp, err)
			}
			readerDone := make(chan struct{})
			if tc.read {
				go func() { // the trickle: as slow a reader as a client may be
					defer close(readerDone)
					tick := time.NewTicker(20 * time.Millisecond)
					defer tick.Stop()
					buf := make([]byte, 4096)
					for range tick.C {
						if _, err := io.ReadFull(resp.Body, buf); err != nil {
							return
						}
					}
				}()
			} else {
				close(readerDone)
			}
			c := client.New(url, "operator-token-0123456789")
			if _, err := c.Stream(t.Context(), wire.BackupRoute); client.CodeOf(err) != wire.CodeBackupInProgress {
				t.Fatalf("a second backup while the first streams: %v", err)
			}
			reason := waitAborted(t, logs, 10*time.Second)
			took := time.Since(start)
			if !strings.Contains(reason, tc.reason) || took < tc.cutBy || took > tc.upTo {
				t.Fatalf("cut after %s (want %s to %s), reason %q (want %q)", took, tc.cutBy, tc.upTo, reason, tc.reason)
			}
			conn.Close() // what the trickle had left in its buffers is not read
			<-readerDone
			second, err := c.Stream(t.Context(), wire.BackupRoute)
			if err != nil {
				t.Fatalf("a backup once the first was dropped: %v", err)
			}
			defer second.Body.Close()
			m, err := backup.Receive(t.Context(), second.Body, filepath.Join(t.TempDir(), "bk"), backup.ReceiveConfig{})
			if err != nil || m.Size != 2 {
				t.Fatalf("the next backup: %+v %v", m.Size, err)
			}
		})
	}
}
