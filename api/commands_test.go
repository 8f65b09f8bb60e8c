package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/projections/pebblestore"
	"github.com/greffe/greffe/wire"
)

var cmdT0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// domainNode is a real store, the commands handler (over log, which may
// wrap the store) and the projections, behind a real HTTP server.
func domainNode(t *testing.T, tokens *api.Tokens, wrap func(*pebblelog.Store) commands.Log) (string, *pebblelog.Store) {
	t.Helper()
	s, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	var log commands.Log = s
	if wrap != nil {
		log = wrap(s)
	}
	clock := commands.NewManualClock(cmdT0)
	h, err := commands.New(commands.Config{Log: log, Clock: clock.Now, SetClock: clock.Set, MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	set, err := projections.Open(projections.Config{Store: rowStore(t), Source: s, Clock: clock.Now, Env: projections.Env{Policy: h.Policy()}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Tokens: tokens}, s)
	if err != nil {
		t.Fatal(err)
	}
	srv.MountCommands(h)
	srv.MountProjections(set)
	return serve(t, srv, set.Close, s.Close), s
}

func send(t *testing.T, base, token, body string) (int, wire.ErrorBody, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/commands", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb wire.ErrorBody
	_ = json.Unmarshal(b, &eb)
	return resp.StatusCode, eb, resp.Header
}

func grantBody(id, approvalID string) string {
	d, _ := json.Marshal(aggregates.GrantApproval{ApprovalID: aggregates.ID(approvalID), Approver: "owner", Action: aggregates.ActionStartup,
		Subject: "provider-p", Uses: 1, ExpiresAt: cmdT0.Add(time.Hour)})
	b, _ := json.Marshal(wire.CommandIn{Command: "GrantApproval", ID: id, Data: d})
	return string(b)
}

// conflicting wraps the real store: before each append, another event
// lands on the approval stream the command reads.
type conflicting struct{ *pebblelog.Store }

func (c conflicting) Append(ctx context.Context, r events.AppendRequest) (events.Outcome, error) {
	if _, err := c.Store.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: "approval-race", Events: []events.Proposed{{
		ID: uuid.New(), Type: aggregates.TypeApprovalRevoked, Data: json.RawMessage(`{"approval_id":"race","reason":"noise","at":"2026-03-01T09:00:00Z"}`),
		Metadata: json.RawMessage(`{}`)}}}}}); err != nil {
		return events.Outcome{}, err
	}
	return c.Store.Append(ctx, r)
}

// TestCommands_ErrorClasses: one answer of each class of POST
// /v1/commands: 200, 400 with the JSON path, 422 with the gate's code and
// details, 409 for a reused id and for a conflict that outlived the
// retries.
func TestCommands_ErrorClasses(t *testing.T) {
	base, _ := domainNode(t, nil, nil)
	id := uuid.NewString()
	status, _, hdr := send(t, base, "", grantBody(id, "a1"))
	if status != http.StatusOK || hdr.Get("Greffe-Position") != "1" {
		t.Fatalf("grant: %d, position %q", status, hdr.Get("Greffe-Position"))
	}
	type answer struct {
		Status      int
		Code, Field string
	}
	for _, tc := range []struct {
		name string
		body string
		want answer
	}{
		{"unknown field in data", `{"command":"GrantApproval","id":"` + uuid.NewString() + `","data":{"approval_id":"x","uses":1,"extra":true}}`,
			answer{400, commands.CodeInvalidCommand, "data.extra"}},
		{"wrong type deep in data", `{"command":"SubmitMission","id":"` + uuid.NewString() + `","data":{"mission_id":"m","acceptance_checks":[{"id":"c1","argv":"go test"}]}}`,
			answer{400, commands.CodeInvalidCommand, "data.acceptance_checks[0].argv"}},
		{"unknown field in the envelope", `{"command":"GrantApproval","id":"` + uuid.NewString() + `","dta":{}}`, answer{400, events.CodeUnknownField, "dta"}},
		{"no id", `{"command":"GrantApproval","data":{}}`, answer{400, commands.CodeInvalidCommandID, "id"}},
		{"refused by a gate", grantBody(uuid.NewString(), "a1"), answer{422, aggregates.CodeApprovalExists, ""}},
		{"a reused command id", grantBody(id, "a2"), answer{409, commands.CodeCommandIDReused, ""}},
		{"a re-sent command", grantBody(id, "a1"), answer{200, "", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, eb, _ := send(t, base, "", tc.body)
			got := answer{Status: status}
			if eb.Error != nil {
				got.Code, got.Field = eb.Error.Code, eb.Error.Field
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got.Status == 422 && eb.Error.Details["approval_id"] != "a1" {
				t.Errorf("refusal details %v", eb.Error.Details)
			}
		})
	}

	racy, _ := domainNode(t, nil, func(s *pebblelog.Store) commands.Log { return conflicting{s} })
	status, eb, _ := send(t, racy, "", grantBody(uuid.NewString(), "race"))
	if status != http.StatusConflict || eb.Error == nil || eb.Error.Code != commands.CodeConcurrencyConflict {
		t.Fatalf("a conflict through every retry: %d %+v", status, eb.Error)
	}
}

// TestCommands_Roles: the catalogue's rule of who sends what, over HTTP: a
// writer sends a writer's command but no approval (issue #20: before it,
// a writer granted itself any approval), an approver the approvals, an
// executor only its own commands, readers none; every event's actor is
// the token's name, and a refused role is recorded (403 role_not_allowed).
func TestCommands_Roles(t *testing.T) {
	tokens, err := api.NewTokens([]api.Token{
		{Name: "alice", Role: api.RoleWriter, Token: "writer-token-0123456789"},
		{Name: "owner", Role: api.RoleApprover, Token: "approver-token-0123456789"},
		{Name: "gpu1", Role: api.RoleExecutor, Token: "executor-token-0123456789"},
		{Name: "audit", Role: api.RoleReader, Token: "reader-token-0123456789"},
	})
	if err != nil {
		t.Fatal(err)
	}
	base, store := domainNode(t, tokens, nil)
	claim := `{"command":"ClaimMeasurement","id":"` + uuid.NewString() + `","data":{"measurement_id":"m1","executor_id":"gpu1","lease_until":"2026-03-01T09:01:00Z"}}`
	probe := `{"command":"RequestScheduledProbe","id":"` + uuid.NewString() + `","data":{"provider":"p","executor_id":"gpu1","measurement_id":"m2"}}`
	declare := `{"command":"DeclareProvider","id":"` + uuid.NewString() + `","data":{"name":"p","kind":"local","profile":"local_ollama"}}`
	for _, tc := range []struct {
		name, token, body string
		status            int
		code              string
	}{
		{"writer", "writer-token-0123456789", declare, 200, ""},
		{"writer grants", "writer-token-0123456789", grantBody(uuid.NewString(), "w0"), 403, aggregates.CodeRoleNotAllowed},
		{"approver", "approver-token-0123456789", grantBody(uuid.NewString(), "w1"), 200, ""},
		{"executor sends a writer's command", "executor-token-0123456789", grantBody(uuid.NewString(), "w2"), 403, aggregates.CodeRoleNotAllowed},
		{"executor sends its own command", "executor-token-0123456789", claim, 422, aggregates.CodeMeasurementUnknown},
		// An executor asks for its schedules' due probes itself
		// (executor/schedule.go); with no schedule approved, a gate,
		// not the role, refuses it.
		{"executor asks for a scheduled probe", "executor-token-0123456789", probe, 422, aggregates.CodeScheduleUnknown},
		{"reader", "reader-token-0123456789", grantBody(uuid.NewString(), "w3"), 403, wire.CodeForbidden},
		{"nobody", "", grantBody(uuid.NewString(), "w4"), 401, wire.CodeUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, eb, _ := send(t, base, tc.token, tc.body)
			code := ""
			if eb.Error != nil {
				code = eb.Error.Code
			}
			if status != tc.status || code != tc.code {
				t.Errorf("got %d %s, want %d %s", status, code, tc.status, tc.code)
			}
		})
	}
	evs, err := store.ReadStream(t.Context(), "approval-w1", events.ReadOptions{})
	if err != nil || len(evs) != 1 || evs[0].Actor != "owner" {
		t.Fatalf("actor of the approver's event: %v %v", evs, err)
	}
	if _, err := store.ReadStream(t.Context(), "approval-w0", events.ReadOptions{}); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("the writer's grant: %v", err)
	}
	refusals, err := store.ReadStream(t.Context(), "refusals", events.ReadOptions{})
	if err != nil || len(refusals) != 4 || refusals[0].Actor != "alice" {
		t.Fatalf("recorded refusals: %d %v", len(refusals), err)
	}
}

// TestProjections_Routes: the list with positions and lag, one projection
// live (waiting for the caller's own position), as of a past position and
// at a time, and the errors of the routes.
func TestProjections_Routes(t *testing.T) {
	base, _ := domainNode(t, nil, nil)
	c := client.New(base, "")
	var last wire.CommandOut
	for _, a := range []string{"a1", "a2"} {
		var err error
		d, _ := json.Marshal(aggregates.GrantApproval{ApprovalID: aggregates.ID(a), Approver: "owner", Action: aggregates.ActionStartup, Subject: "provider-p",
			Uses: 1, ExpiresAt: cmdT0.Add(time.Hour)})
		if last, err = c.Command(t.Context(), wire.CommandIn{Command: "GrantApproval", ID: uuid.NewString(), Data: d}); err != nil {
			t.Fatal(err)
		}
	}
	rows := func(q client.ProjectionQuery) (projections.Output, []projections.ApprovalRow) {
		t.Helper()
		b, err := c.Projection(t.Context(), "approvals", q)
		if err != nil {
			t.Fatal(err)
		}
		var out projections.Output
		var rs []projections.ApprovalRow
		out.Rows = &rs
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out, rs
	}
	out, rs := rows(client.ProjectionQuery{MinPosition: last.Position})
	if out.Position != 2 || len(rs) != 2 || rs[0].Status != aggregates.ApprovalStatusActive {
		t.Errorf("live: position %d, rows %+v", out.Position, rs)
	}
	one := uint64(1)
	if out, rs = rows(client.ProjectionQuery{At: &one}); out.Position != 1 || len(rs) != 1 {
		t.Errorf("as of 1: position %d, %d rows", out.Position, len(rs))
	}
	if _, rs = rows(client.ProjectionQuery{Time: cmdT0.Add(2 * time.Hour), Key: "a2"}); len(rs) != 1 || rs[0].Status != aggregates.ApprovalStatusExpired {
		t.Errorf("two hours later: %+v", rs)
	}
	list, err := c.Projections(t.Context())
	if err != nil || len(list.Projections) != len(projections.Names()) || list.Head != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	for _, tc := range []struct {
		path string
		code string
	}{
		{"/v1/projections/nope", projections.CodeUnknownProjection},
		{"/v1/projections/approvals?at=yesterday", wire.CodeInvalidQuery},
		{"/v1/projections/approvals?at=99", projections.CodePositionBeyondHead},
		{"/v1/projections/approvals?min_position=x", wire.CodeInvalidQuery},
	} {
		_, err := c.Get(t.Context(), tc.path)
		if client.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.path, err, tc.code)
		}
	}
	if b, err := c.Policy(t.Context()); err != nil || !strings.Contains(string(b), `"probe_freshness":"10m0s"`) {
		t.Errorf("policy: %s %v", b, err)
	}
}

// BenchmarkCommands sends GrantApproval commands over HTTP from 16
// concurrent clients, each on its own approvals (distinct aggregates), to
// a real store fsyncing every acknowledged append. Target (issue #4):
// 10,000 commands/s.
//
//	go test ./api -run '^$' -bench Commands -benchtime 20000x
func BenchmarkCommands(b *testing.B) {
	base, store := benchDomainNode(b)
	c := client.New(base, "")
	data, _ := json.Marshal(aggregates.GrantApproval{Approver: "owner", Action: aggregates.ActionStartup, Subject: "provider-p", Uses: 1,
		ExpiresAt: cmdT0.Add(time.Hour)})
	tmpl := string(data)
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			d := strings.Replace(tmpl, `"approval_id":""`, `"approval_id":"bench-`+strconv.FormatInt(i, 10)+`"`, 1)
			if _, err := c.Command(context.Background(), wire.CommandIn{Command: "GrantApproval", ID: uuid.NewString(), Data: json.RawMessage(d)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
	st := store.Stats()
	b.ReportMetric(float64(st.Events)/float64(max(st.Batches, 1)), "events/batch")
}

func benchDomainNode(b *testing.B) (string, *pebblelog.Store) {
	b.Helper()
	s, err := pebblelog.Open(pebblelog.Config{Dir: b.TempDir(), CheckpointInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	h, err := commands.New(commands.Config{Log: s, Clock: commands.NewManualClock(cmdT0).Now})
	if err != nil {
		b.Fatal(err)
	}
	set, err := projections.Open(projections.Config{Store: rowStore(b), Source: s, Env: projections.Env{Policy: h.Policy()}})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0"}, s)
	if err != nil {
		b.Fatal(err)
	}
	srv.MountCommands(h)
	srv.MountProjections(set)
	return serve(b, srv, set.Close, s.Close), s
}

// rowStore opens the projections' Pebble store in a new folder of the test.
func rowStore(t testing.TB) projections.Store {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
