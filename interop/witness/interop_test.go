// Package interop tests greffe's two ends of C2SP tlog-witness against the
// transparency-dev witness (github.com/transparency-dev/witness, the
// library behind the public witness network), run in process with its
// in-memory persistence: no hand-written stand-in plays the other side.
//
// It is a module of its own so that the witness's dependencies (newer
// transparency-dev/formats and merkle, OpenTelemetry, klog) stay out of
// greffe's go.mod; .ci/run runs it.
package interop

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	fnote "github.com/transparency-dev/formats/note"
	tdclient "github.com/transparency-dev/witness/client/http"
	"github.com/transparency-dev/witness/persistence/inmemory"
	tdwitness "github.com/transparency-dev/witness/witness"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/audit/online"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/client/verified"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
	"github.com/greffe/greffe/witness"
)

// tdWitness is the transparency-dev witness on a loopback port, following
// one log, its add-checkpoint handler mounted where tlog-witness puts it.
type tdWitness struct {
	url  string
	vkey string // its cosignature/v1 verifier key
}

func startTDWitness(t *testing.T, name string, logs map[string]note.Verifier) tdWitness {
	t.Helper()
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		t.Fatal(err)
	}
	w, err := tdwitness.New(t.Context(), tdwitness.Opts{
		Persistence: inmemory.New(),
		Signers:     []note.Signer{signer},
		VerifierForLog: func(_ context.Context, origin string) (note.Verifier, bool, error) {
			v, ok := logs[origin]
			return v, ok, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", tdwitness.NewHTTPHandler(w).AddCheckpoint)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// greffe derives the cosignature/v1 verifier key from the signer key;
	// the library's verifier must read it, or no line would ever match.
	_, vkey, err := witness.NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fnote.NewVerifierForCosignatureV1(vkey); err != nil {
		t.Fatalf("transparency-dev's formats does not read greffe's cosignature key %s: %v", vkey, err)
	}
	return tdWitness{url: srv.URL, vkey: vkey}
}

// ledger creates a node's data folder (ledger and keys) and returns its
// origin and checkpoint verifier.
func ledger(t *testing.T, dir, ledgerID string) (string, note.Verifier) {
	t.Helper()
	n, err := node.Open(node.Config{DataDir: dir, LedgerID: ledgerID, API: api.Config{Addr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	origin, vkey := n.Store.Origin(), n.Keys.Verifiers[0]
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return origin, v
}

func serveNode(t *testing.T, cfg node.Config) *node.Node {
	t.Helper()
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

func appendN(t *testing.T, c *client.Client, seed string, from, count int) {
	t.Helper()
	for i := from; i < from+count; i++ {
		id := uuid.NewMD5(uuid.NameSpaceOID, fmt.Appendf(nil, "%s-%d", seed, i)).String()
		if _, err := c.Append(t.Context(), "s", events.ExpectAny, []wire.EventIn{{ID: id, Type: "T", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls cond (the collector works on its own goroutines, against
// a witness over HTTP) every 20 ms, for up to 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInterop_NodeCosignedByTransparencyDevWitness: a greffe node started
// with the transparency-dev witness gets its cosignatures; GET
// /v1/checkpoint serves them, the library's own cosignature verifier
// accepts them, and both `greffe verify --witness-quorum` (audit) and the
// verified client accept the checkpoint. A node forked from that history
// under the same key is refused by the witness (the library trusts the
// first checkpoint it saw), counted as a conflict and never cosigned.
func TestInterop_NodeCosignedByTransparencyDevWitness(t *testing.T) {
	const id = "00000000-0000-4000-8000-00000000a17e"
	dir := t.TempDir()
	origin, logV := ledger(t, dir, id)
	td := startTDWitness(t, "witness.interop/td", map[string]note.Verifier{origin: logV})
	w, err := witness.ParseWitness(td.url + "=" + td.vkey)
	if err != nil {
		t.Fatal(err)
	}
	n := serveNode(t, node.Config{DataDir: dir, API: api.Config{Addr: "127.0.0.1:0"}, Witness: node.WitnessConfig{Witnesses: []witness.Witness{w}, Quorum: 1}})
	c := client.New(n.URL(), "")
	appendN(t, c, "honest", 0, 5)

	var served []byte
	waitFor(t, "a checkpoint of size 5 cosigned by the witness", func() bool {
		served, err = c.Get(t.Context(), "/v1/checkpoint")
		return err == nil && strings.Contains(string(served), "\n5\n") && strings.Contains(string(served), "— witness.interop/td ")
	})
	tdV, err := fnote.NewVerifierForCosignatureV1(td.vkey)
	if err != nil {
		t.Fatal(err)
	}
	opened, err := note.Open(served, note.VerifierList(logV, tdV))
	if err != nil {
		t.Fatalf("the served checkpoint does not open with the log's key and the library's cosignature verifier: %v\n%s", err, served)
	}
	var names []string
	for _, s := range opened.Sigs {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{origin, "witness.interop/td"}, names); diff != "" {
		t.Fatalf("verified signatures (-want +got)\n%s", diff)
	}

	ws, err := audit.ParseWitnessKeys([]string{td.vkey})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := online.VerifyServer(t.Context(), c, audit.Config{Witnesses: ws, WitnessQuorum: 1})
	if err != nil || !rep.Verified {
		t.Fatalf("verify --witness-quorum 1: %+v %v", rep, err)
	}
	vc, err := verified.New(t.Context(), c, verified.Config{Verifiers: []note.Verifier{logV}, Witnesses: ws, WitnessQuorum: 1})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, c, "honest", 5, 2)
	page, err := vc.ReadAll(t.Context(), events.ReadOptions{}) // waits for a checkpoint of 7 the witness cosigned
	if err != nil || len(page.Events) != 7 || vc.State().Size != 7 {
		t.Fatalf("verified read with a quorum of the witness: %d events, %v", len(page.Events), err)
	}
	if _, err := vc.Append(t.Context(), "s", events.ExpectAny, []wire.EventIn{{Type: "T", Data: json.RawMessage(`{}`)}}); err != nil || vc.State().Size != 8 {
		t.Fatalf("verified append with a quorum of the witness: %v", err)
	}

	// The fork: another data folder of the same ledger with the same
	// signing key, whose history differs from position 3 on.
	fdir := t.TempDir()
	copyDir(t, filepath.Join(dir, "keys"), filepath.Join(fdir, "keys"))
	fn := serveNode(t, node.Config{DataDir: fdir, LedgerID: id, API: api.Config{Addr: "127.0.0.1:0"}, Witness: node.WitnessConfig{Witnesses: []witness.Witness{w}}})
	if fn.Store.Origin() != origin {
		t.Fatalf("the fork's origin %q, want %q", fn.Store.Origin(), origin)
	}
	fc := client.New(fn.URL(), "")
	appendN(t, fc, "honest", 0, 3)
	appendN(t, fc, "forked", 3, 9)
	waitFor(t, "the witness's refusal of the fork", func() bool {
		st := fn.Witnesses.Status()
		return st[0].Conflicts > 0 && st[0].Halted
	})
	b, err := fc.Get(t.Context(), "/v1/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "witness.interop/td") {
		t.Fatalf("the fork's checkpoint carries the witness's cosignature:\n%s", b)
	}
	rep, err = online.VerifyServer(t.Context(), fc, audit.Config{Witnesses: ws, WitnessQuorum: 1})
	if err != nil || rep.Verified || rep.First == nil || rep.First.Kind != audit.KindCheckpointNotWitnessed {
		t.Fatalf("verify --witness-quorum 1 of the fork: %+v %v, want %s", rep.First, err, audit.KindCheckpointNotWitnessed)
	}
}

// TestInterop_GreffeWitnessAnswersTheLibraryClient: the library's own
// tlog-witness client (client/http) drives `greffe witness` (its
// witness.Server handler) and the library's witness through the same
// steps, and gets the same answers from both: a cosignature on first
// sight, the witness's size on a stale old size, a refusal of an
// inconsistent proof, of an unknown log, of a bad log signature and of an
// old size above the checkpoint's.
//
// One answer differs, on purpose: C2SP tlog-witness says a checkpoint
// without a valid signature by the log's key gets 403, which greffe
// answers; this version of the library answers 500 (log.ParseCheckpoint's
// error is not mapped to ErrNoValidSignature). The test pins both, so
// that a library that comes to answer 403 shows up here.
func TestInterop_GreffeWitnessAnswersTheLibraryClient(t *testing.T) {
	const id = "00000000-0000-4000-8000-00000000b17e"
	origin := events.Origin(id)
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	logS, _ := note.NewSigner(skey)
	logV, _ := note.NewVerifier(vkey)
	otherSkey, _, _ := note.GenerateKey(rand.Reader, origin)
	otherS, _ := note.NewSigner(otherSkey)
	const unknownID = "00000000-0000-4000-8000-00000000c17e"
	unknownSkey, _, _ := note.GenerateKey(rand.Reader, events.Origin(unknownID))
	unknownS, _ := note.NewSigner(unknownSkey)

	honest := openStore(t, id, logS)
	forked := openStore(t, id, logS)
	impostor := openStore(t, id, otherS)
	unknown := openStore(t, unknownID, unknownS)
	appendStore(t, honest, "honest", 0, 9)
	appendStore(t, forked, "forked", 0, 9)
	appendStore(t, impostor, "honest", 0, 3)
	appendStore(t, unknown, "honest", 0, 3)

	// The library's witness, and greffe's, on loopback.
	td := startTDWitness(t, "witness.interop/td", map[string]note.Verifier{origin: logV})
	wskey, wvkey, err := witness.GenerateKey("witness.interop/greffe")
	if err != nil {
		t.Fatal(err)
	}
	gsigner, _, err := witness.NewCosigner(wskey)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := witness.OpenServer(witness.ServerConfig{Dir: t.TempDir(), Signer: gsigner, Logs: map[string][]note.Verifier{origin: {logV}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gs.Close() })
	gsrv := httptest.NewServer(gs.Handler())
	t.Cleanup(gsrv.Close)

	cp := func(s *pebblelog.Store, size uint64) []byte {
		t.Helper()
		c, err := s.CheckpointAt(t.Context(), size)
		if err != nil {
			t.Fatal(err)
		}
		return c.Note
	}
	proof := func(s *pebblelog.Store, from, to uint64) [][]byte {
		t.Helper()
		p, err := events.ConsistencyProof(t.Context(), s, from, to)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	steps := []struct {
		name    string
		old     uint64
		cp      []byte
		proof   [][]byte
		wantErr error
	}{
		{"first sight", 0, cp(honest, 4), nil, nil},
		{"stale old size", 0, cp(honest, 6), nil, tdwitness.ErrCheckpointStale},
		{"consistent", 4, cp(honest, 6), proof(honest, 4, 6), nil},
		{"inconsistent proof", 6, cp(forked, 8), proof(forked, 6, 8), tdwitness.ErrInvalidProof},
		{"unknown log", 0, cp(unknown, 3), nil, tdwitness.ErrUnknownLog},
		{"bad log signature", 6, cp(impostor, 3), nil, tdwitness.ErrNoValidSignature},
		{"old size above the checkpoint's", 8, cp(honest, 7), proof(honest, 6, 7), tdwitness.ErrOldSizeInvalid},
		{"consistent again", 6, cp(honest, 9), proof(honest, 6, 9), nil},
	}
	type answer struct {
		Err  string
		Size uint64
		Sigs []string // the names whose lines verify
	}
	for _, w := range []struct {
		name, url, vkey string
		differs         map[string]string // step name: the answer where the witness departs from the spec
	}{
		{"transparency-dev", td.url, td.vkey, map[string]string{"bad log signature": "other: unexpected status code 500"}},
		{"greffe", gsrv.URL, wvkey, nil},
	} {
		t.Run(w.name, func(t *testing.T) {
			u, _ := url.Parse(w.url)
			wc := tdclient.NewWitness(u, http.DefaultClient)
			wv, err := fnote.NewVerifierForCosignatureV1(w.vkey)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range steps {
				sigs, size, err := wc.Update(t.Context(), s.old, s.cp, s.proof)
				got := answer{Size: size}
				if err != nil {
					got.Err = errName(err)
				}
				if len(sigs) > 0 {
					// The lines answered, appended to the note, verify
					// under the witness's cosignature/v1 key.
					n, err := note.Open(append(append([]byte(nil), s.cp...), sigs...), note.VerifierList(wv))
					if err != nil {
						t.Fatalf("%s: the answered lines do not verify: %v\n%s", s.name, err, sigs)
					}
					for _, sg := range n.Sigs {
						got.Sigs = append(got.Sigs, sg.Name)
					}
				}
				want := answer{}
				switch {
				case s.wantErr != nil:
					want.Err = errName(s.wantErr)
					if errors.Is(s.wantErr, tdwitness.ErrCheckpointStale) {
						want.Size = 4
					}
				default:
					want.Sigs = []string{wv.Name()}
				}
				if d, ok := w.differs[s.name]; ok {
					want.Err = d
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (-want +got)\n%s", s.name, diff)
				}
			}
		})
	}
}

// errName names a witness error by the library's sentinel it matches.
func errName(err error) string {
	for _, s := range []error{tdwitness.ErrCheckpointStale, tdwitness.ErrInvalidProof, tdwitness.ErrUnknownLog,
		tdwitness.ErrNoValidSignature, tdwitness.ErrOldSizeInvalid, tdwitness.ErrRootMismatch, tdwitness.ErrPushback} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "other: " + err.Error()
}

func openStore(t *testing.T, id string, s note.Signer) *pebblelog.Store {
	t.Helper()
	st, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(t.TempDir(), "ledger"), LedgerID: id, Signers: []note.Signer{s}, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func appendStore(t *testing.T, s *pebblelog.Store, seed string, from, count int) {
	t.Helper()
	for i := from; i < from+count; i++ {
		p := events.Proposed{ID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s-%d", seed, i)), Type: "T",
			Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Metadata: json.RawMessage(`{}`)}
		if _, err := s.Append(t.Context(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: "s", Events: []events.Proposed{p}}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}
