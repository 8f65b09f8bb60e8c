package verified_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// gate is a reverse proxy in front of a real node that counts the
// consistency proofs the client asks for (GET /v1/proof/consistency: the
// requests accept makes when the trusted state moved while it checked an
// answer), and can hold one request, before it reaches the node or after
// the node answered, until the test releases it.
type gate struct {
	url           string
	consistency   atomic.Int64
	mu            sync.Mutex
	hold          func(*http.Request) bool // guarded by mu; nil: hold nothing
	holdAfter     bool                     // guarded by mu: hold the answer, not the request
	held, release chan struct{}
}

func newGate(t *testing.T, base string) *gate {
	t.Helper()
	u, _ := url.Parse(base)
	g := &gate{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/v1/proof/consistency" {
			g.consistency.Add(1)
		}
		g.mu.Lock()
		hold, after, held, release := g.hold != nil && g.hold(r), g.holdAfter, g.held, g.release
		if hold {
			g.hold = nil // one request only
		}
		g.mu.Unlock()
		if hold && !after {
			close(held)
			<-release
		}
		resp, err := http.DefaultTransport.RoundTrip(r)
		if hold && after {
			close(held)
			<-release
		}
		return resp, err
	})
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

// holdNext holds the next request that matches, before it is sent to the
// node (after false) or once the node answered it (after true); held is
// closed when it is held, closing release lets it go.
func (g *gate) holdNext(match func(*http.Request) bool, after bool) (held, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.holdAfter = match, after
	g.held, g.release = make(chan struct{}), make(chan struct{})
	return g.held, g.release
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClient_ConcurrentReadsAndAppends runs many goroutines reading (by
// id, stream pages, global pages) and appending through one verified
// client against a real node: every answer is proven (no error, and the
// events returned are the ones written), and the trusted state, sampled
// all along by another goroutine, only moves forward (its size never
// decreases, a size once trusted keeps its root), ending at the node's
// head. The state file follows.
func TestClient_ConcurrentReadsAndAppends(t *testing.T) {
	workers, rounds := 8, 12
	if raceEnabled {
		workers, rounds = 4, 4
	}
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "seed", "s", 0, 3)
	g := newGate(t, n.url)
	state := filepath.Join(t.TempDir(), "state.json")
	v := newVerified(t, g.url, k, state)
	ctx := t.Context()

	// The sampler: the state only moves forward.
	stop := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		roots := map[uint64][]byte{}
		var last uint64
		for {
			if st := v.State(); st != nil {
				if st.Size < last {
					sampled <- fmt.Errorf("the trusted state went back from size %d to %d", last, st.Size)
					return
				}
				if r, ok := roots[st.Size]; ok && !bytes.Equal(r, st.Root) {
					sampled <- fmt.Errorf("the trusted state at size %d changed its root", st.Size)
					return
				}
				roots[st.Size], last = st.Root, st.Size
			}
			select {
			case <-stop:
				sampled <- nil
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*4)
	for w := range workers {
		wg.Go(func() {
			stream := fmt.Sprintf("w%d", w)
			for i := range rounds {
				data := json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				out, err := v.Append(ctx, stream, events.ExpectAny, []wire.EventIn{{Type: "Written", Data: data}})
				if err != nil {
					errs <- fmt.Errorf("worker %d append %d: %w", w, i, err)
					return
				}
				pos := out.Events[0].Position
				if st := v.State(); st == nil || st.Size <= pos {
					errs <- fmt.Errorf("worker %d: the append at position %d returned with the trusted state at %+v", w, pos, st)
				}
				e, err := v.Event(ctx, out.Events[0].ID.String())
				if err != nil || e.Position != pos || !bytes.Equal(e.Data, data) {
					errs <- fmt.Errorf("worker %d: event %s by id: position %d data %s, %v; want position %d data %s", w, out.Events[0].ID, e.Position, e.Data, err, pos, data)
				}
				sp, err := v.ReadStream(ctx, stream, events.ReadOptions{})
				if err != nil || len(sp.Events) != i+1 || sp.Events[i].Position != pos {
					errs <- fmt.Errorf("worker %d: its stream after %d appends: %d events, %v", w, i+1, len(sp.Events), err)
				}
				page, err := v.ReadAll(ctx, events.ReadOptions{From: pos - min(pos, 2), Limit: 3})
				if err != nil || len(page.Events) != 3 && len(page.Events) != int(pos+1) {
					errs <- fmt.Errorf("worker %d: a page of the log before position %d: %d events, %v", w, pos, len(page.Events), err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-sampled; err != nil {
		t.Error(err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	head := n.store.Head()
	if want := uint64(3 + workers*rounds); head.Size != want {
		t.Fatalf("the node holds %d events, want %d", head.Size, want)
	}
	// One more read from the head: the state reaches it, with its root.
	if _, err := v.ReadAll(ctx, events.ReadOptions{From: head.Size - 1}); err != nil {
		t.Fatal(err)
	}
	st := v.State()
	if st.Size != head.Size || !bytes.Equal(st.Root, head.Root[:]) {
		t.Errorf("trusted state size %d root %x, the node's head size %d root %x", st.Size, st.Root, head.Size, head.Root)
	}
	if onDisk, err := audit.ReadState(state); err != nil || onDisk == nil || onDisk.Size != st.Size {
		t.Errorf("the state file holds %+v (%v), the client trusts size %d", onDisk, err, st.Size)
	}
	t.Logf("%d workers x %d rounds: %d extra consistency proofs asked while the state moved", workers, rounds, g.consistency.Load())
}

// TestClient_StateMovedWhileChecking makes each branch of the race in
// accept happen for certain: one read is held (at a proxy in front of a
// real node) while an append through the same client moves the trusted
// state, then released.
//
//   - held before the node answers: its checkpoint is newer than the
//     state the append moved to, and the client links the two with one
//     consistency proof, then moves the state to it;
//   - held after the node answered: its checkpoint is older than the
//     state now trusted, and the client checks it is a prefix of it (one
//     consistency proof) and leaves the state where it is.
func TestClient_StateMovedWhileChecking(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("answer held %v", after), func(t *testing.T) {
			k := newLogKey(t)
			n := startNode(t, k)
			n.appendN(t, "seed", "s", 0, 3)
			g := newGate(t, n.url)
			v := newVerified(t, g.url, k, "")
			ctx := t.Context()
			if _, err := v.ReadAll(ctx, events.ReadOptions{}); err != nil { // trust size 3
				t.Fatal(err)
			}
			held, release := g.holdNext(func(r *http.Request) bool {
				return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/all")
			}, after)
			read := make(chan error, 1)
			var page wire.ReadOut
			go func() {
				var err error
				page, err = v.ReadAll(ctx, events.ReadOptions{From: 1, Limit: 2})
				read <- err
			}()
			select {
			case <-held:
			case <-time.After(10 * time.Second):
				t.Fatal("the read never reached the proxy")
			}
			if _, err := v.Append(ctx, "moved", events.ExpectAny, []wire.EventIn{{Type: "Written"}}); err != nil {
				t.Fatal(err)
			}
			if v.State().Size != 4 {
				t.Fatalf("the append moved the state to %d, want 4", v.State().Size)
			}
			if !after {
				// The held request reaches the node once it holds one
				// more event: its checkpoint (size 5) is newer than the
				// state the append moved to (size 4).
				n.appendN(t, "late", "s", 10, 1)
			}
			before := g.consistency.Load()
			close(release)
			if err := <-read; err != nil {
				t.Fatalf("the held read: %v", err)
			}
			if got := positions(page.Events); fmt.Sprint(got) != "[1 2]" {
				t.Fatalf("the held read returned positions %v, want [1 2]", got)
			}
			if got := g.consistency.Load() - before; got != 1 {
				t.Errorf("%d consistency proofs asked after the held answer, want 1", got)
			}
			want := uint64(5)
			if after {
				want = 4
			}
			if st := v.State(); st.Size != want {
				t.Errorf("trusted state size %d after the held read, want %d", st.Size, want)
			}
		})
	}
}

// TestClient_AppendWithoutProofReadsBack: when the node's answer to an
// append carries no proof (proof_error, as a node that cannot sign or
// whose witnesses did not cosign in time answers; here a proxy strips the
// real node's proof), the verified append reads its events back from the
// log, proven, and returns them as written; the state moves to the
// checkpoint of that read. A node whose read-back does not hold the
// events answered is refused.
func TestClient_AppendWithoutProofReadsBack(t *testing.T) {
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "seed", "s", 0, 2)
	var stripped atomic.Int64
	u, _ := url.Parse(n.url)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method != http.MethodPost {
			return nil
		}
		return rewriteJSON(r, func(m map[string]any) {
			if _, ok := m["proof"]; ok {
				delete(m, "proof")
				m["proof_error"] = map[string]any{"code": "checkpoint_unavailable", "message": "stripped by the test's proxy"}
				stripped.Add(1)
			}
		})
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	var reads atomic.Int64
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/all") {
			reads.Add(1)
		}
		srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(counted.Close)

	v := newVerified(t, counted.URL, k, "")
	id := "0e4c3c5f-3f2b-4c53-9d6a-2f1a7c0d4e11"
	out, err := v.Append(t.Context(), "w", events.ExpectNoStream, []wire.EventIn{
		{ID: id, Type: "Written", Data: json.RawMessage(`{"x":1}`)},
		{Type: "Written", Data: json.RawMessage(`{"x":2}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if stripped.Load() != 1 || reads.Load() != 1 {
		t.Fatalf("%d proofs stripped, %d reads of the log; want 1 and 1 (the read-back)", stripped.Load(), reads.Load())
	}
	if len(out.Events) != 2 || out.Events[0].ID.String() != id || out.Events[0].Position != 2 || out.Events[1].Position != 3 {
		t.Fatalf("append answered %+v", out.Events)
	}
	if st := v.State(); st == nil || st.Size != 4 {
		t.Fatalf("trusted state %+v after the read-back, want size 4", st)
	}

	// The same stripped answer from a node whose log does not hold the
	// events at the positions answered (the answer lies about them): the
	// read-back refuses it, saying the events were not proven.
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			rec := httptest.NewRecorder()
			srv.Config.Handler.ServeHTTP(rec, r)
			var m map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &m)
			for _, e := range m["events"].([]any) {
				e.(map[string]any)["position"] = 0 // another event's position
			}
			b, _ := json.Marshal(m)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
			return
		}
		srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(liar.Close)
	v2 := newVerified(t, liar.URL, k, "")
	_, err = v2.Append(t.Context(), "w2", events.ExpectAny, []wire.EventIn{{Type: "Written", Data: json.RawMessage(`{"x":3}`)}})
	if proofKind(err) != audit.KindProofInvalid || !strings.Contains(err.Error(), "not proven") {
		t.Fatalf("a stripped answer naming the wrong position: %v, want %s, not proven", err, audit.KindProofInvalid)
	}
}

// rewriteJSON rewrites a JSON answer's object with edit.
func rewriteJSON(r *http.Response, edit func(map[string]any)) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	_ = r.Body.Close()
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		edit(m)
		b, _ = json.Marshal(m)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return nil
}
