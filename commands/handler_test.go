package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// owner is the principal of these tests' commands: an admin named as the
// approver their grants state.
var owner = aggregates.Principal{Name: "owner", Role: aggregates.RoleAdmin}

// openStore opens a real Pebble store in a temporary folder.
func openStore(t testing.TB) *pebblelog.Store {
	t.Helper()
	s, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newHandler(t testing.TB, log commands.Log, mod func(*commands.Config)) (*commands.Handler, *commands.ManualClock) {
	t.Helper()
	clock := commands.NewManualClock(t0)
	cfg := commands.Config{Log: log, Clock: clock.Now, SetClock: clock.Set}
	if mod != nil {
		mod(&cfg)
	}
	h, err := commands.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, clock
}

// req builds a request; data is marshalled to JSON.
func req(name string, data any) commands.Request {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	return commands.Request{Command: name, ID: uuid.NewString(), Principal: owner, Data: b}
}

func grant(id, action, subject string, uses int) commands.Request {
	return req("GrantApproval", aggregates.GrantApproval{ApprovalID: aggregates.ID(id), Approver: "owner", Action: aggregates.ApprovalAction(action), Subject: aggregates.ShortText(subject), Uses: aggregates.ApprovalUses(uses), ExpiresAt: t0.Add(24 * time.Hour)})
}

func mustHandle(t testing.TB, h *commands.Handler, r commands.Request) commands.Result {
	t.Helper()
	res, err := h.Handle(context.Background(), r)
	if err != nil {
		t.Fatalf("%s: %v", r.Command, err)
	}
	return res
}

func types(evs []events.Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// TestHandler_Append: the events of a decision carry derived ids, the
// command as causation, its correlation id (the command id by default), the
// principal as actor and the body's actor only as on_behalf_of.
func TestHandler_Append(t *testing.T) {
	s := openStore(t)
	h, _ := newHandler(t, s, nil)
	r := grant("a1", aggregates.ActionStartup, "provider-p", 1)
	r.Actor = "alice"
	res := mustHandle(t, h, r)
	id := uuid.MustParse(r.ID)
	if len(res.Events) != 1 {
		t.Fatalf("events %v", types(res.Events))
	}
	e := res.Events[0]
	type view struct {
		ID                           uuid.UUID
		Stream, Type                 string
		Correlation, Causation, Actr string
		Outcome                      string
		Position                     uint64
		Meta                         commands.Metadata
	}
	var meta commands.Metadata
	if err := json.Unmarshal(e.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	got := view{e.ID, e.Stream, e.Type, e.CorrelationID, e.CausationID, e.Actor, res.Outcome, res.Position, meta}
	want := view{commands.EventID(id, 0), "approval-a1", aggregates.TypeApprovalGranted, r.ID, r.ID, "owner", commands.OutcomeAppended, 1,
		commands.Metadata{Command: "GrantApproval", CommandID: r.ID, CommandDigest: meta.CommandDigest, OnBehalfOf: "alice"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	var d aggregates.ApprovalGranted
	if err := json.Unmarshal(e.Data, &d); err != nil || !d.At.Equal(t0) {
		t.Errorf("the decision's time is %v (%v), want the node clock's %v", d.At, err, t0)
	}
}

// TestHandler_Idempotent: re-sending a command returns the original outcome
// and appends nothing; a refused command is recorded once and answers the
// same refusal; the same id with other data is refused.
func TestHandler_Idempotent(t *testing.T) {
	s := openStore(t)
	h, clock := newHandler(t, s, nil)
	ctx := context.Background()
	g := grant("a1", aggregates.ActionStartup, "provider-p", 1)
	first := mustHandle(t, h, g)
	head := s.Head().Size
	clock.Advance(time.Minute) // a re-send decides at another time: still the original
	again := mustHandle(t, h, g)
	if !again.Duplicate || s.Head().Size != head {
		t.Fatalf("re-send: duplicate=%v, head %d -> %d", again.Duplicate, head, s.Head().Size)
	}
	if diff := cmp.Diff(first.Events, again.Events); diff != "" {
		t.Errorf("re-sent events (-original +re-sent):\n%s", diff)
	}

	// A second grant of the same approval id is refused, and recorded once.
	dup := grant("a1", aggregates.ActionStartup, "provider-p", 1)
	_, err1 := h.Handle(ctx, dup)
	_, err2 := h.Handle(ctx, dup)
	var r1, r2 *commands.RefusedError
	if !errors.As(err1, &r1) || !errors.As(err2, &r2) {
		t.Fatalf("want refusals, got %v and %v", err1, err2)
	}
	if r1.Duplicate || !r2.Duplicate || r1.Refusal.Code != aggregates.CodeApprovalExists {
		t.Errorf("refusals %+v / %+v", r1, r2)
	}
	if diff := cmp.Diff(r1.Refusal, r2.Refusal); diff != "" {
		t.Errorf("re-sent refusal (-first +re-sent):\n%s", diff)
	}
	refusals, err := s.ReadStream(ctx, commands.RefusalsStream, events.ReadOptions{})
	if err != nil || len(refusals) != 1 || refusals[0].ID != commands.RefusalID(uuid.MustParse(dup.ID)) {
		t.Fatalf("refusals stream: %d events, %v", len(refusals), err)
	}

	// The same id with other data is another command: refused, nothing written.
	head = s.Head().Size
	other := grant("a2", aggregates.ActionStartup, "provider-p", 1)
	other.ID = g.ID
	_, err = h.Handle(ctx, other)
	if commandsCode(err) != commands.CodeCommandIDReused || s.Head().Size != head {
		t.Fatalf("reused id: %v (head %d -> %d)", err, head, s.Head().Size)
	}
	otherRefused := grant("a3", aggregates.ActionStartup, "provider-p", 1)
	otherRefused.ID = dup.ID
	if _, err = h.Handle(ctx, otherRefused); commandsCode(err) != commands.CodeCommandIDReused {
		t.Fatalf("reused id of a refused command: %v", err)
	}

	// An event that merely carries a command's derived id outside the
	// domain streams (a raw append) is never taken for its outcome.
	squat := grant("a4", aggregates.ActionStartup, "provider-p", 1)
	if _, err := s.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: "notes", Events: []events.Proposed{{
		ID: commands.EventID(uuid.MustParse(squat.ID), 0), Type: "Note", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(ctx, squat); commandsCode(err) != commands.CodeCommandIDReused {
		t.Fatalf("a squatted id: %v", err)
	}
}

func commandsCode(err error) string { return events.CodeOf(err) }

// TestEventID_Reserved: every id a command derives lies in the space the
// raw append routes refuse (events.IsReservedEventID), so no raw append
// can take it before the command (issue 13); random ids do not.
func TestEventID_Reserved(t *testing.T) {
	for range 100 {
		cmd := uuid.New()
		for _, id := range []uuid.UUID{commands.EventID(cmd, 0), commands.EventID(cmd, 1), commands.EventID(cmd, events.MaxEventsPerAppend-1), commands.RefusalID(cmd)} {
			if !events.IsReservedEventID(id) {
				t.Fatalf("derived id %s (version %d) is not reserved", id, id.Version())
			}
		}
		if id := uuid.New(); events.IsReservedEventID(id) {
			t.Fatalf("random id %s is reserved", id)
		}
	}
}

// capture wraps a real log and keeps every append request.
type capture struct {
	commands.Log
	mu   sync.Mutex
	reqs []events.AppendRequest
}

func (c *capture) Append(ctx context.Context, r events.AppendRequest) (events.Outcome, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
	return c.Log.Append(ctx, r)
}

func (c *capture) last() events.AppendRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reqs[len(c.reqs)-1]
}

type cond struct {
	Stream   string
	Expected string
	Events   int
}

func conds(r events.AppendRequest) []cond {
	var out []cond
	for _, s := range r.Streams {
		out = append(out, cond{s.Stream, s.Expected.String(), len(s.Events)})
	}
	return out
}

// TestHandler_Conditions: every stream a decision read is pinned to the
// exact version it was read at, including streams it only read (a route
// reads its candidates) and the streams a refusal was based on.
func TestHandler_Conditions(t *testing.T) {
	s := openStore(t)
	c := &capture{Log: s}
	h, _ := newHandler(t, c, nil)
	ctx := context.Background()
	for _, r := range []commands.Request{
		req("DeclareProvider", aggregates.DeclareProvider{Name: "p", Kind: aggregates.KindLocal, Profile: "local_ollama", Endpoint: "http://127.0.0.1:11434/v1", ModelTag: "m:1", TaskClasses: []string{"code"}}),
		req("DeclareProviderLimits", aggregates.DeclareProviderLimits{Name: "p", ContextTokens: 8192, OutputTokens: 1024}),
		grant("act", aggregates.ActionActivation, "provider-p", 1),
		req("ActivateProvider", aggregates.ActivateProvider{Name: "p", ApprovalID: "act"}),
	} {
		mustHandle(t, h, r)
	}
	if diff := cmp.Diff([]cond{{"provider-p", "1", 1}, {"approval-act", "0", 1}}, conds(c.last())); diff != "" {
		t.Errorf("activation conditions (-want +got):\n%s", diff)
	}
	signedProbe(t, h, "p", "http://127.0.0.1:11434/v1", "m:1")
	mustHandle(t, h, req("SubmitMission", aggregates.SubmitMission{MissionID: "m1", TaskClass: "code", Mode: aggregates.ModeProposal, DeclaredProvider: "p",
		AllowedFiles: []string{"a.go"}, AcceptanceChecks: []aggregates.AcceptanceCheck{{ID: "c1", Argv: []string{"go", "test"}}}}))
	mustHandle(t, h, req("DecideRoute", aggregates.DecideRoute{MissionID: "m1", Candidates: []string{"q"}}))
	// The mission is read first, then the candidates it names, then its
	// declared provider (known once the mission is loaded).
	want := []cond{{"mission-m1", "0", 1}, {"provider-q", "no_stream", 0}, {"provider-p", "3", 0}}
	if diff := cmp.Diff(want, conds(c.last())); diff != "" {
		t.Errorf("route conditions (-want +got):\n%s", diff)
	}
	_, err := h.Handle(ctx, req("IntegratePatch", aggregates.IntegratePatch{MissionID: "m1", CandidateHash: aggregates.Hex64(hex64("c")), PatchHash: aggregates.Hex64(hex64("p")), ApprovalID: "none"}))
	if events.CodeOf(err) != aggregates.CodeReviewNotAccepted {
		t.Fatalf("integrate: %v", err)
	}
	want = []cond{{"mission-m1", "1", 0}, {"approval-none", "no_stream", 0}, {commands.RefusalsStream, "any", 1}}
	if diff := cmp.Diff(want, conds(c.last())); diff != "" {
		t.Errorf("refusal conditions (-want +got):\n%s", diff)
	}
}

func hex64(seed string) string {
	return fmt.Sprintf("%064x", []byte(seed))[:64]
}

// interfering wraps a real log and, before each append, appends another
// probe to the stream the command reads: every decision is stale by the
// time it is written.
type interfering struct {
	*pebblelog.Store
}

func (l interfering) Append(ctx context.Context, r events.AppendRequest) (events.Outcome, error) {
	p := aggregates.ProbeRecorded{Provider: "p", Kind: aggregates.ProbeDoctor, Outcome: aggregates.ProbeOK, At: t0}
	data, _ := json.Marshal(p)
	if _, err := l.Store.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: "provider-p", Events: []events.Proposed{{
		ID: uuid.New(), Type: aggregates.TypeProbeRecorded, Data: data, Metadata: json.RawMessage(`{}`)}}}}}); err != nil {
		return events.Outcome{}, err
	}
	return l.Store.Append(ctx, r)
}

// TestHandler_ConcurrencyConflict: a stream that changes under every retry
// ends in concurrency_conflict, with nothing of the command written.
func TestHandler_ConcurrencyConflict(t *testing.T) {
	s := openStore(t)
	h, _ := newHandler(t, s, nil)
	mustHandle(t, h, req("DeclareProvider", aggregates.DeclareProvider{Name: "p", Kind: aggregates.KindLocal, Profile: "local_ollama", Endpoint: "http://x", ModelTag: "m:1"}))
	hi, _ := newHandler(t, interfering{s}, func(c *commands.Config) { c.MaxRetries = 3 })
	r := req("RecordProbe", aggregates.RecordProbe{Name: "p", Kind: aggregates.ProbeModels, Outcome: aggregates.ProbeOK, Models: []string{"m:1"}, ObservedBy: "s"})
	_, err := hi.Handle(context.Background(), r)
	ce, _ := events.AsCoded(err)
	if ce == nil || ce.Code != commands.CodeConcurrencyConflict || ce.Kind != events.KindFailed || ce.Details["retries"] != 3 {
		t.Fatalf("want concurrency_conflict after 3 retries, got %v", err)
	}
	if _, err := s.EventByID(context.Background(), commands.EventID(uuid.MustParse(r.ID), 0)); !errors.Is(err, events.ErrNotFound) {
		t.Errorf("the conflicting command wrote its event: %v", err)
	}
}

// TestHandler_ConcurrentClaims: executors racing for one measurement
// request: exactly one claim is appended, every other command is refused
// cleanly (retried, then lease_held) and recorded.
func TestHandler_ConcurrentClaims(t *testing.T) {
	s := openStore(t)
	h, _ := newHandler(t, s, nil)
	const n = 8
	for i := range n {
		x := fmt.Sprintf("x%d", i)
		mustHandle(t, h, grant("reg-"+x, aggregates.ActionActivation, "executor-"+x, 1))
		mustHandle(t, h, req("RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: aggregates.ID(x), Host: "gpu-1", PublicKey: pub(byte(i + 1)), ApprovalID: aggregates.OptionalID("reg-" + x)}))
	}
	mustHandle(t, h, req("RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: "m1", Host: "gpu-1", Argv: []string{"nvidia-smi"},
		Kind: aggregates.MeasurementRun, Timeout: aggregates.PositiveDuration(aggregates.D(time.Minute)), OutputCapBytes: 1024}))
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.Handle(context.Background(), req("ClaimMeasurement", aggregates.ClaimMeasurement{MeasurementID: "m1", ExecutorID: aggregates.ID(fmt.Sprintf("x%d", i)), LeaseUntil: t0.Add(time.Minute)}))
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch events.CodeOf(err) {
		case "":
			won++
		case aggregates.CodeLeaseHeld:
		default:
			t.Errorf("claim %d: %v", i, err)
		}
	}
	evs, err := s.ReadStream(context.Background(), "measurement-m1", events.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refusals, _ := s.ReadStream(context.Background(), commands.RefusalsStream, events.ReadOptions{})
	if diff := cmp.Diff([]string{aggregates.TypeMeasurementRequested, aggregates.TypeMeasurementClaimed}, types(evs)); diff != "" || won != 1 || len(refusals) != n-1 {
		t.Errorf("%d claims won, %d refusals recorded; stream (-want +got):\n%s", won, len(refusals), diff)
	}
}

// TestHandler_Invalid: a malformed command is refused before anything is
// decided, with the JSON path of what is wrong; nothing is written.
func TestHandler_Invalid(t *testing.T) {
	s := openStore(t)
	h, _ := newHandler(t, s, nil)
	sys, err := commands.New(commands.Config{Log: s})
	if err != nil {
		t.Fatal(err)
	}
	good := grant("a1", aggregates.ActionStartup, "provider-p", 1)
	at := t0
	for _, tc := range []struct {
		name  string
		h     *commands.Handler
		mod   func(*commands.Request)
		code  string
		field string
	}{
		{"unknown command", h, func(r *commands.Request) { r.Command = "GrantEverything" }, commands.CodeUnknownCommand, "command"},
		{"no command", h, func(r *commands.Request) { r.Command = "" }, commands.CodeUnknownCommand, "command"},
		{"no id", h, func(r *commands.Request) { r.ID = "" }, commands.CodeInvalidCommandID, "id"},
		{"nil id", h, func(r *commands.Request) { r.ID = uuid.Nil.String() }, commands.CodeInvalidCommandID, "id"},
		{"unknown field", h, func(r *commands.Request) { r.Data = json.RawMessage(`{"approval_id":"a","usez":1}`) }, commands.CodeInvalidCommand, "data.usez"},
		{"wrong type", h, func(r *commands.Request) { r.Data = json.RawMessage(`{"approval_id":"a","uses":"one"}`) }, commands.CodeInvalidCommand, "data.uses"},
		{"shape", h, func(r *commands.Request) {
			r.Data = json.RawMessage(`{"approval_id":"a","approver":"o","action":"startup","subject":"s","uses":0,"expires_at":"2027-01-01T00:00:00Z"}`)
		}, commands.CodeInvalidCommand, "data.uses"},
		{"actor not printable", h, func(r *commands.Request) { r.Actor = "a\x00b" }, commands.CodeInvalidCommand, "actor"},
		// Not text (issue 13): encoding/json would read "\xff" and "\ud800" as U+FFFD.
		{"actor not UTF-8", h, func(r *commands.Request) { r.Actor = "a\xffb" }, events.CodeInvalidUTF8, "actor"},
		{"correlation id not UTF-8", h, func(r *commands.Request) { r.CorrelationID = "\xc0\xaf" }, events.CodeInvalidUTF8, "correlation_id"},
		{"data not UTF-8", h, func(r *commands.Request) { r.Data = json.RawMessage("{\"approval_id\":\"a\xff\"}") }, events.CodeInvalidUTF8, "data.approval_id"},
		{"data lone surrogate", h, func(r *commands.Request) { r.Data = json.RawMessage(`{"approval_id":"\udc00"}`) }, events.CodeInvalidUTF8, "data.approval_id"},
		{"time on the system clock", sys, func(r *commands.Request) { r.At = &at }, commands.CodeCommandTimeNotAllowed, "at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			r.ID = uuid.NewString()
			tc.mod(&r)
			head := s.Head().Size
			_, err := tc.h.Handle(context.Background(), r)
			ie, ok := events.AsCoded(err)
			var re *commands.RefusedError
			if !ok || ie.Kind != events.KindRefused || errors.As(err, &re) {
				t.Fatalf("want a refusal of a malformed command, got %v", err)
			}
			if diff := cmp.Diff([]string{tc.code, tc.field}, []string{ie.Code, ie.Field}); diff != "" {
				t.Errorf("code, field (-want +got):\n%s", diff)
			}
			if s.Head().Size != head {
				t.Errorf("a malformed command wrote %d events", s.Head().Size-head)
			}
		})
	}
}

// TestHandler_CommandTime: on a settable clock, a command's "at" is its
// time, and the clock follows it.
func TestHandler_CommandTime(t *testing.T) {
	s := openStore(t)
	h, clock := newHandler(t, s, nil)
	at := t0.Add(66 * time.Minute)
	r := grant("a1", aggregates.ActionStartup, "provider-p", 1)
	r.At = &at
	res := mustHandle(t, h, r)
	if !res.At.Equal(at) || !clock.Now().Equal(at) {
		t.Errorf("command time %v, clock %v, want %v", res.At, clock.Now(), at)
	}
}

// TestHandler_Unchanged: a decision that appends nothing (a second
// delivery, a repeated declaration) answers unchanged and writes nothing.
func TestHandler_Unchanged(t *testing.T) {
	s := openStore(t)
	h, _ := newHandler(t, s, nil)
	d := aggregates.DeclareProvider{Name: "p", Kind: aggregates.KindLocal, Profile: "local_ollama", Endpoint: "http://x", ModelTag: "m:1"}
	mustHandle(t, h, req("DeclareProvider", d))
	head := s.Head().Size
	res := mustHandle(t, h, req("DeclareProvider", d))
	if res.Outcome != commands.OutcomeUnchanged || len(res.Events) != 0 || res.Position != head || s.Head().Size != head {
		t.Errorf("repeat: %+v, head %d -> %d", res, head, s.Head().Size)
	}
}

// TestHandler_RefusalStands: a command refused once keeps its recorded
// refusal when re-sent, even after the state moved so that it would now
// pass: its outcome was recorded, and is never replayed.
func TestHandler_RefusalStands(t *testing.T) {
	s := openStore(t)
	h, _ := newHandler(t, s, nil)
	ctx := context.Background()
	mustHandle(t, h, req("DeclareProvider", aggregates.DeclareProvider{Name: "p", Kind: aggregates.KindLocal, Profile: "local_ollama", Endpoint: "http://x", ModelTag: "m:1"}))
	mustHandle(t, h, req("DeclareProviderLimits", aggregates.DeclareProviderLimits{Name: "p", ContextTokens: 8192, OutputTokens: 1024}))
	activate := req("ActivateProvider", aggregates.ActivateProvider{Name: "p", ApprovalID: "act"})
	if _, err := h.Handle(ctx, activate); events.CodeOf(err) != aggregates.CodeApprovalMissing {
		t.Fatalf("activation without a grant: %v", err)
	}
	mustHandle(t, h, grant("act", aggregates.ActionActivation, "provider-p", 1))
	head := s.Head().Size
	_, err := h.Handle(ctx, activate)
	var re *commands.RefusedError
	if !errors.As(err, &re) || !re.Duplicate || re.Refusal.Code != aggregates.CodeApprovalMissing || s.Head().Size != head {
		t.Fatalf("re-sent after the grant: %v (head %d -> %d)", err, head, s.Head().Size)
	}
	// The same activation under a new id is a new command, and passes.
	again := activate
	again.ID = uuid.NewString()
	if res := mustHandle(t, h, again); len(res.Events) != 2 {
		t.Fatalf("new command: %v", types(res.Events))
	}
}

// TestHandler_Principal: the principal reaches the deciders. A writer's
// grant is refused for its role and the refusal recorded with the writer
// as actor, nothing else written; an approver's grant records the
// principal beside the stated approver; a request without a principal is
// a caller's bug, refused before anything is read.
func TestHandler_Principal(t *testing.T) {
	s := openStore(t)
	h, _ := newHandler(t, s, nil)
	ctx := context.Background()
	as := func(p aggregates.Principal, r commands.Request) commands.Request { r.Principal = p; return r }
	alice := aggregates.Principal{Name: "alice", Role: aggregates.RoleWriter}
	carol := aggregates.Principal{Name: "carol", Role: aggregates.RoleApprover}
	grantAs := func(p aggregates.Principal, approver string) commands.Request {
		return as(p, req("GrantApproval", aggregates.GrantApproval{ApprovalID: "a1", Approver: aggregates.ShortText(approver), Action: aggregates.ActionStartup,
			Subject: "provider-p", Uses: 1, ExpiresAt: t0.Add(time.Hour)}))
	}
	_, err := h.Handle(ctx, grantAs(alice, "owner"))
	var re *commands.RefusedError
	if !errors.As(err, &re) || re.Refusal.Code != aggregates.CodeRoleNotAllowed || re.Event.Actor != "alice" || re.Event.Stream != commands.RefusalsStream {
		t.Fatalf("a writer's grant: %v", err)
	}
	if head := s.Head().Size; head != 1 {
		t.Fatalf("the log holds %d events after the refusal, want its record only", head)
	}
	res := mustHandle(t, h, grantAs(carol, "carol"))
	var d aggregates.ApprovalGranted
	if len(res.Events) != 1 || json.Unmarshal(res.Events[0].Data, &d) != nil || d.Approver != "carol" || d.Principal != "carol" || res.Events[0].Actor != "carol" {
		t.Fatalf("an approver's grant: %+v", res.Events)
	}
	if _, err := h.Handle(ctx, as(aggregates.Principal{}, req("DeclareProvider", aggregates.DeclareProvider{Name: "p", Kind: aggregates.KindLocal, Profile: "x"}))); err == nil || events.CodeOf(err) != "" {
		t.Fatalf("a request without a principal: %v", err)
	}
	if head := s.Head().Size; head != 2 {
		t.Fatalf("the log holds %d events, want 2", head)
	}
}
