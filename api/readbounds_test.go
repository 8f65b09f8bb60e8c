package api_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

// Issue #20, finding 10: a reader could make the node hold memory without
// bound (40 stalled subscribers took its RSS from 0.85 to 2.9 GB). These
// tests attack a real node as a reader would: subscriptions past the caps,
// subscribers that never read (a raw TCP connection that sends the request
// and nothing else), pages of large events.

// startServer is startNode with a configuration: a real store and a real
// server on a loopback port. It returns the server too, for its counts.
func startServer(t testing.TB, cfg api.Config) (*testNode, *api.Server) {
	t.Helper()
	s, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), LedgerID: "api-test", CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	skey, vkey, _ := note.GenerateKey(rand.Reader, s.Origin())
	signer, _ := note.NewSigner(skey)
	verifier, _ := note.NewVerifier(vkey)
	if err := s.SetSigners([]note.Signer{signer}); err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.Verifiers = func() []string { return []string{vkey} }
	srv, err := api.New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	return &testNode{store: s, url: serve(t, srv, s.Close), verifier: verifier}, srv
}

func readerTokens(t testing.TB, names ...string) *api.Tokens {
	t.Helper()
	var list []api.Token
	for _, n := range names {
		list = append(list, api.Token{Name: n, Role: api.RoleReader, Token: n + "-token-0123456789"})
	}
	list = append(list, api.Token{Name: "writer", Role: api.RoleWriter, Token: "writer-token-0123456789"})
	tokens, err := api.NewTokens(list)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// quota returns the server's counts of the named quota.
func quota(t testing.TB, srv *api.Server, name string) (held int, dropped uint64) {
	t.Helper()
	for _, q := range srv.Quotas() {
		if q.Name == name {
			return q.Held, q.Dropped
		}
	}
	t.Fatalf("no quota %q in %+v", name, srv.Quotas())
	return 0, 0
}

// waitQuota waits until the named quota holds held (and, when dropped >=
// 0, has dropped that many). The release happens on the node after the
// client has gone, with nothing the client can see, so this one wait
// polls the node's own counts, with a deadline.
func waitQuota(t testing.TB, srv *api.Server, name string, held int, dropped int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		h, d := quota(t, srv, name)
		if h == held && (dropped < 0 || d == uint64(dropped)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("quota %s: %d held, %d dropped after 15 s; want %d held, %d dropped", name, h, d, held, dropped)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answered is a response, with its error's code and details when it is
// an error.
type answered struct {
	*http.Response
	Code    string
	Details map[string]any
}

// getAs sends a GET with a token (none: "") and returns the response, closed
// when the test ends.
func getAs(t *testing.T, ctx context.Context, url, token string) answered {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode == http.StatusOK {
		return answered{Response: resp}
	}
	var eb wire.ErrorBody
	b, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(b, &eb) != nil || eb.Error == nil {
		t.Fatalf("GET %s: %d without an error body: %s", url, resp.StatusCode, b)
	}
	return answered{Response: resp, Code: eb.Error.Code, Details: eb.Error.Details}
}

// TestSubscribe_CapsPerPrincipalAndInTotal: a principal's subscription
// past its cap, and anyone's past the node's, is refused with 429
// too_many_subscriptions, Retry-After and the cap it hit; a subscription
// that ends gives its place back. Before the fix every one was served.
func TestSubscribe_CapsPerPrincipalAndInTotal(t *testing.T) {
	n, srv := startServer(t, api.Config{Tokens: readerTokens(t, "r1", "r2"), MaxSubscriptionsPerPrincipal: 2, MaxSubscriptions: 3})
	sub := func(ctx context.Context, who string) answered {
		return getAs(t, ctx, n.url+"/v1/subscribe?from=end", who+"-token-0123456789")
	}
	type answer struct {
		Status     int
		Code       string
		Scope      any
		Limit      any
		RetryAfter string
	}
	answerOf := func(a answered) answer {
		out := answer{Status: a.StatusCode, Code: a.Code, RetryAfter: a.Header.Get("Retry-After")}
		if a.Details != nil {
			out.Scope, out.Limit = a.Details["scope"], a.Details["limit"]
		}
		return out
	}
	ok := answer{Status: 200}
	first, cancelFirst := context.WithCancel(t.Context())
	defer cancelFirst()
	steps := []struct {
		who  string
		ctx  context.Context
		want answer
	}{
		{"r1", first, ok},
		{"r1", t.Context(), ok},
		{"r1", t.Context(), answer{429, "too_many_subscriptions", "principal", float64(2), "5"}},
		{"r2", t.Context(), ok},
		{"r2", t.Context(), answer{429, "too_many_subscriptions", "total", float64(3), "5"}},
	}
	for i, st := range steps {
		if diff := cmp.Diff(st.want, answerOf(sub(st.ctx, st.who))); diff != "" {
			t.Fatalf("step %d, %s subscribes (-want +got):\n%s", i, st.who, diff)
		}
	}
	if got := len(srv.SubscriptionPositions()); got != 3 {
		t.Fatalf("%d subscriptions served, want 3", got)
	}
	// r1 leaves one: its place is free again, for r2 too.
	cancelFirst()
	waitQuota(t, srv, "sse_subscriptions", 2, -1)
	if diff := cmp.Diff(ok, answerOf(sub(t.Context(), "r2"))); diff != "" {
		t.Fatalf("after a subscriber left (-want +got):\n%s", diff)
	}
}

// dialStalled opens a TCP connection to the node with a tiny receive
// buffer, sends request (a raw HTTP/1.1 request) and never reads: a client
// that stopped reading, as an attacker holds one.
func dialStalled(t testing.TB, base, request string) net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, strings.ReplaceAll(request, "HOST", addr)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// appendLarge appends n events of about size bytes each to stream, in
// appends under the API's limits.
func appendLarge(t testing.TB, c *client.Client, stream string, n, size int) {
	t.Helper()
	pad := strings.Repeat("p", size)
	for n > 0 {
		k := min(n, (3<<20)/size)
		evs := make([]wire.EventIn, k)
		for i := range evs {
			evs[i] = wire.EventIn{Type: "Large", Data: json.RawMessage(fmt.Sprintf(`{"pad":%q}`, pad))}
		}
		if _, err := c.Append(t.Context(), stream, events.ExpectAny, evs); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
}

// TestSubscribe_StalledReaderDropped: a subscriber that sends its request
// and never reads is dropped once a write to it has made no progress for
// WriteTimeout: its subscription (goroutine, page, buffers) is released
// and counted, its connection closed; a subscriber that resumes with
// Last-Event-ID gets what it had not received. Before the fix it was
// served forever: the subscription count stayed at 1 and the node held
// its page.
func TestSubscribe_StalledReaderDropped(t *testing.T) {
	n, srv := startServer(t, api.Config{WriteTimeout: 300 * time.Millisecond})
	c := client.New(n.url, "")
	const count = 240 // 240 × 50 KB: more than the socket buffers hold
	appendLarge(t, c, "big", count, 50_000)

	conn := dialStalled(t, n.url, "GET /v1/subscribe?from=0 HTTP/1.1\r\nHost: HOST\r\n\r\n")
	waitQuota(t, srv, "sse_subscriptions", 0, 1)
	if got := len(srv.SubscriptionPositions()); got != 0 {
		t.Fatalf("%d subscriptions still served after the drop", got)
	}
	// The node closed the connection: reading it now gets what the
	// socket buffers held, then EOF, well before the whole log.
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	var last string
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	received := 0
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			last = id
			received++
		}
	}
	if err := sc.Err(); err != nil && !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("reading the dropped connection: %v (the node did not close it?)", err)
	}
	if received >= count {
		t.Fatalf("the stalled subscriber received all %d events: it was not cut", received)
	}
	// It resumes where it was cut, as any reconnecting EventSource does.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/v1/subscribe", nil)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rs := bufio.NewScanner(resp.Body)
	rs.Buffer(make([]byte, 0, 1<<20), 1<<20)
	want := fmt.Sprint(received) // positions start at 0: the next is the count received
	for rs.Scan() {
		if id, ok := strings.CutPrefix(rs.Text(), "id: "); ok {
			if id != want {
				t.Fatalf("resumed at id %s, want %s", id, want)
			}
			return
		}
	}
	t.Fatalf("the resumed subscription sent no event: %v", rs.Err())
}

// TestRead_PagesBoundedInBytes: a page of large events stops at the byte
// budget (about 8 MiB) before its count, says where to go on (next), and
// paging on reads every event once, in order, forward and backward, of the
// global log and of a stream. Before the fix one page of 1,000 events of
// 50 KB was 50 MB built in memory for one request.
func TestRead_PagesBoundedInBytes(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	const count = 200 // 200 × 50 KB = 10 MB
	appendLarge(t, c, "big", count, 50_000)
	first, err := c.ReadAll(t.Context(), events.ReadOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Events) == 0 || len(first.Events) >= count || first.Next == nil || *first.Next != uint64(len(first.Events)) {
		t.Fatalf("first page: %d events, next %v; want a page cut before %d events, next its length", len(first.Events), first.Next, count)
	}
	if b := pageBytes(first.Events); b > 8<<20 {
		t.Fatalf("first page holds %d bytes of events, above 8 MiB", b)
	}
	type pager func(from uint64) (wire.ReadOut, error)
	walk := func(t *testing.T, from uint64, read pager, key func(events.Event) uint64) []uint64 {
		t.Helper()
		var got []uint64
		for range count {
			page, err := read(from)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Events {
				got = append(got, key(e))
			}
			if page.Next == nil {
				return got
			}
			from = *page.Next
		}
		t.Fatal("paging did not end")
		return nil
	}
	seq := func(from, to int) []uint64 { // [from, to] or [from, to] descending
		var out []uint64
		for i := from; ; {
			out = append(out, uint64(i))
			if i == to {
				return out
			}
			if from < to {
				i++
			} else {
				i--
			}
		}
	}
	pos := func(e events.Event) uint64 { return e.Position }
	ver := func(e events.Event) uint64 { return e.Version }
	tests := []struct {
		name string
		from uint64
		read pager
		key  func(events.Event) uint64
		want []uint64
	}{
		{"global forward", 0, func(from uint64) (wire.ReadOut, error) {
			return c.ReadAll(t.Context(), events.ReadOptions{From: from, Limit: events.MaxReadLimit})
		}, pos, seq(0, count-1)},
		{"global backward", events.FromEnd, func(from uint64) (wire.ReadOut, error) {
			return c.ReadAll(t.Context(), events.ReadOptions{From: from, Limit: events.MaxReadLimit, Direction: events.Backward})
		}, pos, seq(count-1, 0)},
		{"stream forward", 0, func(from uint64) (wire.ReadOut, error) {
			return c.ReadStream(t.Context(), "big", events.ReadOptions{From: from, Limit: events.MaxReadLimit})
		}, ver, seq(0, count-1)},
		{"stream backward", events.FromEnd, func(from uint64) (wire.ReadOut, error) {
			return c.ReadStream(t.Context(), "big", events.ReadOptions{From: from, Limit: events.MaxReadLimit, Direction: events.Backward})
		}, ver, seq(count-1, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, walk(t, tc.from, tc.read, tc.key)); diff != "" {
				t.Fatalf("paged (-want +got):\n%s", diff)
			}
		})
	}
}

func pageBytes(evs []events.Event) int {
	n := 0
	for i := range evs {
		n += events.EncodedSize(&evs[i])
	}
	return n
}

// TestProvenRead_PageBounded: a proven page whose events are proven one by
// one (an inclusion proof each) holds at most 1,000 events whatever its
// limit, and says where to go on; a range-proven page (one proof for a
// run) keeps its limit. Before the fix a proven page of 10,000 events
// built 10,000 inclusion proofs in memory.
func TestProvenRead_PageBounded(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	for range 3 {
		evs := make([]wire.EventIn, 500)
		for i := range evs {
			evs[i] = wire.EventIn{Type: "Small"}
		}
		if _, err := c.Append(t.Context(), "small", events.ExpectAny, evs); err != nil {
			t.Fatal(err)
		}
	}
	type page struct {
		Events int
		Next   any
	}
	read := func(query string) page {
		t.Helper()
		resp := getAs(t, t.Context(), n.url+"/v1/all?"+query, "")
		if resp.Code != "" {
			t.Fatalf("%s: %s", query, resp.Code)
		}
		var out struct {
			Events []json.RawMessage `json:"events"`
			Next   *uint64           `json:"next"`
			Proof  *wire.Proof       `json:"proof"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Proof == nil || len(out.Proof.Entries) != len(out.Events) {
			t.Fatalf("%s: %v (proof %v)", query, err, out.Proof != nil)
		}
		p := page{Events: len(out.Events)}
		if out.Next != nil {
			p.Next = *out.Next
		}
		return p
	}
	for _, tc := range []struct {
		query string
		want  page
	}{
		{"limit=1500&prove=1", page{1000, uint64(1000)}},
		{"from=1000&limit=1500&prove=1", page{500, nil}},
		{"limit=1500&prove=range", page{1500, uint64(1500)}},
	} {
		if diff := cmp.Diff(tc.want, read(tc.query)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.query, diff)
		}
	}
}

// TestProvenRead_Capped: proven reads being answered are capped per
// principal and in total (429 too_many_proven_reads); plain reads are
// not. The reads held here are raw connections that asked for a proven
// page and never read it. Before the fix every one was served.
func TestProvenRead_Capped(t *testing.T) {
	n, srv := startServer(t, api.Config{Tokens: readerTokens(t, "r1", "r2", "r3"), MaxProvenReadsPerPrincipal: 1, MaxProvenReads: 2})
	appendLarge(t, client.New(n.url, "writer-token-0123456789"), "big", 200, 50_000)
	// stall sends a proven read and reads only its status line: the node
	// is then writing the answer, which the socket buffers cannot hold,
	// and holds the read until the write timeout.
	stall := func(who string) {
		conn := dialStalled(t, n.url, "GET /v1/all?limit=1000&prove=range HTTP/1.1\r\nHost: HOST\r\nAuthorization: Bearer "+who+"-token-0123456789\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		line, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("%s's stalled proven read: %q %v", who, line, err)
		}
	}
	stall("r1")
	if a := getAs(t, t.Context(), n.url+"/v1/all?limit=1&prove=1", "r1-token-0123456789"); a.Code != "too_many_proven_reads" || a.Details["scope"] != "principal" {
		t.Fatalf("r1's second proven read: %d %q %v, want too_many_proven_reads for the principal", a.StatusCode, a.Code, a.Details)
	}
	stall("r2")
	a := getAs(t, t.Context(), n.url+"/v1/all?limit=1&prove=1", "r3-token-0123456789")
	if a.Code != "too_many_proven_reads" || a.StatusCode != http.StatusTooManyRequests || a.Details["scope"] != "total" || a.Header.Get("Retry-After") == "" {
		t.Fatalf("r3's proven read on a full node: %d %q %v, Retry-After %q", a.StatusCode, a.Code, a.Details, a.Header.Get("Retry-After"))
	}
	if a := getAs(t, t.Context(), n.url+"/v1/all?limit=1", "r3-token-0123456789"); a.Code != "" {
		t.Fatalf("r3's plain read: %q, want it served", a.Code)
	}
	if held, _ := quota(t, srv, "proven_reads"); held != 2 {
		t.Fatalf("%d proven reads held, want the 2 stalled", held)
	}
}

// TestConfig_CapsChecked: caps that cannot hold are refused at New, every
// problem at once, naming the fields.
func TestConfig_CapsChecked(t *testing.T) {
	_, err := api.New(api.Config{Addr: "127.0.0.1:0", MaxSubscriptions: 4, MaxSubscriptionsPerPrincipal: 8, MaxProvenReads: -1}, nil)
	if err == nil {
		t.Fatal("caps that cannot hold were accepted")
	}
	for _, want := range []string{"MaxSubscriptionsPerPrincipal 8 is above MaxSubscriptions 4", "MaxProvenReads -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}
	if _, err := api.New(api.Config{Addr: "127.0.0.1:0", MaxSubscriptions: 8, MaxSubscriptionsPerPrincipal: 8}, nil); err != nil {
		t.Fatalf("caps that hold: %v", err)
	}
}

// TestReadEntries_LargeEventsChunkedInBytes: the stored-bytes read copies
// at most about 1 MiB out of the store at a time (4,096 events of 64 KiB
// were 256 MiB held for one reader); over a log of large events it still
// streams every event once, in order, as stored.
func TestReadEntries_LargeEventsChunkedInBytes(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	const count = 100 // 100 × 50 KB: five chunks of 1 MiB
	appendLarge(t, c, "big", count, 50_000)
	stored, err := n.store.ReadAll(t.Context(), events.ReadOptions{Limit: count})
	if err != nil || len(stored) != count {
		t.Fatalf("the store: %d events, %v", len(stored), err)
	}
	var got []uint64
	next, err := c.ReadEntries(t.Context(), 0, 0, func(raw []byte, e events.Event) error {
		if e.Position >= count || events.LeafHash(raw) != stored[e.Position].LeafHash {
			return fmt.Errorf("position %d: the bytes are not the stored event's", e.Position)
		}
		got = append(got, e.Position)
		return nil
	})
	if err != nil || next != count {
		t.Fatalf("read entries: next %d, %v", next, err)
	}
	want := make([]uint64, count)
	for i := range want {
		want[i] = uint64(i)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
