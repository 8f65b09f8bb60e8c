package audit_test

import (
	"context"
	"encoding/json"
	"fmt"

	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/audit/online"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// serveStore serves a fixture's store (reopened) over HTTP on a loopback
// port, through wrap when given (a man in the middle).
func serveStore(t *testing.T, f *fixture, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	s := openFixture(t, f.dir, testLedger, f.signer)
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Verifiers: func() []string { return []string{f.vkey} }}, s)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close()
		_ = s.Close()
	})
	return hs.URL
}

func verifyServer(t *testing.T, url string, cfg audit.Config) *audit.Report {
	t.Helper()
	rep, err := online.VerifyServer(t.Context(), client.New(url, ""), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestVerifyServer_Clean(t *testing.T) {
	f := buildLog(t, 700, 100, 300)
	url := serveStore(t, f, nil)
	rep := verifyServer(t, url, audit.Config{IndexSample: -1})
	if !rep.Verified {
		t.Fatalf("clean log not verified: %v", rep.Faults)
	}
	if diff := cmp.Diff([]any{uint64(700), 7, 1}, []any{rep.Events, rep.Streams, rep.Checkpoints}); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// TestVerifyServer_Tampering: a node serving a tampered store is caught
// from the outside, at the right position.
func TestVerifyServer_Tampering(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, db *pebble.DB)
		wrap   func(http.Handler) http.Handler
		want   first
	}{
		{
			name: "one byte of an event's data changed",
			tamper: func(t *testing.T, db *pebble.DB) {
				set(t, db, layout.EventKey(57), flipData(get(t, db, layout.EventKey(57))))
			},
			want: first{Kind: audit.KindLeafHashMismatch, Position: 57},
		},
		{
			name: "an event deleted: the node reports its own corruption",
			tamper: func(t *testing.T, db *pebble.DB) {
				if err := db.Delete(layout.EventKey(300), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			},
			want: first{Kind: audit.KindServerCorrupt, Position: 256, End: 512},
		},
		{
			name: "a stream-index entry pointing to the wrong position",
			tamper: func(t *testing.T, db *pebble.DB) {
				// The run of the append at 200 (ten events) made to start
				// at 205: the node notices that the events there have other
				// versions and answers "corrupt" instead of serving them.
				e, err := events.Decode(get(t, db, layout.EventKey(200)))
				if err != nil {
					t.Fatal(err)
				}
				set(t, db, layout.StreamKey(e.Stream, e.Version), layout.StreamRun(205, 10))
			},
			want: first{Kind: audit.KindServerCorrupt, Position: 200},
		},
		{
			name: "a stream-index entry inside another run",
			tamper: func(t *testing.T, db *pebble.DB) {
				// An entry for the event at 203 alone, inside the run of
				// 200-209: reads from 204 on skip to the stream's next run,
				// which a node cannot tell from a real index.
				e, err := events.Decode(get(t, db, layout.EventKey(203)))
				if err != nil {
					t.Fatal(err)
				}
				set(t, db, layout.StreamKey(e.Stream, e.Version), u64(203))
			},
			want: first{Kind: audit.KindStreamIndexMismatch, Position: 204},
		},
		{
			name: "inclusion proofs altered in transit",
			wrap: alterJSON("/v1/proof/inclusion", func(b []byte) []byte {
				var out wire.InclusionOut
				_ = json.Unmarshal(b, &out)
				if len(out.Hashes) > 0 {
					out.Hashes[0][0] ^= 1
				}
				nb, _ := json.Marshal(out)
				return nb
			}),
			want: first{Kind: audit.KindProofInvalid, Position: 0},
		},
		{
			name: "a leaf tile altered in transit",
			wrap: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/tlog/tile/0/001" {
						next.ServeHTTP(w, r)
						return
					}
					rec := httptest.NewRecorder()
					next.ServeHTTP(rec, r)
					b := rec.Body.Bytes()
					b[32*10] ^= 1 // the leaf hash of position 256+10
					_, _ = w.Write(b)
				})
			},
			want: first{Kind: audit.KindLeafHashMismatch, Position: 266},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := buildLog(t, 700, 100, 300)
			if tc.tamper != nil {
				tamper(t, f.dir, func(db *pebble.DB) { tc.tamper(t, db) })
			}
			rep := verifyServer(t, serveStore(t, f, tc.wrap), audit.Config{IndexSample: -1})
			if diff := cmp.Diff(tc.want, firstOf(rep)); diff != "" {
				t.Errorf("first fault (-want +got):\n%s\nall: %v", diff, rep.Faults)
			}
			t.Logf("first of %d faults: %s", rep.FaultCount, rep.First)
		})
	}
}

// alterJSON rewrites the JSON answers of one route.
func alterJSON(path string, fn func([]byte) []byte) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != path {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rec.Code)
			_, _ = w.Write(fn(rec.Body.Bytes()))
		})
	}
}

// ledgerNode runs a real node for ledger testLedger in data, with the
// keys of keysFrom (another data folder) when given, so that two nodes
// share an identity: the setting of a fork.
func ledgerNode(t *testing.T, data, keysFrom string) *node.Node {
	t.Helper()
	if keysFrom != "" {
		if err := os.CopyFS(filepath.Join(data, "keys"), os.DirFS(filepath.Join(keysFrom, "keys"))); err != nil {
			t.Fatal(err)
		}
	}
	cfg := node.Config{DataDir: data, LedgerID: testLedger, API: api.Config{Addr: "127.0.0.1:0"}}
	cfg.Store.Clock = fixedClock
	cfg.Store.CheckpointInterval = -1
	n, err := node.Open(cfg)
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
	return n
}

// appendHTTP appends one event per call, with ids derived from seed and
// the position, so that two nodes fed the same calls store the same bytes.
func appendHTTP(t *testing.T, c *client.Client, seed string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		// Version 3: raw appends may not carry version-5 ids, the commands'.
		id := uuid.NewMD5(uuid.NameSpaceOID, fmt.Appendf(nil, "%s-%d", seed, i))
		if _, err := c.Append(t.Context(), fmt.Sprintf("s-%d", i%3), events.ExpectAny,
			[]wire.EventIn{{ID: id.String(), Type: "T", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVerifyServer_StateCatchesFork is the auditor's memory at work: a
// node whose history was rewritten from position 5 (same ledger, same
// signing key, a self-consistent and correctly signed tree) passes a
// verification without memory, and is caught by one with --state, with
// the first differing position and the evidence kept.
func TestVerifyServer_StateCatchesFork(t *testing.T) {
	dataA := t.TempDir()
	a := ledgerNode(t, dataA, "")
	ca := client.New(a.URL(), "")
	appendHTTP(t, ca, "orig", 0, 10)
	state := filepath.Join(t.TempDir(), "auditor.json")
	rep := verifyServer(t, a.URL(), audit.Config{StateFile: state})
	if !rep.Verified || rep.State == nil || !rep.State.Updated || rep.State.Current != 10 {
		t.Fatalf("first run: %+v %+v", rep.Faults, rep.State)
	}
	// The same node grows: consistent.
	appendHTTP(t, ca, "orig", 10, 12)
	rep = verifyServer(t, a.URL(), audit.Config{StateFile: state})
	if !rep.Verified || !rep.State.Consistent || rep.State.Current != 12 {
		t.Fatalf("second run: %+v %+v", rep.Faults, rep.State)
	}

	// The fork: the same first 5 events, then another history.
	b := ledgerNode(t, t.TempDir(), dataA)
	cb := client.New(b.URL(), "")
	appendHTTP(t, cb, "orig", 0, 5)
	appendHTTP(t, cb, "forged", 5, 20)
	if rep := verifyServer(t, b.URL(), audit.Config{}); !rep.Verified {
		t.Fatalf("without memory the forked log should verify (it is self-consistent): %v", rep.Faults)
	}
	rep = verifyServer(t, b.URL(), audit.Config{StateFile: state})
	if diff := cmp.Diff(first{Kind: audit.KindFork, Position: 5}, firstOf(rep)); diff != "" {
		t.Errorf("first fault (-want +got):\n%s\nall: %v", diff, rep.Faults)
	}
	if rep.State == nil || rep.State.Consistent || rep.State.Updated {
		t.Fatalf("state after the fork: %+v", rep.State)
	}
	// The evidence holds both checkpoints and the proof.
	raw, err := os.ReadFile(rep.State.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	var ev audit.Evidence
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.From != 12 || ev.To != 20 || ev.Consistent || !strings.Contains(ev.OldCheckpoint, "\n12\n") || !strings.Contains(ev.NewCheckpoint, "\n20\n") || len(ev.Proof) == 0 {
		t.Errorf("evidence: %+v", ev)
	}
	// The state still remembers the honest checkpoint.
	st, err := audit.ReadState(state)
	if err != nil || st.Size != 12 {
		t.Fatalf("state: %+v %v", st, err)
	}

	// A node that rolled its log back below the remembered size.
	c := ledgerNode(t, t.TempDir(), dataA)
	appendHTTP(t, client.New(c.URL(), ""), "orig", 0, 8)
	rep = verifyServer(t, c.URL(), audit.Config{StateFile: state})
	if diff := cmp.Diff(first{Kind: audit.KindRollback, Position: 8, End: 12}, firstOf(rep)); diff != "" {
		t.Errorf("rollback (-want +got):\n%s\nall: %v", diff, rep.Faults)
	}
}

// TestVerifyServer_Refusals: what is not a fault of the ledger cannot be
// verified (exit code 2): verifiers of another ledger, no verifier key.
func TestVerifyServer_Refusals(t *testing.T) {
	f := buildLog(t, 10)
	url := serveStore(t, f, nil)
	_, other, _ := newKey(t, "greffe/another-ledger")
	_, err := online.VerifyServer(t.Context(), client.New(url, ""), audit.Config{Verifiers: []note.Verifier{other}})
	if err == nil || !strings.Contains(err.Error(), "another-ledger") {
		t.Errorf("verifier of another ledger: %v", err)
	}
	_, err = online.VerifyServer(t.Context(), client.New("http://127.0.0.1:1", ""), audit.Config{})
	if err == nil {
		t.Error("unreachable node verified")
	}
}
