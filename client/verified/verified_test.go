package verified_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/client/verified"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
	"github.com/greffe/greffe/witness"
)

const ledgerID = "verified-test"

// logKey is the ledger's checkpoint key, shared by the honest node and
// the ones that fork or roll it back (a compromised node signs what it
// serves with the real key).
type logKey struct {
	signer note.Signer
	vkey   string
}

func newLogKey(t *testing.T) logKey {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, events.Origin(ledgerID))
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return logKey{s, vkey}
}

// node is a real store behind a real API server on loopback.
type node struct {
	store *pebblelog.Store
	url   string
}

func startNode(t *testing.T, k logKey) *node {
	t.Helper()
	s, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(t.TempDir(), "ledger"), LedgerID: ledgerID, Signers: []note.Signer{k.signer}, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Verifiers: func() []string { return []string{k.vkey} }}, s)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
		_ = s.Close()
	})
	return &node{store: s, url: "http://" + addr.String()}
}

// appendN appends n events to stream, with ids drawn from seed: nodes fed
// other seeds hold other histories.
func (n *node) appendN(t *testing.T, seed, stream string, from, count int) {
	t.Helper()
	for i := from; i < from+count; i++ {
		p := events.Proposed{ID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s-%d", seed, i)), Type: "Tested",
			Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Metadata: json.RawMessage(`{}`)}
		if _, err := n.store.Append(t.Context(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: stream, Events: []events.Proposed{p}}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func newVerified(t *testing.T, base string, k logKey, state string) *verified.Client {
	t.Helper()
	vs, err := audit.ParseVerifiers([]string{k.vkey})
	if err != nil {
		t.Fatal(err)
	}
	v, err := verified.New(t.Context(), client.New(base, ""), verified.Config{Verifiers: vs, StateFile: state})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// proofKind returns the kind of a failed verification ("" when err is
// not one).
func proofKind(err error) string {
	var pe *audit.ProofError
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return ""
}

// TestClient_ReadsProven reads an event by id, a stream page, a page of
// the global log and a projection's cited event from an honest node: each
// comes back as stored, and the trusted state follows the log.
func TestClient_ReadsProven(t *testing.T) {
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "a", "s", 0, 5)
	n.appendN(t, "a", "t", 5, 3)
	state := filepath.Join(t.TempDir(), "state.json")
	v := newVerified(t, n.url, k, state)
	ctx := t.Context()

	page, err := v.ReadAll(ctx, events.ReadOptions{From: 2, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := positions(page.Events); fmt.Sprint(got) != "[2 3 4 5]" {
		t.Fatalf("global page positions %v, want [2 3 4 5]", got)
	}
	st := v.State()
	if st == nil || st.Size != 8 {
		t.Fatalf("trusted state %+v, want size 8", st)
	}
	if onDisk, err := audit.ReadState(state); err != nil || onDisk == nil || onDisk.Size != 8 {
		t.Fatalf("state file: %+v, %v; want size 8", onDisk, err)
	}

	n.appendN(t, "a", "s", 8, 2)
	sp, err := v.ReadStream(ctx, "s", events.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Events) != 7 || sp.Events[6].Position != 9 {
		t.Fatalf("stream page: %d events, want 7 ending at position 9", len(sp.Events))
	}
	if v.State().Size != 10 {
		t.Fatalf("trusted size %d after the log grew, want 10", v.State().Size)
	}
	back, err := v.ReadStream(ctx, "s", events.ReadOptions{From: events.FromEnd, Direction: events.Backward, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := positions(back.Events); fmt.Sprint(got) != "[9 8 4]" {
		t.Fatalf("backward stream page %v, want [9 8 4]", got)
	}

	want := page.Events[1]
	e, err := v.Event(ctx, want.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	if e.Position != want.Position || !bytes.Equal(e.Data, want.Data) || e.LeafHash != want.LeafHash {
		t.Fatalf("event by id: %+v, want %+v", e, want)
	}
	ref := aggregates.RefOf(&want)
	if got, err := v.ProvingEvent(ctx, ref); err != nil || got.ID != want.ID {
		t.Fatalf("ProvingEvent: %v, %v", got.ID, err)
	}
	ref.Type = "Other"
	if _, err := v.ProvingEvent(ctx, ref); proofKind(err) != audit.KindProofInvalid {
		t.Fatalf("ProvingEvent of a ref the ledger does not hold: %v, want %s", err, audit.KindProofInvalid)
	}

	// A second client on the same state file starts where the first was.
	v2 := newVerified(t, n.url, k, state)
	if v2.State() == nil || v2.State().Size != 10 {
		t.Fatalf("a client on the state file trusts %+v, want size 10", v2.State())
	}
}

// TestClient_AppendProven: an append returns once its events are proven,
// and the proven events are what was sent.
func TestClient_AppendProven(t *testing.T) {
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "a", "s", 0, 3)
	v := newVerified(t, n.url, k, "")
	id := uuid.NewString()
	out, err := v.Append(t.Context(), "w", events.ExpectNoStream, []wire.EventIn{
		{ID: id, Type: "Written", Data: json.RawMessage(`{"x": 1}`)},
		{Type: "Written", Data: json.RawMessage(`{"x":2}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Events) != 2 || out.Events[0].ID.String() != id || out.Events[1].Position != 4 {
		t.Fatalf("append answered %+v", out)
	}
	if v.State().Size != 5 {
		t.Fatalf("trusted size %d after the append, want 5", v.State().Size)
	}
}

// TestClient_RefusesTampering: a node (or what stands between it and the
// client) that forges a proof, swaps an event, rolls the ledger back or
// forks it is refused, with the kind of the failure and a detail naming
// the event or the checkpoint.
func TestClient_RefusesTampering(t *testing.T) {
	k := newLogKey(t)
	honest := startNode(t, k)
	honest.appendN(t, "a", "s", 0, 6)

	tests := []struct {
		name    string
		rewrite func(p map[string]any) // the proof of a read of position 2 (trusted size 6)
		kind    string
		detail  string
	}{
		// The client asks for range proofs (?prove=range); a page of the
		// global log is one run, proven by the compact ranges [0, 2) and
		// [3, 6) of the tree of size 6 (one hash and two).
		{"flipped hash of the range's left part", func(p map[string]any) {
			h := p["range"].(map[string]any)["left"].([]any)
			h[0] = flipB64(h[0].(string))
		}, audit.KindProofInvalid, "position 2"},
		{"flipped hash of the range's right part", func(p map[string]any) {
			h := p["range"].(map[string]any)["right"].([]any)
			h[len(h)-1] = flipB64(h[len(h)-1].(string))
		}, audit.KindProofInvalid, "position 2"},
		{"a hash of the range dropped", func(p map[string]any) {
			r := p["range"].(map[string]any)
			r["right"] = r["right"].([]any)[1:]
		}, audit.KindProofInvalid, "position 2"},
		{"the range moved to another position", func(p map[string]any) {
			r := p["range"].(map[string]any)
			r["begin"], r["end"] = 3, 4
		}, audit.KindProofInvalid, "position 2"},
		{"the range widened", func(p map[string]any) {
			r := p["range"].(map[string]any)
			r["end"] = 4
		}, audit.KindProofInvalid, "1 event"},
		{"the range removed", func(p map[string]any) {
			delete(p, "range")
		}, audit.KindProofInvalid, "position 2"},
		{"altered stored bytes", func(p map[string]any) {
			e := p["entries"].([]any)[0].(map[string]any)
			e["entry"] = flipB64(e["entry"].(string))
		}, audit.KindProofInvalid, "position 2"},
		{"another event's proof", func(p map[string]any) {
			e := p["entries"].([]any)[0].(map[string]any)
			e["position"] = 3
		}, audit.KindProofInvalid, "position 2"},
		{"altered checkpoint signature", func(p map[string]any) {
			c := p["checkpoint"].(string)
			i := strings.LastIndex(c, " ")
			p["checkpoint"] = c[:i+1] + flipB64(strings.TrimSuffix(c[i+1:], "\n")) + "\n"
		}, audit.KindCheckpointSignature, "checkpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerified(t, honest.url, k, "")
			if _, err := v.ReadAll(t.Context(), events.ReadOptions{}); err != nil { // trust size 6
				t.Fatal(err)
			}
			proxy := tamperingProxy(t, honest.url, tc.rewrite)
			v2 := newVerified(t, proxy, k, "")
			_, err := v2.ReadAll(t.Context(), events.ReadOptions{From: 2, Limit: 1})
			if proofKind(err) != tc.kind || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("got %v, want a %s naming %q", err, tc.kind, tc.detail)
			}
		})
	}

	// Rollback and fork: a node holding another history of the same
	// ledger, signed with its key, answers a client that trusts the
	// honest node's checkpoint of size 6 (in its state file).
	state := filepath.Join(t.TempDir(), "state.json")
	if _, err := newVerified(t, honest.url, k, state).ReadAll(t.Context(), events.ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	short := startNode(t, k)
	short.appendN(t, "a", "s", 0, 4) // the same first 4 events: the log truncated
	forked := startNode(t, k)
	forked.appendN(t, "a", "s", 0, 3)
	forked.appendN(t, "b", "s", 3, 5) // position 3 on differs: a split view
	for _, tc := range []struct {
		name, url, kind, detail string
	}{
		{"rollback", short.url, audit.KindRollback, "size 4"},
		{"fork", forked.url, audit.KindFork, "size 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerified(t, tc.url, k, state)
			_, err := v.ReadAll(t.Context(), events.ReadOptions{Limit: 1})
			if proofKind(err) != tc.kind || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("got %v, want a %s naming %q", err, tc.kind, tc.detail)
			}
			if st, _ := audit.ReadState(state); st.Size != 6 {
				t.Fatalf("the state file moved to %d on a refused checkpoint", st.Size)
			}
		})
	}
}

// TestClient_RefusesTamperedInclusionProofs: a page whose positions are
// not one run (a stream's events among others) is proven event by event,
// even when the client asks for a range proof; a forged hash of one of
// them is refused, naming the event.
func TestClient_RefusesTamperedInclusionProofs(t *testing.T) {
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "a", "s", 0, 3)
	n.appendN(t, "a", "t", 3, 2)
	n.appendN(t, "a", "s", 5, 2) // stream s: positions 0, 1, 2, 5, 6
	honest, err := newVerified(t, n.url, k, "").ReadStream(t.Context(), "s", events.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := positions(honest.Events); fmt.Sprint(got) != "[0 1 2 5 6]" {
		t.Fatalf("stream page %v, want [0 1 2 5 6]", got)
	}
	var sawHashes bool
	proxy := tamperingProxy(t, n.url, func(p map[string]any) {
		if _, ok := p["range"]; ok {
			t.Errorf("a page of positions 0, 1, 2, 5, 6 was given a range proof")
		}
		e := p["entries"].([]any)[3].(map[string]any) // position 5
		h := e["hashes"].([]any)
		sawHashes = len(h) > 0
		h[0] = flipB64(h[0].(string))
	})
	_, err = newVerified(t, proxy, k, "").ReadStream(t.Context(), "s", events.ReadOptions{})
	if !sawHashes || proofKind(err) != audit.KindProofInvalid || !strings.Contains(err.Error(), "position 5") {
		t.Fatalf("got %v (inclusion proof seen: %v), want a %s naming position 5", err, sawHashes, audit.KindProofInvalid)
	}
}

// countingVerifier is a real note verifier that counts its checks.
type countingVerifier struct {
	note.Verifier
	n *atomic.Int64
}

func (c countingVerifier) Verify(msg, sig []byte) bool {
	c.n.Add(1)
	return c.Verifier.Verify(msg, sig)
}

// TestClient_ChecksEachCheckpointOnce: reads answered against the
// checkpoint already verified do not verify its signature again; a new
// checkpoint is verified, once.
func TestClient_ChecksEachCheckpointOnce(t *testing.T) {
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "a", "s", 0, 4)
	vs, err := audit.ParseVerifiers([]string{k.vkey})
	if err != nil {
		t.Fatal(err)
	}
	var checks atomic.Int64
	v, err := verified.New(t.Context(), client.New(n.url, ""), verified.Config{Verifiers: []note.Verifier{countingVerifier{vs[0], &checks}}})
	if err != nil {
		t.Fatal(err)
	}
	read := func() {
		t.Helper()
		if _, err := v.ReadAll(t.Context(), events.ReadOptions{From: 1, Limit: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		read()
	}
	if got := checks.Load(); got != 1 {
		t.Fatalf("%d signature checks for five reads against one checkpoint, want 1", got)
	}
	n.appendN(t, "a", "s", 4, 1)
	read()
	read()
	if got := checks.Load(); got != 2 {
		t.Fatalf("%d signature checks after the log grew once, want 2", got)
	}
}

// TestClient_WitnessQuorum: a client that requires cosignatures refuses a
// node without witnesses, naming the checkpoint.
func TestClient_WitnessQuorum(t *testing.T) {
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "a", "s", 0, 2)
	vs, _ := audit.ParseVerifiers([]string{k.vkey})
	ws, err := audit.ParseWitnessKeys([]string{witnessVKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := verified.New(t.Context(), client.New(n.url, ""), verified.Config{Verifiers: vs, Witnesses: ws, WitnessQuorum: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.ReadAll(t.Context(), events.ReadOptions{})
	if proofKind(err) != audit.KindCheckpointNotWitnessed || !strings.Contains(err.Error(), "checkpoint of size 2") {
		t.Fatalf("got %v, want %s naming the checkpoint of size 2", err, audit.KindCheckpointNotWitnessed)
	}
	if v.State() != nil {
		t.Fatalf("the state moved to an unwitnessed checkpoint: %+v", v.State())
	}
}

// tamperingProxy forwards to base and rewrites the "proof" of every JSON
// answer with rewrite.
func tamperingProxy(t *testing.T, base string, rewrite func(map[string]any)) string {
	t.Helper()
	u, _ := url.Parse(base)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		_ = r.Body.Close()
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			if p, ok := m["proof"].(map[string]any); ok {
				rewrite(p)
				b, _ = json.Marshal(m)
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

// flipB64 flips a bit of base64 data.
func flipB64(s string) string {
	b, err := base64Decode(s)
	if err != nil || len(b) == 0 {
		panic(fmt.Sprintf("flipB64(%q): %v", s, err))
	}
	b[len(b)/2] ^= 1
	return base64Encode(b)
}

func positions(evs []events.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Position
	}
	return out
}

func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
func base64Encode(b []byte) string          { return base64.StdEncoding.EncodeToString(b) }

// witnessVKey returns a witness's cosignature/v1 verifier key.
func witnessVKey(t *testing.T) string {
	t.Helper()
	_, vkey, err := witness.GenerateKey("witness.example")
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}
