package kurrentgrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// testTimeout bounds every test's waits (subscriptions, reads, appends).
const testTimeout = 30 * time.Second

type fixture struct {
	srv    *Server
	store  *pebblelog.Store
	client *esdb.Client
	addr   string
}

// start runs a store and the gRPC surface on 127.0.0.1:0 and connects the
// official client with esdb://ADDR?tls=false, as a user would.
func start(t *testing.T) *fixture {
	t.Helper()
	st, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Addr: "127.0.0.1:0", Version: "1.2.3"}, st)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	f := &fixture{srv: srv, store: st, addr: addr.String()}
	f.client = connect(t, "esdb://"+f.addr+"?tls=false")
	t.Cleanup(func() {
		f.client.Close()
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		st.Close()
	})
	return f
}

func connect(t *testing.T, url string) *esdb.Client {
	t.Helper()
	cfg, err := esdb.ParseConnectionString(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func jsonEvent(typ string, n int) esdb.EventData {
	return esdb.EventData{EventID: uuid.New(), EventType: typ, ContentType: esdb.ContentTypeJson,
		Data: fmt.Appendf(nil, `{"n":%d}`, n), Metadata: []byte(`{"origin":"test"}`)}
}

// seed appends n events round-robin over the given streams through the store
// and returns them in position order.
func seed(t *testing.T, st *pebblelog.Store, n int, streamNames ...string) []events.Event {
	t.Helper()
	var out []events.Event
	for i := range n {
		o, err := st.Append(t.Context(), events.AppendRequest{Streams: []events.StreamAppend{{
			Stream: streamNames[i%len(streamNames)],
			Events: []events.Proposed{{ID: uuid.New(), Type: "Seeded", Data: fmt.Appendf(nil, `{"i":%d}`, i), Metadata: json.RawMessage(`{}`), CorrelationID: "c-1"}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Events...)
	}
	return out
}

// row is what the tests compare of an event read through the client.
type row struct {
	Stream   string
	Revision uint64
	Position uint64
	Type     string
}

func rowOf(e *esdb.RecordedEvent) row {
	return row{e.StreamID, e.EventNumber, e.Position.Commit, e.EventType}
}

func rowsOf(evs []events.Event) []row {
	var out []row
	for _, e := range evs {
		out = append(out, row{e.Stream, e.Version, e.Position, e.Type})
	}
	return out
}

func collect(t *testing.T, rs *esdb.ReadStream, err error) ([]row, error) {
	t.Helper()
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []row
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rowOf(ev.OriginalEvent()))
	}
}

func errCode(err error) esdb.ErrorCode {
	var e *esdb.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return -1
}

func TestServer_AppendExpectedRevision(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	// "existing" holds revisions 0 and 1 before every case.
	if _, err := f.client.AppendToStream(ctx, "existing", esdb.AppendToStreamOptions{}, jsonEvent("A", 0), jsonEvent("A", 1)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		stream   string
		expected esdb.ExpectedRevision
		wantRev  uint64
		wantErr  string // the client's "wrong expected version" sentence, "" for success
	}{
		{"any on a new stream", "new-any", esdb.Any{}, 0, ""},
		{"no_stream on a new stream", "new-nostream", esdb.NoStream{}, 0, ""},
		{"no_stream on an existing stream", "existing", esdb.NoStream{}, 0, "expecting 'no_stream' but got '1'"},
		{"stream_exists on a new stream", "new-exists", esdb.StreamExists{}, 0, "expecting 'stream_exists' but got 'no_stream'"},
		{"stream_exists on an existing stream", "existing", esdb.StreamExists{}, 2, ""},
		{"exact revision that holds", "existing", esdb.Revision(2), 3, ""},
		{"exact revision that does not hold", "existing", esdb.Revision(1), 0, "expecting '1' but got '3'"},
		{"exact revision on a new stream", "new-exact", esdb.Revision(0), 0, "expecting '0' but got 'no_stream'"},
		{"any on an existing stream", "existing", esdb.Any{}, 4, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.store.Head().Size
			res, err := f.client.AppendToStream(ctx, tc.stream, esdb.AppendToStreamOptions{ExpectedRevision: tc.expected}, jsonEvent("A", 9))
			if tc.wantErr != "" {
				if errCode(err) != esdb.ErrorCodeWrongExpectedVersion || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want wrong expected version %q", err, tc.wantErr)
				}
				if got := f.store.Head().Size; got != before {
					t.Fatalf("head moved from %d to %d on a refused append", before, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := esdb.WriteResult{CommitPosition: before, PreparePosition: before, NextExpectedVersion: tc.wantRev}
			if diff := cmp.Diff(want, *res); diff != "" {
				t.Errorf("write result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServer_AppendIdempotencyAndRefusals(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	ev := jsonEvent("Made", 1)
	first, err := f.client.AppendToStream(ctx, "idem", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, ev)
	if err != nil {
		t.Fatal(err)
	}
	// A retry of the same event (same id, same content) answers with the
	// original revision and writes nothing, even though no_stream no longer
	// holds.
	again, err := f.client.AppendToStream(ctx, "idem", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, ev)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("retry result (-first +retry):\n%s", diff)
	}
	if got := f.store.Head().Size; got != 1 {
		t.Errorf("head = %d after a retry, want 1", got)
	}
	// An append without events only checks the expected revision.
	if res, err := f.client.AppendToStream(ctx, "idem", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(0)}); err != nil || res.NextExpectedVersion != 0 {
		t.Errorf("empty append with a holding revision: %+v, %v", res, err)
	}
	if _, err := f.client.AppendToStream(ctx, "idem", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(5)}); errCode(err) != esdb.ErrorCodeWrongExpectedVersion {
		t.Errorf("empty append with a failing revision: %v", err)
	}

	other := ev
	other.Data = []byte(`{"n":2}`)
	tests := []struct {
		name       string
		stream     string
		event      esdb.EventData
		wantClient esdb.ErrorCode
		wantCode   string
	}{
		{"reserved domain stream", "approval-42", jsonEvent("ApprovalGranted", 1), esdb.ErrorCodeAccessDenied, events.CodeReservedStream},
		// "$" names are KurrentDB's own (issue 13), as they are there.
		{"$all as a stream", "$all", jsonEvent("A", 1), esdb.ErrorCodeAccessDenied, events.CodeReservedStreamName},
		{"a metadata stream", "$$idem", jsonEvent("A", 1), esdb.ErrorCodeAccessDenied, events.CodeReservedStreamName},
		{"same id, other content", "idem", other, esdb.ErrorCodeResourceAlreadyExists, events.CodeDuplicateEventID},
		{"data not a JSON object", "binary", esdb.EventData{EventID: uuid.New(), EventType: "Blob", Data: []byte{0xff, 0x00}}, esdb.ErrorCodeUnknown, events.CodeDataNotObject},
		{"metadata not a JSON object", "meta", esdb.EventData{EventID: uuid.New(), EventType: "M", Data: []byte(`{}`), Metadata: []byte(`[1]`)}, esdb.ErrorCodeUnknown, events.CodeMetadataNotObject},
		{"no event type", "untyped", esdb.EventData{EventID: uuid.New(), Data: []byte(`{}`)}, esdb.ErrorCodeUnknown, events.CodeInvalidEventType},
		{"stream name with a space", "a b", jsonEvent("A", 1), esdb.ErrorCodeUnknown, events.CodeInvalidStreamName},
		// JSON is UTF-8 (issue 13): data and custom metadata are bytes in
		// the protocol, so their text is checked as over HTTP.
		{"data not UTF-8", "text", esdb.EventData{EventID: uuid.New(), EventType: "T", ContentType: esdb.ContentTypeJson, Data: []byte("{\"name\":\"p\xff\"}")}, esdb.ErrorCodeUnknown, events.CodeInvalidUTF8},
		{"data with a lone surrogate", "text", esdb.EventData{EventID: uuid.New(), EventType: "T", ContentType: esdb.ContentTypeJson, Data: []byte(`{"name":"\ud800"}`)}, esdb.ErrorCodeUnknown, events.CodeInvalidUTF8},
		{"metadata not UTF-8", "text", esdb.EventData{EventID: uuid.New(), EventType: "T", Data: []byte(`{}`), Metadata: []byte("{\"$correlationId\":\"\xc0\xaf\"}")}, esdb.ErrorCodeUnknown, events.CodeInvalidUTF8},
		{"stream name not UTF-8", "s\xff", jsonEvent("A", 1), esdb.ErrorCodeUnknown, events.CodeInvalidUTF8},
		// Version-5 ids are the commands' (issue 13): a raw append taking
		// one first would block the command that derives it.
		{"a version-5 id", "squat", esdb.EventData{EventID: uuid.NewSHA1(uuid.New(), []byte("event/0")), EventType: "Squat", Data: []byte(`{}`)}, esdb.ErrorCodeUnknown, events.CodeReservedEventID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.AppendToStream(ctx, tc.stream, esdb.AppendToStreamOptions{}, tc.event)
			if got := errCode(err); got != tc.wantClient {
				t.Errorf("client error code = %d (%v), want %d", got, err, tc.wantClient)
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantCode) {
				t.Errorf("err = %v, want it to carry %s", err, tc.wantCode)
			}
		})
	}
	if got := f.store.Head().Size; got != 1 {
		t.Errorf("head = %d after refusals, want 1", got)
	}
}

// TestProto_RefusesInvalidUTF8Strings checks what the gRPC surface relies
// on for the event type (a "type" entry of the proposed message's
// map<string, string> metadata) and every other string field: the
// protocol's messages are proto3, so decoding refuses a string that is
// not UTF-8 before a handler sees it (the stream name, data and custom
// metadata are bytes, checked by the handler instead).
func TestProto_RefusesInvalidUTF8Strings(t *testing.T) {
	pm := &streams.AppendReq{Content: &streams.AppendReq_ProposedMessage_{ProposedMessage: &streams.AppendReq_ProposedMessage{
		Id:       &shared.UUID{Value: &shared.UUID_String_{String_: uuid.NewString()}},
		Metadata: map[string]string{metaType: "T-MARK", metaContentType: contentTypeJSON},
		Data:     []byte(`{}`),
	}}}
	wire, err := proto.Marshal(pm)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(wire, &streams.AppendReq{}); err != nil {
		t.Fatalf("the valid message does not decode: %v", err)
	}
	// The same bytes with the type's "MARK" turned into invalid UTF-8 of
	// the same length, as a client that skips validation would send them.
	bad := bytes.Replace(wire, []byte("MARK"), []byte("M\xff\xfeK"), 1)
	if bytes.Equal(bad, wire) {
		t.Fatal("marker not found in the encoded message")
	}
	if err := proto.Unmarshal(bad, &streams.AppendReq{}); err == nil {
		t.Fatal("proto.Unmarshal accepted an event type that is not UTF-8")
	}
}

// TestServer_CodeTrailer checks, with a raw gRPC client, that refusals carry
// their stable code in the greffe-code trailer, including the surface's own
// codes (invalid_request, append_only, invalid_filter).
func TestServer_CodeTrailer(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := streams.NewStreamsClient(conn)
	name := &shared.StreamIdentifier{StreamName: []byte("s")}
	readErr := func(req *streams.ReadReq) func(*metadata.MD) error {
		return func(tr *metadata.MD) error {
			rc, err := sc.Read(ctx, req, grpc.Trailer(tr))
			if err != nil {
				return err
			}
			for {
				if _, err := rc.Recv(); err != nil {
					return err
				}
			}
		}
	}
	tests := []struct {
		name     string
		call     func(*metadata.MD) error
		wantGRPC codes.Code
		wantCode string
	}{
		{"read without options", readErr(&streams.ReadReq{}), codes.InvalidArgument, CodeInvalidRequest},
		{"read without count or subscription", readErr(&streams.ReadReq{Options: &streams.ReadReq_Options{
			StreamOption: &streams.ReadReq_Options_Stream{Stream: &streams.ReadReq_Options_StreamOptions{StreamIdentifier: name}},
		}}), codes.InvalidArgument, CodeInvalidRequest},
		{"backwards subscription", readErr(&streams.ReadReq{Options: &streams.ReadReq_Options{
			StreamOption:  &streams.ReadReq_Options_All{All: &streams.ReadReq_Options_AllOptions{AllOption: &streams.ReadReq_Options_AllOptions_Start{}}},
			CountOption:   &streams.ReadReq_Options_Subscription{Subscription: &streams.ReadReq_Options_SubscriptionOptions{}},
			ReadDirection: streams.ReadReq_Options_Backwards,
		}}), codes.InvalidArgument, CodeInvalidRequest},
		{"filter regex that does not compile", readErr(&streams.ReadReq{Options: &streams.ReadReq_Options{
			StreamOption: &streams.ReadReq_Options_All{All: &streams.ReadReq_Options_AllOptions{AllOption: &streams.ReadReq_Options_AllOptions_Start{}}},
			CountOption:  &streams.ReadReq_Options_Count{Count: 10},
			FilterOption: &streams.ReadReq_Options_Filter{Filter: &streams.ReadReq_Options_FilterOptions{
				Filter: &streams.ReadReq_Options_FilterOptions_EventType{EventType: &streams.ReadReq_Options_FilterOptions_Expression{Regex: "("}},
			}},
		}}), codes.InvalidArgument, CodeInvalidFilter},
		{"append starting with an event", func(tr *metadata.MD) error {
			ac, err := sc.Append(ctx, grpc.Trailer(tr))
			if err != nil {
				return err
			}
			if err := ac.Send(&streams.AppendReq{Content: &streams.AppendReq_ProposedMessage_{ProposedMessage: &streams.AppendReq_ProposedMessage{}}}); err != nil {
				return err
			}
			_, err = ac.CloseAndRecv()
			return err
		}, codes.InvalidArgument, CodeInvalidRequest},
		{"append to a reserved stream", func(tr *metadata.MD) error {
			ac, err := sc.Append(ctx, grpc.Trailer(tr))
			if err != nil {
				return err
			}
			if err := ac.Send(&streams.AppendReq{Content: &streams.AppendReq_Options_{Options: &streams.AppendReq_Options{
				StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte("mission-1")}}}}); err != nil {
				return err
			}
			_, err = ac.CloseAndRecv()
			return err
		}, codes.PermissionDenied, events.CodeReservedStream},
		{"delete", func(tr *metadata.MD) error {
			_, err := sc.Delete(ctx, &streams.DeleteReq{}, grpc.Trailer(tr))
			return err
		}, codes.Unimplemented, CodeAppendOnly},
		{"tombstone", func(tr *metadata.MD) error {
			_, err := sc.Tombstone(ctx, &streams.TombstoneReq{}, grpc.Trailer(tr))
			return err
		}, codes.Unimplemented, CodeAppendOnly},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tr metadata.MD
			err := tc.call(&tr)
			if got := status.Code(err); got != tc.wantGRPC {
				t.Errorf("status = %s (%v), want %s", got, err, tc.wantGRPC)
			}
			if diff := cmp.Diff([]string{tc.wantCode}, tr.Get(CodeTrailer)); diff != "" {
				t.Errorf("%s trailer (-want +got):\n%s", CodeTrailer, diff)
			}
		})
	}
}

func TestServer_DeleteAndTombstoneThroughClient(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	if _, err := f.client.DeleteStream(ctx, "s", esdb.DeleteStreamOptions{}); errCode(err) != esdb.ErrorCodeUnsupportedFeature || !strings.Contains(err.Error(), CodeAppendOnly) {
		t.Errorf("delete: %v", err)
	}
	if _, err := f.client.TombstoneStream(ctx, "s", esdb.TombstoneStreamOptions{}); errCode(err) != esdb.ErrorCodeUnsupportedFeature || !strings.Contains(err.Error(), CodeAppendOnly) {
		t.Errorf("tombstone: %v", err)
	}
}

func TestServer_ReadEventFields(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	in := jsonEvent("OrderPlaced", 7)
	in.Metadata = []byte(`{"$correlationId":"corr-9","$causationId":"cause-3"}`)
	if _, err := f.client.AppendToStream(ctx, "orders", esdb.AppendToStreamOptions{}, in); err != nil {
		t.Fatal(err)
	}
	stored, err := f.store.EventByID(ctx, in.EventID)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := f.client.ReadStream(ctx, "orders", esdb.ReadStreamOptions{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	got, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	want := &esdb.RecordedEvent{
		EventID: in.EventID, EventType: "OrderPlaced", ContentType: "application/json", StreamID: "orders",
		EventNumber: 0, Position: esdb.Position{Commit: 0, Prepare: 0},
		CreatedDate: stored.RecordedAt.UTC().Truncate(100 * time.Nanosecond),
		Data:        in.Data, UserMetadata: in.Metadata,
		SystemMetadata: map[string]string{
			"type": "OrderPlaced", "content-type": "application/json",
			"created":               fmt.Sprint(stored.RecordedAt.UnixNano() / 100),
			"greffe-leaf-hash":      fmt.Sprintf("%x", stored.LeafHash),
			"greffe-correlation-id": "corr-9", "greffe-causation-id": "cause-3", "greffe-actor": "anonymous",
		},
	}
	if diff := cmp.Diff(want, got.OriginalEvent()); diff != "" {
		t.Errorf("recorded event (-want +got):\n%s", diff)
	}
	if stored.CorrelationID != "corr-9" || stored.CausationID != "cause-3" {
		t.Errorf("stored correlation/causation = %q/%q, want corr-9/cause-3", stored.CorrelationID, stored.CausationID)
	}
}

func TestServer_Reads(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	// 1100 events over three streams: more than two pages of readPage, so
	// paging is exercised in both directions.
	all := seed(t, f.store, 1100, "a", "b", "c")
	var streamA []events.Event
	for _, e := range all {
		if e.Stream == "a" {
			streamA = append(streamA, e)
		}
	}
	rev := func(evs []events.Event) []events.Event {
		out := append([]events.Event(nil), evs...)
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	tests := []struct {
		name string
		read func() (*esdb.ReadStream, error)
		want []events.Event
	}{
		{"stream forwards from start", func() (*esdb.ReadStream, error) {
			return f.client.ReadStream(ctx, "a", esdb.ReadStreamOptions{}, 1000)
		}, streamA},
		{"stream forwards from a revision, bounded", func() (*esdb.ReadStream, error) {
			return f.client.ReadStream(ctx, "a", esdb.ReadStreamOptions{From: esdb.Revision(5)}, 3)
		}, streamA[5:8]},
		{"stream backwards from end", func() (*esdb.ReadStream, error) {
			return f.client.ReadStream(ctx, "a", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1000)
		}, rev(streamA)},
		{"stream backwards from a revision includes it", func() (*esdb.ReadStream, error) {
			return f.client.ReadStream(ctx, "a", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.Revision(2)}, 10)
		}, rev(streamA[:3])},
		{"stream forwards from end is empty", func() (*esdb.ReadStream, error) {
			return f.client.ReadStream(ctx, "a", esdb.ReadStreamOptions{From: esdb.End{}}, 10)
		}, nil},
		{"$all forwards from start", func() (*esdb.ReadStream, error) {
			return f.client.ReadAll(ctx, esdb.ReadAllOptions{}, 5000)
		}, all},
		{"$all forwards from a position includes it", func() (*esdb.ReadStream, error) {
			return f.client.ReadAll(ctx, esdb.ReadAllOptions{From: esdb.Position{Commit: 600, Prepare: 600}}, 4)
		}, all[600:604]},
		{"$all backwards from end", func() (*esdb.ReadStream, error) {
			return f.client.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 5000)
		}, rev(all)},
		{"$all backwards from a position starts below it", func() (*esdb.ReadStream, error) {
			return f.client.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.Position{Commit: 3, Prepare: 3}}, 10)
		}, rev(all[:3])},
		{"$all backwards from start is empty", func() (*esdb.ReadStream, error) {
			return f.client.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.Start{}}, 10)
		}, nil},
		{"$all forwards from end is empty", func() (*esdb.ReadStream, error) {
			return f.client.ReadAll(ctx, esdb.ReadAllOptions{From: esdb.End{}}, 10)
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := tc.read()
			got, err := collect(t, rs, err)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(rowsOf(tc.want), got); diff != "" {
				t.Errorf("read (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("missing stream", func(t *testing.T) {
		rs, err := f.client.ReadStream(ctx, "nope", esdb.ReadStreamOptions{}, 10)
		_, err = collect(t, rs, err)
		if errCode(err) != esdb.ErrorCodeResourceNotFound {
			t.Errorf("err = %v, want resource not found", err)
		}
	})
}

// subEvent is what a subscription delivered, in order.
type subEvent struct {
	CaughtUp   bool
	Checkpoint uint64
	Row        row
}

// follow reads a subscription until stop says so or the test times out.
func follow(t *testing.T, sub *esdb.Subscription, stop func([]subEvent) bool) []subEvent {
	t.Helper()
	var got []subEvent
	for !stop(got) {
		e := sub.Recv()
		switch {
		case e.SubscriptionDropped != nil:
			t.Fatalf("subscription dropped after %d messages: %v", len(got), e.SubscriptionDropped.Error)
		case e.CaughtUp != nil:
			got = append(got, subEvent{CaughtUp: true})
		case e.CheckPointReached != nil:
			got = append(got, subEvent{Checkpoint: e.CheckPointReached.Commit})
		case e.EventAppeared != nil:
			got = append(got, subEvent{Row: rowOf(e.EventAppeared.OriginalEvent())})
		}
	}
	return got
}

func eventsOnly(got []subEvent) []row {
	var out []row
	for _, g := range got {
		if !g.CaughtUp && g.Checkpoint == 0 {
			out = append(out, g.Row)
		}
	}
	return out
}

func countEvents(n int) func([]subEvent) bool {
	return func(got []subEvent) bool { return len(eventsOnly(got)) >= n }
}

// appendWhile appends n events round-robin over streams from a goroutine
// and returns a wait function that reports the appends' error.
func appendWhile(t *testing.T, f *fixture, n int, streamNames ...string) func() error {
	var wg sync.WaitGroup
	var err error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			if _, e := f.client.AppendToStream(t.Context(), streamNames[i%len(streamNames)], esdb.AppendToStreamOptions{}, jsonEvent("Live", i)); e != nil {
				err = e
				return
			}
		}
	}()
	return func() error { wg.Wait(); return err }
}

func TestServer_SubscribeToStreamWhileAppending(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	seed(t, f.store, 30, "s", "other")
	sub, err := f.client.SubscribeToStream(ctx, "s", esdb.SubscribeToStreamOptions{From: esdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	wait := appendWhile(t, f, 100, "s", "other")
	got := follow(t, sub, countEvents(15+50))
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	// The caught-up marker comes once, after the 15 events that were
	// already there; then live events follow with no gap and no duplicate.
	caught := 0
	for i, g := range got {
		if g.CaughtUp {
			caught++
			if len(eventsOnly(got[:i])) < 15 {
				t.Errorf("caught up after %d events, want at least the 15 already stored", len(eventsOnly(got[:i])))
			}
		}
	}
	if caught != 1 {
		t.Errorf("caught up %d times, want once", caught)
	}
	evs, err := f.store.ReadStream(ctx, "s", events.ReadOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rowsOf(evs), eventsOnly(got)); diff != "" {
		t.Errorf("subscription (-stream +got):\n%s", diff)
	}

	t.Run("after a revision and from end", func(t *testing.T) {
		after, err := f.client.SubscribeToStream(ctx, "s", esdb.SubscribeToStreamOptions{From: esdb.Revision(61)})
		if err != nil {
			t.Fatal(err)
		}
		defer after.Close()
		end, err := f.client.SubscribeToStream(ctx, "s", esdb.SubscribeToStreamOptions{From: esdb.End{}})
		if err != nil {
			t.Fatal(err)
		}
		defer end.Close()
		// Stream s holds revisions 0..64; "after 61" catches up 62..64.
		gotAfter := follow(t, after, func(g []subEvent) bool { return len(g) > 0 && g[len(g)-1].CaughtUp })
		if diff := cmp.Diff(rowsOf(evs[62:]), eventsOnly(gotAfter)); diff != "" {
			t.Errorf("after revision 61 (-want +got):\n%s", diff)
		}
		gotEnd := follow(t, end, func(g []subEvent) bool { return len(g) > 0 && g[len(g)-1].CaughtUp })
		if len(eventsOnly(gotEnd)) != 0 {
			t.Errorf("from end sent %v before caught up", gotEnd)
		}
		res, err := f.client.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{}, jsonEvent("Late", 1))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*esdb.Subscription{after, end} {
			live := eventsOnly(follow(t, s, countEvents(1)))
			if live[0].Revision != res.NextExpectedVersion {
				t.Errorf("live event %+v, want revision %d", live[0], res.NextExpectedVersion)
			}
		}
	})
}

func TestServer_SubscribeToAllWhileAppending(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	seed(t, f.store, 700, "x", "y") // more than one catch-up page
	sub, err := f.client.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: esdb.Start{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	wait := appendWhile(t, f, 150, "x", "y", "z")
	got := follow(t, sub, countEvents(850))
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	all, err := f.store.ReadAll(ctx, events.ReadOptions{Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rowsOf(all), eventsOnly(got)); diff != "" {
		t.Errorf("$all subscription (-log +got):\n%s", diff)
	}
	caught := 0
	for _, g := range got {
		if g.CaughtUp {
			caught++
		}
	}
	if caught != 1 {
		t.Errorf("caught up %d times, want once", caught)
	}

	t.Run("after a position", func(t *testing.T) {
		s, err := f.client.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: esdb.Position{Commit: 845, Prepare: 845}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		got := follow(t, s, countEvents(4))
		if diff := cmp.Diff(rowsOf(all[846:850]), eventsOnly(got)); diff != "" {
			t.Errorf("after position 845 (-want +got):\n%s", diff)
		}
	})

	t.Run("filtered with checkpoints", func(t *testing.T) {
		s, err := f.client.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{
			From: esdb.Start{}, MaxSearchWindow: 100,
			Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"z"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		got := follow(t, s, countEvents(50))
		var want []row
		for _, e := range all {
			if e.Stream == "z" {
				want = append(want, row{e.Stream, e.Version, e.Position, e.Type})
			}
		}
		if diff := cmp.Diff(want, eventsOnly(got)); diff != "" {
			t.Errorf("filtered (-want +got):\n%s", diff)
		}
		var checkpoints []uint64
		for _, g := range got {
			if g.Checkpoint != 0 {
				checkpoints = append(checkpoints, g.Checkpoint)
			}
		}
		if len(checkpoints) < 8 || checkpoints[0] != 99 || checkpoints[1] != 199 {
			t.Errorf("checkpoints %v, want one every 100 events scanned (99, 199, …)", checkpoints)
		}
	})
}

func TestServer_FeaturesAndGossip(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	v, err := f.client.GetServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(esdb.ServerVersion{Major: 1, Minor: 2, Patch: 3}, *v); diff != "" {
		t.Errorf("server version (-want +got):\n%s", diff)
	}
	// Two seeds put the client in cluster mode: it reads gossip, picks the
	// leader it names, and connects there.
	c := connect(t, fmt.Sprintf("esdb://%s,%s?tls=false", f.addr, f.addr))
	defer c.Close()
	if _, err := c.AppendToStream(ctx, "via-gossip", esdb.AppendToStreamOptions{}, jsonEvent("G", 1)); err != nil {
		t.Fatal(err)
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr error
	}{
		{"non-loopback address", Config{Addr: "0.0.0.0:2113"}, ErrInsecure},
		{"version not numeric", Config{Addr: "127.0.0.1:0", Version: "v1-beta"}, ErrInvalidConfig},
		{"address without port", Config{Addr: "127.0.0.1"}, ErrInvalidConfig},
		{"negative stream cap", Config{Addr: "127.0.0.1:0", MaxConcurrentStreams: -1}, ErrInvalidConfig},
		{"negative read cap", Config{Addr: "127.0.0.1:0", MaxReads: -1}, ErrInvalidConfig},
		{"read cap per principal above the total", Config{Addr: "127.0.0.1:0", MaxReads: 4, MaxReadsPerPrincipal: 8}, ErrInvalidConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg, nil); !errors.Is(err, tc.wantErr) {
				t.Errorf("New: %v, want %v", err, tc.wantErr)
			}
		})
	}
	// The client pings every 10 s with or without calls; a stricter policy
	// would answer with GOAWAY and drop idle connections.
	if KeepaliveMinTime > 10*time.Second {
		t.Errorf("KeepaliveMinTime %s is above the client's 10 s pings", KeepaliveMinTime)
	}
}

// TestServer_SubscribeAfterTheMaximum: a subscription "after" position or
// revision 2^64-1 started at that + 1, which overflowed to 0 and replayed
// all of $all or of the stream. 2^64-1 is KurrentDB's End (-1 unsigned,
// StreamPosition.End / Position.End in its older clients): the
// subscription now starts at the end and sends only what comes next.
func TestServer_SubscribeAfterTheMaximum(t *testing.T) {
	f := start(t)
	ctx := ctxT(t)
	seed(t, f.store, 5, "s", "other")
	const max = ^uint64(0)
	all, err := f.client.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: esdb.Position{Commit: max, Prepare: max}})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	stream, err := f.client.SubscribeToStream(ctx, "s", esdb.SubscribeToStreamOptions{From: esdb.Revision(max)})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	caughtUp := func(g []subEvent) bool { return len(g) > 0 && g[len(g)-1].CaughtUp }
	for name, sub := range map[string]*esdb.Subscription{"$all": all, "stream": stream} {
		if got := eventsOnly(follow(t, sub, caughtUp)); len(got) != 0 {
			t.Errorf("%s after 2^64-1 replayed %v before catching up", name, got)
		}
	}
	res, err := f.client.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{}, jsonEvent("Late", 1))
	if err != nil {
		t.Fatal(err)
	}
	want := []row{{Stream: "s", Revision: res.NextExpectedVersion, Position: res.CommitPosition, Type: "Late"}}
	for name, sub := range map[string]*esdb.Subscription{"$all": all, "stream": stream} {
		if diff := cmp.Diff(want, eventsOnly(follow(t, sub, countEvents(1)))); diff != "" {
			t.Errorf("%s after 2^64-1, live (-want +got):\n%s", name, diff)
		}
	}
}
