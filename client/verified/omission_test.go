package verified_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/client/verified"
	"github.com/greffe/greffe/events"
)

// lyingNode is a real HTTP server in front of a real node that lies the
// way a compromised node can while every proof it serves still verifies:
// it answers a read with the node's answer to another read (the query
// rewritten: a smaller limit, another from), and edits the answer's
// "next". The proofs are the node's own, against its signed checkpoint:
// only what the answer leaves out is a lie.
type lyingNode struct {
	url string
	// lies counts the requests lied to; reads counts every read (GET
	// /v1/all and /v1/streams/) that lie.only matches.
	lies, reads atomic.Int64
}

// lie rewrites one read: query is the query sent to the node (nil: the
// request is passed as it is), answer edits the answer's JSON. times
// bounds how many reads are lied to (0: all).
type lie struct {
	// only limits the lie to reads whose path starts with it ("" all).
	only string
	// path rewrites the path sent to the node (nil: kept).
	path   func(string) string
	query  func(q url.Values) url.Values
	answer func(m map[string]any)
	times  int64
}

func newLyingNode(t *testing.T, base string, l lie) *lyingNode {
	t.Helper()
	u, _ := url.Parse(base)
	ln := &lyingNode{}
	rp := httputil.NewSingleHostReverseProxy(u)
	director := rp.Director
	rp.Director = func(r *http.Request) {
		director(r)
		read := r.Method == http.MethodGet && (r.URL.Path == "/v1/all" || strings.HasPrefix(r.URL.Path, "/v1/streams/"))
		if !read {
			return
		}
		if !strings.HasPrefix(r.URL.Path, l.only) {
			return
		}
		if n := ln.reads.Add(1); l.times > 0 && n > l.times {
			return
		}
		ln.lies.Add(1)
		r.Header.Set("X-Lie", "1")
		if l.query != nil {
			r.URL.RawQuery = l.query(r.URL.Query()).Encode()
		}
		if l.path != nil {
			r.URL.Path, r.URL.RawPath = l.path(r.URL.Path), ""
		}
	}
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.Header.Get("X-Lie") == "" || l.answer == nil {
			return nil
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		_ = r.Body.Close()
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			l.answer(m)
			b, _ = json.Marshal(m)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	ln.url = srv.URL
	return ln
}

// set returns a query rewrite that sets key to value.
func set(kv ...string) func(url.Values) url.Values {
	return func(q url.Values) url.Values {
		for i := 0; i < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return q
	}
}

func dropNext(m map[string]any) { delete(m, "next") }

// TestClient_RefusesOmissions (#20, finding 11): a lying node that leaves
// events out of a verified read, every proof it serves still valid, is
// refused with event_omitted, naming what is missing (*OmissionError):
// a global page cut short without saying so, an empty page below the
// checkpoint's size, a backward page that starts below the newest event,
// a "next" that skips positions, a stream page whose tail is hidden, an
// older version served as a stream's newest, a stream said empty. Before
// the fix each was accepted: the client checked only that the events
// shown follow each other.
func TestClient_RefusesOmissions(t *testing.T) {
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "a", "s", 0, 4) // s@0..3 at positions 0..3
	n.appendN(t, "a", "t", 4, 3) // t@0..2 at 4..6
	n.appendN(t, "a", "s", 7, 3) // s@4..6 at 7..9: the log holds 10 events

	global := func(o events.ReadOptions) func(*verified.Client) error {
		return func(v *verified.Client) error { _, err := v.ReadAll(t.Context(), o); return err }
	}
	stream := func(s string, o events.ReadOptions) func(*verified.Client) error {
		return func(v *verified.Client) error { _, err := v.ReadStream(t.Context(), s, o); return err }
	}
	back := events.ReadOptions{From: events.FromEnd, Direction: events.Backward}
	backN := func(n int) events.ReadOptions { o := back; o.Limit = n; return o }

	tests := []struct {
		name string
		read func(*verified.Client) error
		lie  lie
		want verified.OmissionError
	}{
		{"a global page cut short", global(events.ReadOptions{From: 2, Limit: 5}),
			lie{query: set("limit", "3"), answer: dropNext}, verified.OmissionError{From: 5, To: 7, Position: -1, Checkpoint: 10}},
		{"the end of the log hidden", global(events.ReadOptions{From: 6}),
			lie{query: set("limit", "2"), answer: dropNext}, verified.OmissionError{From: 8, To: 10, Position: -1, Checkpoint: 10}},
		{"an empty page below the checkpoint's size", global(events.ReadOptions{From: 3, Limit: 4}),
			lie{query: set("from", "100")}, verified.OmissionError{From: 3, To: 7, Position: -1, Checkpoint: 10}},
		{"an empty page with a next", global(events.ReadOptions{From: 3, Limit: 4}),
			lie{query: set("from", "100"), answer: func(m map[string]any) { m["next"] = 3 }}, verified.OmissionError{From: 3, To: 7, Position: -1, Checkpoint: 10}},
		{"a next that skips positions", global(events.ReadOptions{From: 0, Limit: 3}),
			lie{answer: func(m map[string]any) { m["next"] = 6 }}, verified.OmissionError{From: 3, To: 6, Position: -1, Checkpoint: 10}},
		{"a backward page below the newest events", global(backN(3)),
			lie{query: set("from", "6")}, verified.OmissionError{From: 7, To: 10, Position: -1, Checkpoint: 10}},
		{"a backward page cut short", global(events.ReadOptions{From: 5, Direction: events.Backward, Limit: 4}),
			lie{query: set("limit", "2"), answer: dropNext}, verified.OmissionError{From: 2, To: 4, Position: -1, Checkpoint: 10}},
		{"a stream's tail hidden", stream("s", events.ReadOptions{}),
			lie{only: "/v1/streams/", query: set("limit", "5"), answer: dropNext}, verified.OmissionError{Stream: "s", From: 5, To: 6, Position: 8, Checkpoint: 10}},
		{"an older version served as the newest", stream("s", backN(1)),
			lie{only: "/v1/streams/", query: set("from", "3")}, verified.OmissionError{Stream: "s", From: 4, To: 5, Position: 7, Checkpoint: 10}},
		{"a stream said empty", stream("t", events.ReadOptions{}),
			lie{only: "/v1/streams/", query: set("from", "100")}, verified.OmissionError{Stream: "t", From: 0, To: 1, Position: 4, Checkpoint: 10}},
		{"a stream said not to exist (not_found)", stream("t", events.ReadOptions{}),
			lie{only: "/v1/streams/", path: func(string) string { return "/v1/streams/nothing-here" }}, verified.OmissionError{Stream: "t", From: 0, To: 1, Position: 4, Checkpoint: 10}},
		{"a stream's newest versions said absent", stream("s", events.ReadOptions{From: 5}),
			lie{only: "/v1/streams/", query: set("from", "100")}, verified.OmissionError{Stream: "s", From: 5, To: 7, Position: 9, Checkpoint: 10}},
		{"a stream's lower versions hidden from a backward page", stream("s", backN(4)),
			lie{only: "/v1/streams/", query: set("limit", "2"), answer: dropNext}, verified.OmissionError{Stream: "s", From: 3, To: 5, Position: -1, Checkpoint: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ln := newLyingNode(t, n.url, tc.lie)
			err := tc.read(newVerified(t, ln.url, k, ""))
			if proofKind(err) != verified.KindEventOmitted {
				t.Fatalf("got %v, want %s", err, verified.KindEventOmitted)
			}
			var oe *verified.OmissionError
			if !errors.As(err, &oe) {
				t.Fatalf("%v is not an *OmissionError", err)
			}
			if diff := cmp.Diff(tc.want, *oe); diff != "" {
				t.Errorf("the omission named (-want +got):\n%s\n%v", diff, err)
			}
			if !verified.IsProofFailure(err) {
				t.Errorf("an omission is not a proof failure: %v", err)
			}
			// The same read of the honest node passes.
			if err := tc.read(newVerified(t, n.url, k, "")); err != nil {
				t.Errorf("the honest answer: %v", err)
			}
		})
	}
}

// TestClient_HonestPagesPass: what an honest node answers (through a proxy
// that passes everything) passes, as it is: full and short pages of the
// global log in both directions, pages at and beyond the checkpoint's end,
// stream pages whose end the client proves by reading what follows
// (proven), and reads by version. A node that lies once (a page cut short,
// as a read racing an append looks: the page read before an append, the
// checkpoint signed after it) is asked again and its second, honest,
// answer is taken.
func TestClient_HonestPagesPass(t *testing.T) {
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "a", "s", 0, 4)
	n.appendN(t, "a", "t", 4, 3)
	n.appendN(t, "a", "s", 7, 3)
	ln := newLyingNode(t, n.url, lie{})
	v := newVerified(t, ln.url, k, "")
	ctx := t.Context()
	back := events.Backward
	u := func(x uint64) *uint64 { return &x }
	tests := []struct {
		name      string
		stream    string // "" the global log
		o         events.ReadOptions
		positions string
		next      *uint64
	}{
		{"a full page", "", events.ReadOptions{From: 2, Limit: 3}, "[2 3 4]", u(5)},
		{"to the end", "", events.ReadOptions{From: 6}, "[6 7 8 9]", nil},
		{"at the end", "", events.ReadOptions{From: 10}, "[]", nil},
		{"beyond the end", "", events.ReadOptions{From: 50}, "[]", nil},
		{"backward from the end", "", events.ReadOptions{From: events.FromEnd, Direction: back, Limit: 3}, "[9 8 7]", u(6)},
		{"backward to the start", "", events.ReadOptions{From: 2, Direction: back}, "[2 1 0]", nil},
		{"a stream", "s", events.ReadOptions{}, "[0 1 2 3 7 8 9]", nil},
		{"a stream's full page", "s", events.ReadOptions{From: 1, Limit: 2}, "[1 2]", u(3)},
		{"a stream's newest", "s", events.ReadOptions{From: events.FromEnd, Direction: back, Limit: 1}, "[9]", u(5)},
		{"a stream backward from a version", "t", events.ReadOptions{From: 1, Direction: back}, "[5 4]", nil},
		{"a stream read past its end", "t", events.ReadOptions{From: 3}, "[]", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out struct {
				Events []events.Event
				Next   *uint64
			}
			var err error
			if tc.stream == "" {
				r, e := v.ReadAll(ctx, tc.o)
				out.Events, out.Next, err = r.Events, r.Next, e
			} else {
				r, e := v.ReadStream(ctx, tc.stream, tc.o)
				out.Events, out.Next, err = r.Events, r.Next, e
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(positions(out.Events)); got != tc.positions {
				t.Errorf("positions %s, want %s", got, tc.positions)
			}
			if diff := cmp.Diff(tc.next, out.Next); diff != "" {
				t.Errorf("next (-want +got):\n%s", diff)
			}
		})
	}
	if ln.reads.Load() == 0 {
		t.Fatal("the proxy saw no read")
	}
	// A stream that does not exist: the node's not_found, proven by
	// reading the log (none of its events is of the stream).
	if _, err := v.ReadStream(ctx, "none", events.ReadOptions{}); client.CodeOf(err) != events.CodeNotFound {
		t.Errorf("a stream that does not exist: %v, want the node's %s", err, events.CodeNotFound)
	}

	once := newLyingNode(t, n.url, lie{query: set("limit", "1"), answer: dropNext, times: 1})
	page, err := newVerified(t, once.url, k, "").ReadAll(ctx, events.ReadOptions{From: 4, Limit: 3})
	if err != nil || fmt.Sprint(positions(page.Events)) != "[4 5 6]" {
		t.Fatalf("a node that cut one page short: %v %v, want [4 5 6] on its second answer", positions(page.Events), err)
	}
	if got := once.reads.Load(); got != 2 {
		t.Errorf("%d reads, want 2 (the short page, then the read again)", got)
	}
}

// TestClient_StreamEndBeyondTheScanBound: a stream page that claims the
// stream's end is proven by reading what follows its newest event, up to
// Config.MaxStreamEndScan events; beyond, the read is refused with an
// *UnprovenEndError (stream_end_unproven, not a proof failure: the node
// is honest here) that carries the proven page, rather than presenting an
// end it did not prove. A page that claims no end (a full one) is never
// refused for it.
func TestClient_StreamEndBeyondTheScanBound(t *testing.T) {
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "a", "s", 0, 4) // s@0..3 at 0..3
	n.appendN(t, "a", "t", 4, 3) // t@0..2 at 4..6
	n.appendN(t, "a", "s", 7, 3) // s@4..6 at 7..9
	vs, err := audit.ParseVerifiers([]string{k.vkey})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		bound  int
		stream string
		o      events.ReadOptions
		want   *verified.UnprovenEndError // nil: proven
	}{
		{"the newest event is the checkpoint's last", -1, "s", events.ReadOptions{}, nil},
		{"three events follow, the bound is 3", 3, "t", events.ReadOptions{}, nil},
		{"three events follow, the bound is 2", 2, "t", events.ReadOptions{}, &verified.UnprovenEndError{Stream: "t", After: 6, Checkpoint: 10, Bound: 2}},
		{"no scan at all", -1, "t", events.ReadOptions{}, &verified.UnprovenEndError{Stream: "t", After: 6, Checkpoint: 10, Bound: 0}},
		{"the newest, backward", 2, "t", events.ReadOptions{From: events.FromEnd, Direction: events.Backward, Limit: 1}, &verified.UnprovenEndError{Stream: "t", After: 6, Checkpoint: 10, Bound: 2}},
		{"a full page claims no end", -1, "t", events.ReadOptions{Limit: 2}, nil},
		{"a stream that does not exist", 9, "none", events.ReadOptions{}, &verified.UnprovenEndError{Stream: "none", After: -1, Checkpoint: 10, Bound: 9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := verified.New(t.Context(), client.New(n.url, ""), verified.Config{Verifiers: vs, MaxStreamEndScan: tc.bound})
			if err != nil {
				t.Fatal(err)
			}
			page, err := v.ReadStream(t.Context(), tc.stream, tc.o)
			if tc.want == nil {
				if err != nil || len(page.Events) == 0 {
					t.Fatalf("got %d events, %v; want them proven", len(page.Events), err)
				}
				return
			}
			var ue *verified.UnprovenEndError
			if !errors.As(err, &ue) || !errors.Is(err, verified.ErrEndUnproven) {
				t.Fatalf("got %v, want an *UnprovenEndError", err)
			}
			if verified.IsProofFailure(err) || !strings.Contains(err.Error(), verified.KindStreamEndUnproven) {
				t.Errorf("an unproven end is a proof failure, or does not say %s: %v", verified.KindStreamEndUnproven, err)
			}
			if diff := cmp.Diff(*tc.want, *ue, cmpopts.IgnoreFields(verified.UnprovenEndError{}, "Page")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tc.stream == "t" && fmt.Sprint(positions(ue.Page.Events)) != map[bool]string{true: "[6]", false: "[4 5 6]"}[tc.o.Limit == 1] {
				t.Errorf("the page carried: %v", positions(ue.Page.Events))
			}
		})
	}
}

// TestClient_StreamReadAgainOnce: a stream page that falls short once (a
// node racing itself: the page read before an append to the stream, the
// checkpoint signed after) is read again, and the second answer taken; a
// node that falls short twice is refused.
func TestClient_StreamReadAgainOnce(t *testing.T) {
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "a", "s", 0, 5)
	for _, tc := range []struct {
		times     int64
		wantErr   bool
		wantReads int64
	}{{1, false, 2}, {0, true, 2}} {
		ln := newLyingNode(t, n.url, lie{only: "/v1/streams/", query: set("limit", "3"), answer: dropNext, times: tc.times})
		page, err := newVerified(t, ln.url, k, "").ReadStream(t.Context(), "s", events.ReadOptions{})
		if got := err != nil; got != tc.wantErr || (!tc.wantErr && len(page.Events) != 5) {
			t.Errorf("lying %d time(s): %d events, %v", tc.times, len(page.Events), err)
		}
		if tc.wantErr && proofKind(err) != verified.KindEventOmitted {
			t.Errorf("lying every time: %v, want %s", err, verified.KindEventOmitted)
		}
		if got := ln.reads.Load(); got != tc.wantReads {
			t.Errorf("lying %d time(s): %d stream reads, want %d", tc.times, got, tc.wantReads)
		}
	}
}

// TestClient_ReadsRacingAppends: reads of the log's tail and of a stream's
// newest event while another writer appends to that stream, through a
// real node that reads each page before it signs the checkpoint (so that
// an append in between makes an honest page look short): every read
// passes, and shows at least what was acknowledged before it began.
func TestClient_ReadsRacingAppends(t *testing.T) {
	rounds := 60
	if raceEnabled {
		rounds = 20
	}
	k := newLogKey(t)
	n := startNode(t, k)
	n.appendN(t, "seed", "hot", 0, 3)
	ln := newLyingNode(t, n.url, lie{}) // counts the reads
	v := newVerified(t, ln.url, k, "")
	ctx := t.Context()

	var acked atomic.Int64 // the hot stream's events acknowledged
	acked.Store(3)
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		for i := 3; i < 3+4*rounds; i++ {
			p := events.Proposed{ID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "hot-%d", i)), Type: "Tested", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}
			if _, err := n.store.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: "hot", Events: []events.Proposed{p}}}}); err != nil {
				if ctx.Err() == nil { // not a test that already ended
					t.Error(err) // t.Fatal is for the test's goroutine
				}
				return
			}
			acked.Add(1)
		}
	}()
	calls := 0
	for i := range rounds {
		before := uint64(acked.Load())
		newest, err := v.ReadStream(ctx, "hot", events.ReadOptions{From: events.FromEnd, Direction: events.Backward, Limit: 1})
		if err != nil || len(newest.Events) != 1 || newest.Events[0].Version+1 < before {
			t.Fatalf("round %d: the newest of hot: %v, %v; %d were acknowledged before", i, positions(newest.Events), err, before)
		}
		tail, err := v.ReadAll(ctx, events.ReadOptions{From: before - 1})
		if err != nil || len(tail.Events) == 0 || tail.Events[len(tail.Events)-1].Position+1 < before {
			t.Fatalf("round %d: the log's tail from %d: %v, %v", i, before-1, positions(tail.Events), err)
		}
		back, err := v.ReadAll(ctx, events.ReadOptions{From: events.FromEnd, Direction: events.Backward, Limit: 2})
		if err != nil || len(back.Events) != 2 || back.Events[0].Position+1 < before {
			t.Fatalf("round %d: the log's newest: %v, %v", i, positions(back.Events), err)
		}
		all, err := v.ReadStream(ctx, "hot", events.ReadOptions{From: before - 1})
		if err != nil || len(all.Events) == 0 {
			t.Fatalf("round %d: hot from version %d: %v, %v", i, before-1, positions(all.Events), err)
		}
		calls += 4
	}
	<-done
	t.Logf("%d reads for %d calls: %d more (pages read again after racing an append, and reads proving the stream's end)", ln.reads.Load(), calls, ln.reads.Load()-int64(calls))
}
