package api_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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

// testNode is a real store behind a real HTTP server on a loopback port.
type testNode struct {
	store    *pebblelog.Store
	url      string
	verifier note.Verifier
}

func startNode(t testing.TB, tokens *api.Tokens) *testNode {
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
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Tokens: tokens, Verifiers: func() []string { return []string{vkey} }}, s)
	if err != nil {
		t.Fatal(err)
	}
	return &testNode{store: s, url: serve(t, srv, s.Close), verifier: verifier}
}

// serve runs srv on its loopback address until the test ends, then closes
// it, waits for Serve to return and calls closers in order (what srv
// serves: projections, then the store). It returns the base URL.
func serve(t testing.TB, srv *api.Server, closers ...func() error) string {
	t.Helper()
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
		for _, c := range closers {
			_ = c()
		}
	})
	return "http://" + addr.String()
}

// post sends a raw body and returns the status and decoded error code.
func post(t *testing.T, url, body string, header map[string]string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb wire.ErrorBody
	_ = json.Unmarshal(b, &eb)
	code := ""
	if eb.Error != nil {
		code = eb.Error.Code
	}
	return resp.StatusCode, code, b
}

func TestAPI_AppendRefusals(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	if _, err := c.Append(t.Context(), "orders", events.ExpectNoStream, []wire.EventIn{{Type: "A"}}); err != nil {
		t.Fatal(err)
	}
	big := `{"x":"` + strings.Repeat("a", 70000) + `"}`
	huge := `{"events":[` + strings.Repeat(`{"type":"A","data":{"x":"`+strings.Repeat("b", 60000)+`"}},`, 110) + `{"type":"A"}]}`
	tests := []struct {
		name, path, body string
		status           int
		code             string
		field            string
	}{
		{"ok", "/v1/streams/orders", `{"expected_version": 0, "events": [{"type": "B", "data": {"n": 1}}]}`, 200, "", ""},
		{"wrong expected version", "/v1/streams/orders", `{"expected_version": 7, "events": [{"type": "B"}]}`, 409, "wrong_expected_version", ""},
		{"reserved stream", "/v1/streams/approval-1", `{"events": [{"type": "ApprovalGranted"}]}`, 403, "reserved_stream", "stream"},
		{"refusals stream", "/v1/streams/refusals", `{"events": [{"type": "CommandRefused"}]}`, 403, "reserved_stream", "stream"},
		{"reserved in multi", "/v1/append", `{"appends": [{"stream": "ok", "events": [{"type": "A"}]}, {"stream": "mission-9", "events": [{"type": "A"}]}]}`, 403, "reserved_stream", "appends[1].stream"},
		{"malformed json", "/v1/streams/orders", `{"events": [`, 400, "malformed_json", "events"},
		{"unknown field", "/v1/streams/orders", `{"events": [{"type": "A"}], "expected": "any"}`, 400, "unknown_field", "expected"},
		{"unknown nested field", "/v1/streams/orders", `{"events": [{"type": "A", "payload": {}}]}`, 400, "unknown_field", "events[0].payload"},
		{"key in another case", "/v1/streams/orders", `{"events": [{"type": "A", "Data": {"n": 1}}]}`, 400, "unknown_field", "events[0].Data"},
		{"key in another case, multi", "/v1/append", `{"appends": [{"Stream": "ok", "events": [{"type": "A"}]}]}`, 400, "unknown_field", "appends[0].Stream"},
		{"repeated key", "/v1/streams/orders", `{"events": [{"type": "A", "type": "B"}]}`, 400, "malformed_json", "events[0].type"},
		{"wrong type", "/v1/streams/orders", `{"events": [{"type": 5}]}`, 400, "malformed_json", "events[0].type"},
		{"bad expected version", "/v1/streams/orders", `{"expected_version": "maybe", "events": [{"type": "A"}]}`, 400, "invalid_expected_version", "expected_version"},
		{"data not object", "/v1/streams/orders", `{"events": [{"type": "A", "data": [1, 2]}]}`, 400, "data_not_object", "events[0].data"},
		{"bad event id", "/v1/streams/orders", `{"events": [{"id": "nope", "type": "A"}]}`, 400, "invalid_event_id", "events[0].id"},
		{"empty type", "/v1/streams/orders", `{"events": [{"type": ""}]}`, 400, "invalid_event_type", "events[0].type"},
		{"bad stream name", "/v1/streams/a%20b", `{"events": [{"type": "A"}]}`, 400, "invalid_stream_name", "stream"},
		{"no events", "/v1/streams/orders", `{"events": []}`, 400, "empty_append", "events"},
		{"event too large", "/v1/streams/orders", `{"events": [{"type": "A", "data": ` + big + `}]}`, 413, "event_too_large", "events[0]"},
		{"body too large", "/v1/streams/orders", huge, 413, "body_too_large", ""},
		{"trailing data", "/v1/streams/orders", `{"events": [{"type": "A"}]} {}`, 400, "malformed_json", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := n.store.Head()
			status, code, body := post(t, n.url+tc.path, tc.body, nil)
			if status != tc.status || code != tc.code {
				t.Fatalf("status %d code %q, want %d %q; body %s", status, code, tc.status, tc.code, body)
			}
			if tc.code == "" {
				return
			}
			var eb wire.ErrorBody
			if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Message == "" {
				t.Fatalf("error body without a message: %s", body)
			}
			if eb.Error.Field != tc.field {
				t.Fatalf("field %q, want %q", eb.Error.Field, tc.field)
			}
			if after := n.store.Head(); after != before {
				t.Fatalf("a refused append changed the ledger: %+v -> %+v", before, after)
			}
		})
	}
}

func TestAPI_WrongExpectedVersionDetails(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	_, err := c.Append(t.Context(), "s", events.ExpectVersion(3), []wire.EventIn{{Type: "A"}})
	var ae *wire.Error
	if !errors.As(err, &ae) || ae.Status != 409 {
		t.Fatalf("err = %v", err)
	}
	want := map[string]any{"stream": "s", "expected": float64(3), "actual": float64(-1)}
	if diff := cmp.Diff(want, ae.Details); diff != "" {
		t.Fatalf("details (-want +got):\n%s", diff)
	}
}

func TestAPI_IdempotentAppend(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	in := []wire.EventIn{{ID: "8c5d2a3e-8a1f-4c3e-9c1e-0d7b9f6b2a11", Type: "A", Data: json.RawMessage(`{"a":1}`)}}
	first, err := c.Append(t.Context(), "s", events.ExpectNoStream, in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Append(t.Context(), "s", events.ExpectNoStream, in)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Events[0].Position != first.Events[0].Position || n.store.Head().Size != 1 {
		t.Fatalf("retry: %+v (head %d)", again, n.store.Head().Size)
	}
	in[0].Data = json.RawMessage(`{"a":2}`)
	if _, err := c.Append(t.Context(), "s", events.ExpectAny, in); client.CodeOf(err) != events.CodeDuplicateEventID {
		t.Fatalf("same id, other content: %v", err)
	}
}

func TestAPI_ReadsAndPaging(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	for i := range 25 {
		stream := []string{"a", "b"}[i%2]
		if _, err := c.Append(t.Context(), stream, events.ExpectAny, []wire.EventIn{{Type: "T", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.ReadAll(t.Context(), events.ReadOptions{From: 0, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 10 || page.Next == nil || *page.Next != 10 {
		t.Fatalf("page: %d events, next %v", len(page.Events), page.Next)
	}
	back, err := c.ReadStream(t.Context(), "b", events.ReadOptions{Direction: events.Backward, From: events.FromEnd, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, e := range back.Events {
		got = append(got, e.Version)
	}
	if diff := cmp.Diff([]uint64{11, 10, 9}, got); diff != "" {
		t.Fatalf("backward (-want +got):\n%s", diff)
	}
	if string(back.Events[0].Data) != `{"i":23}` {
		t.Fatalf("data %s", back.Events[0].Data)
	}
	e, err := c.Event(t.Context(), page.Events[3].ID.String())
	if err != nil || e.Position != 3 || e.LeafHash != page.Events[3].LeafHash {
		t.Fatalf("by id: %+v %v", e, err)
	}
	for _, tc := range []struct {
		path string
		code string
		want int
	}{
		{"/v1/streams/nope", "not_found", 404},
		{"/v1/events/8c5d2a3e-8a1f-4c3e-9c1e-0d7b9f6b2a11", "not_found", 404},
		{"/v1/events/xyz", "invalid_event_id", 400},
		{"/v1/all?limit=0", "invalid_query", 400},
		{"/v1/all?from=-1", "invalid_query", 400},
		{"/v1/all?direction=sideways", "invalid_query", 400},
		{"/v1/nothing", "not_found", 404},
	} {
		_, err := c.Get(t.Context(), tc.path)
		var ae *wire.Error
		if !errors.As(err, &ae) || ae.Code != tc.code || ae.Status != tc.want {
			t.Fatalf("%s: %v, want %d %s", tc.path, err, tc.want, tc.code)
		}
	}
}

func TestAPI_Checkpoint(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	for range 3 {
		if _, err := c.Append(t.Context(), "s", events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := c.Checkpoint(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(info.VerifierKeys[0])
	if err != nil {
		t.Fatal(err)
	}
	cp, _, err := events.OpenCheckpoint(raw, info.Origin, v)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size != 3 || info.Head.Size != 3 || info.Origin != "greffe/api-test" {
		t.Fatalf("checkpoint %d, info %+v", cp.Size, info)
	}
	past, err := c.Checkpoint(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if cp2, _, err := events.OpenCheckpoint(past, info.Origin, v); err != nil || cp2.Size != 2 {
		t.Fatalf("checkpoint at 2: %v", err)
	}
	if _, err := c.Checkpoint(t.Context(), 9); client.CodeOf(err) != "not_found" {
		t.Fatalf("checkpoint beyond head: %v", err)
	}
}

// TestAPI_SubscribeResumes reads a live SSE stream, drops it, and resumes
// with Last-Event-ID: the resumed stream starts right after the last id.
func TestAPI_SubscribeResumes(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	for range 5 {
		if _, err := c.Append(t.Context(), "sse", events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []uint64
	go func() {
		for range 3 {
			_, _ = c.Append(ctx, "sse", events.ExpectAny, []wire.EventIn{{Type: "Live"}})
		}
	}()
	err := c.Subscribe(ctx, 2, events.Filter{}, func(e events.Event) error {
		got = append(got, e.Position)
		if e.Position == 7 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("subscribe: %v", err)
	}
	if diff := cmp.Diff([]uint64{2, 3, 4, 5, 6, 7}, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// Resume with the standard header, as a browser EventSource does.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/v1/subscribe?types=Live", nil)
	req.Header.Set("Last-Event-ID", "5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var ids []string
	for sc.Scan() && len(ids) < 2 {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, id)
		}
	}
	if diff := cmp.Diff([]string{"6", "7"}, ids); diff != "" {
		t.Fatalf("resumed ids (-want +got):\n%s", diff)
	}
}

var errStop = errors.New("stop")

func TestAPI_Auth(t *testing.T) {
	tokens, err := api.NewTokens([]api.Token{
		{Name: "reader", Role: api.RoleReader, Token: "reader-token-0123456789"},
		{Name: "writer", Role: api.RoleWriter, Token: "writer-token-0123456789"},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, tokens)
	body := `{"events": [{"type": "A"}]}`
	tests := []struct {
		name   string
		header map[string]string
		status int
		code   string
	}{
		{"no token", nil, 401, "unauthorized"},
		{"unknown token", map[string]string{"Authorization": "Bearer nope-nope-nope-nope"}, 401, "unauthorized"},
		{"reader may not append", map[string]string{"Authorization": "Bearer reader-token-0123456789"}, 403, "forbidden"},
		{"writer appends", map[string]string{"Authorization": "Bearer writer-token-0123456789"}, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, code, b := post(t, n.url+"/v1/streams/auth", body, tc.header)
			if status != tc.status || code != tc.code {
				t.Fatalf("status %d %q, want %d %q: %s", status, code, tc.status, tc.code, b)
			}
		})
	}
	evs, err := n.store.ReadStream(t.Context(), "auth", events.ReadOptions{})
	if err != nil || len(evs) != 1 || evs[0].Actor != "writer" {
		t.Fatalf("actor not recorded from the token: %+v %v", evs, err)
	}
	if _, err := client.New(n.url, "reader-token-0123456789").Info(t.Context()); err != nil {
		t.Fatalf("reader cannot read: %v", err)
	}
}

func TestAPI_RefusesPublicAddressWithoutTokens(t *testing.T) {
	_, err := api.New(api.Config{Addr: "0.0.0.0:0"}, nil)
	if !errors.Is(err, api.ErrInsecure) {
		t.Fatalf("err = %v, want ErrInsecure", err)
	}
	tokens, _ := api.NewTokens([]api.Token{{Name: "a", Role: api.RoleAdmin, Token: "admin-token-0123456789"}})
	if _, err := api.New(api.Config{Addr: "0.0.0.0:0", Tokens: tokens}, nil); err != nil {
		t.Fatalf("with tokens: %v", err)
	}
	if _, err := api.NewTokens([]api.Token{{Name: "a", Role: "root", Token: "admin-token-0123456789"}}); err == nil {
		t.Fatal("unknown role accepted")
	}
	if _, err := api.NewTokens([]api.Token{{Name: "a", Role: api.RoleAdmin, Token: "short"}}); err == nil {
		t.Fatal("short token accepted")
	}
}
