package witness_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/witness"
)

const testLedger = "00000000-0000-4000-8000-0000000000d1"

var testOrigin = events.Origin(testLedger)

// logKey is a checkpoint signing key of the test ledger.
type logKey struct {
	signer   note.Signer
	verifier note.Verifier
	vkey     string
}

func newLogKey(t testing.TB, origin string) logKey {
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
	return logKey{s, v, vkey}
}

// openLog opens a real store of the test ledger signed by k; checkpoints
// are signed on demand only (the collector asks for them).
func openLog(t testing.TB, k logKey) *pebblelog.Store {
	t.Helper()
	s, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(t.TempDir(), "ledger"), LedgerID: testLedger,
		Signers: []note.Signer{k.signer}, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// appendN appends n events, ids derived from seed: two logs fed other
// seeds fork from their first event.
func appendN(t testing.TB, s *pebblelog.Store, seed string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		p := events.Proposed{ID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s-%d", seed, i)), Type: "Tested",
			Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Metadata: json.RawMessage(`{}`)}
		if _, err := s.Append(context.Background(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: "s", Events: []events.Proposed{p}}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func latest(t testing.TB, s *pebblelog.Store) events.Checkpoint {
	t.Helper()
	cp, err := s.LatestCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func consistency(t testing.TB, s *pebblelog.Store, from, to uint64) [][]byte {
	t.Helper()
	p, err := events.ConsistencyProof(context.Background(), s, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// greffeWitness is a real greffe witness (witness.Server) of the test
// ledger, served over HTTP behind a switch that can make it look down
// (503, as a proxy in front of a stopped witness answers) and a counter of
// the requests that reached it.
type greffeWitness struct {
	dir      string
	vkey     string
	verifier note.Verifier
	srv      *witness.Server
	http     *httptest.Server
	down     atomic.Bool
	requests atomic.Int64
	stop     func()
}

func startWitness(t testing.TB, name string, logs ...logKey) *greffeWitness {
	t.Helper()
	skey, vkey, err := witness.GenerateKey(name)
	if err != nil {
		t.Fatal(err)
	}
	return startWitnessWith(t, t.TempDir(), skey, vkey, logs...)
}

func startWitnessWith(t testing.TB, dir, skey, vkey string, logs ...logKey) *greffeWitness {
	t.Helper()
	signer, vk, err := witness.NewCosigner(skey)
	if err != nil || vk != vkey {
		t.Fatalf("cosigner: %v (%s vs %s)", err, vk, vkey)
	}
	v, err := witness.ParseCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := witness.ServerConfig{Dir: dir, Signer: signer, Logs: map[string][]note.Verifier{}}
	for _, k := range logs {
		cfg.Logs[k.verifier.Name()] = append(cfg.Logs[k.verifier.Name()], k.verifier)
	}
	srv, err := witness.OpenServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &greffeWitness{dir: dir, vkey: vkey, verifier: v, srv: srv}
	h := srv.Handler()
	w.http = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.down.Load() {
			http.Error(rw, "witness down", http.StatusServiceUnavailable)
			return
		}
		w.requests.Add(1)
		h.ServeHTTP(rw, r)
	}))
	var once sync.Once
	w.stop = func() {
		once.Do(func() {
			w.http.Close()
			srv.Close()
		})
	}
	t.Cleanup(w.stop)
	return w
}

func (w *greffeWitness) config(t testing.TB) witness.Witness {
	t.Helper()
	pw, err := witness.ParseWitness(w.http.URL + "=" + w.vkey)
	if err != nil {
		t.Fatal(err)
	}
	return pw
}

// waitFor waits until cond holds on the collector's status, bounded by a
// deadline: it wakes on each change the collector reports, never on a timer.
func waitFor(t testing.TB, c *witness.Collector, what string, cond func([]witness.Status) bool) []witness.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ch := c.Changed()
		st := c.Status()
		if cond(st) {
			return st
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; status %+v", what, ctx.Err(), st)
		}
	}
}
