package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

// Bad input found when tried as an attacker would (issue 13): every case is
// refused with a 4xx, a stable code, the field's full path and a sentence,
// and the ledger does not move.

// refusal is what these tests compare of an answer.
type refusal struct {
	Status      int
	Code, Field string
}

// refusalCase is one request and the refusal it must get.
type refusalCase struct {
	name, path, body string
	want             refusal
}

// checkRefusals posts each case to base and checks the refusal, that it
// comes with a sentence, and that head (the ledger's head) did not move.
func checkRefusals(t *testing.T, base string, head func() events.Head, cases []refusalCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := head()
			status, code, body := post(t, base+tc.path, tc.body, nil)
			got := refusal{Status: status, Code: code}
			var eb wire.ErrorBody
			if err := json.Unmarshal(body, &eb); err == nil && eb.Error != nil {
				got.Field = eb.Error.Field
				if tc.want.Code != "" && eb.Error.Message == "" {
					t.Errorf("a refusal without a sentence: %s", body)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s\nbody: %s", diff, body)
			}
			if tc.want.Status != http.StatusOK {
				if after := head(); after != before {
					t.Errorf("a refused request moved the ledger: %+v -> %+v", before, after)
				}
			}
		})
	}
}

// TestAPI_RefusesInvalidUTF8: JSON is UTF-8 (RFC 8259 §8.1). encoding/json
// decodes invalid bytes and unpaired surrogate escapes to U+FFFD, so before
// this the node stored "T\xff" as "T\uFFFD" (and "T\xfe" as the same), and
// kept data's bytes as received. Every string of every body is refused
// with invalid_utf8 and its path, on the fast path of the single-stream
// append as on the slow one.
func TestAPI_RefusesInvalidUTF8(t *testing.T) {
	n := startNode(t, nil)
	bad := func(code, field string) refusal { return refusal{400, code, field} }
	utf8Bad := func(field string) refusal { return bad(events.CodeInvalidUTF8, field) }
	checkRefusals(t, n.url, n.store.Head, []refusalCase{
		{"text is fine", "/v1/streams/s", `{"events":[{"type":"Été ✓","data":{"name":"世界 \ud83d\ude00"},"metadata":{"é":"ü"}}]}`, refusal{Status: 200}},
		{"type", "/v1/streams/s", "{\"events\":[{\"type\":\"T\xff\"}]}", utf8Bad("events[0].type")},
		{"type, second event", "/v1/streams/s", "{\"events\":[{\"type\":\"T\"},{\"type\":\"T\xfe\"}]}", utf8Bad("events[1].type")},
		{"type as a lone surrogate escape", "/v1/streams/s", `{"events":[{"type":"T\ud800"}]}`, utf8Bad("events[0].type")},
		{"id", "/v1/streams/s", "{\"events\":[{\"id\":\"\xc0\xaf\",\"type\":\"T\"}]}", utf8Bad("events[0].id")},
		{"correlation id", "/v1/streams/s", "{\"events\":[{\"type\":\"T\",\"correlation_id\":\"c\xed\xa0\x80\"}]}", utf8Bad("events[0].correlation_id")},
		{"causation id", "/v1/streams/s", "{\"events\":[{\"type\":\"T\",\"causation_id\":\"\x80\"}]}", utf8Bad("events[0].causation_id")},
		{"stream in the body", "/v1/streams/s", "{\"stream\":\"s\xff\",\"events\":[{\"type\":\"T\"}]}", utf8Bad("stream")},
		{"stream in the path", "/v1/streams/s%FF", `{"events":[{"type":"T"}]}`, utf8Bad("stream")},
		{"expected version", "/v1/streams/s", "{\"expected_version\":\"\xff\",\"events\":[{\"type\":\"T\"}]}", utf8Bad("expected_version")},
		{"data value", "/v1/streams/s", "{\"events\":[{\"type\":\"T\",\"data\":{\"name\":\"provider-\xff\"}}]}", utf8Bad("events[0].data.name")},
		{"data value deep", "/v1/streams/s", "{\"events\":[{\"type\":\"T\",\"data\":{\"a\":[1,{\"b\":\"\xf4\x90\x80\x80\"}]}}]}", utf8Bad("events[0].data.a[1].b")},
		{"data key", "/v1/streams/s", "{\"events\":[{\"type\":\"T\",\"data\":{\"ok\":{\"k\xff\":1}}}]}", utf8Bad("events[0].data.ok")},
		{"data lone high surrogate", "/v1/streams/s", `{"events":[{"type":"T","data":{"name":"\ud800"}}]}`, utf8Bad("events[0].data.name")},
		{"data lone low surrogate", "/v1/streams/s", `{"events":[{"type":"T","data":{"name":"x\udc00y"}}]}`, utf8Bad("events[0].data.name")},
		{"metadata value", "/v1/streams/s", "{\"events\":[{\"type\":\"T\",\"metadata\":{\"trace\":\"\xe4\xb8\"}}]}", utf8Bad("events[0].metadata.trace")},
		{"envelope payload type", "/v1/streams/s", "{\"events\":[{\"type\":\"T\",\"envelope\":{\"payloadType\":\"x\xff\",\"signatures\":[{\"keyid\":\"k\",\"sig\":\"AQ==\"}]}}]}", utf8Bad("events[0].envelope.payloadType")},
		{"a key of the body", "/v1/streams/s", "{\"ev\xffents\":[]}", utf8Bad("")},
		{"multi: stream", "/v1/append", "{\"appends\":[{\"stream\":\"a\xff\",\"events\":[{\"type\":\"T\"}]}]}", utf8Bad("appends[0].stream")},
		{"multi: data", "/v1/append", "{\"appends\":[{\"stream\":\"a\",\"events\":[{\"type\":\"T\"},{\"type\":\"T\",\"data\":{\"x\":\"\xff\"}}]}]}", utf8Bad("appends[0].events[1].data.x")},
		{"multi: metadata surrogate", "/v1/append", `{"appends":[{"stream":"a","events":[{"type":"T","metadata":{"x":"\udfff"}}]}]}`, utf8Bad("appends[0].events[0].metadata.x")},
		// Not JSON is still malformed_json, whatever its bytes (with the
		// path of the value it is in: it had none).
		{"syntax error with a bad byte", "/v1/streams/s", "{\"events\":[{\"type\":\xff}]}", bad("malformed_json", "events[0].type")},
	})
}

// TestCommands_RefuseInvalidUTF8: the same through POST /v1/commands, in the
// envelope and in the command's data. Two providers named "p\xff" and
// "p\xfe" were both stored as "p\uFFFD": one provider.
func TestCommands_RefuseInvalidUTF8(t *testing.T) {
	base, store := domainNode(t, nil, nil)
	declare := func(name string) string {
		return `{"command":"DeclareProvider","id":"` + uuid.NewString() + `","data":{"name":"` + name + `","kind":"local"}}`
	}
	utf8Bad := func(field string) refusal { return refusal{400, events.CodeInvalidUTF8, field} }
	checkRefusals(t, base, store.Head, []refusalCase{
		{"provider name", "/v1/commands", declare("p\xff"), utf8Bad("data.name")},
		{"another provider name", "/v1/commands", declare("p\xfe"), utf8Bad("data.name")},
		{"provider name as a lone surrogate", "/v1/commands", declare(`p\ud800`), utf8Bad("data.name")},
		{"command name", "/v1/commands", `{"command":"Declare` + "\xff" + `","id":"` + uuid.NewString() + `"}`, utf8Bad("command")},
		{"actor", "/v1/commands", `{"command":"DeclareProvider","id":"` + uuid.NewString() + `","actor":"bob` + "\xff" + `","data":{}}`, utf8Bad("actor")},
		{"correlation id", "/v1/commands", `{"command":"DeclareProvider","id":"` + uuid.NewString() + `","correlation_id":"\udc00","data":{}}`, utf8Bad("correlation_id")},
		{"a key deep in data", "/v1/commands", `{"command":"SubmitMission","id":"` + uuid.NewString() + `","data":{"mission_id":"m","acceptance_checks":[{"id":"c1","a` + "\xff" + `":1}]}}`, utf8Bad("data.acceptance_checks[0]")},
	})
}

// TestClient_RefusesInvalidUTF8: the Go client encodes with json.Marshal,
// which sends a string that is not UTF-8 as U+FFFD, so the node never saw
// the bad bytes and stored the replacement. The client refuses such
// strings before sending, with the code and path the node would give;
// data, sent as it is, is refused by the node.
func TestClient_RefusesInvalidUTF8(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	ev := func(e wire.EventIn) []wire.EventIn { return []wire.EventIn{{Type: "ok"}, e} }
	tests := []struct {
		name  string
		send  func() error
		field string
	}{
		{"type", func() error {
			_, err := c.Append(t.Context(), "s", events.ExpectAny, ev(wire.EventIn{Type: "T\xff"}))
			return err
		}, "events[1].type"},
		{"id", func() error {
			_, err := c.Append(t.Context(), "s", events.ExpectAny, ev(wire.EventIn{ID: "\xfe", Type: "T"}))
			return err
		}, "events[1].id"},
		{"correlation id", func() error {
			_, err := c.Append(t.Context(), "s", events.ExpectAny, ev(wire.EventIn{Type: "T", CorrelationID: "\xc0\xaf"}))
			return err
		}, "events[1].correlation_id"},
		{"causation id", func() error {
			_, err := c.Append(t.Context(), "s", events.ExpectAny, ev(wire.EventIn{Type: "T", CausationID: "\x80"}))
			return err
		}, "events[1].causation_id"},
		{"envelope key id", func() error {
			_, err := c.Append(t.Context(), "s", events.ExpectAny, ev(wire.EventIn{Type: "T", Envelope: &events.Envelope{PayloadType: "p",
				Signatures: []events.Signature{{KeyID: "k\xff", Sig: []byte{1}}}}}))
			return err
		}, "events[1].envelope.signatures[0].keyid"},
		{"data", func() error {
			_, err := c.Append(t.Context(), "s", events.ExpectAny, ev(wire.EventIn{Type: "T", Data: json.RawMessage("{\"x\":\"\xff\"}")}))
			return err
		}, "events[1].data.x"},
		{"stream", func() error {
			_, err := c.Append(t.Context(), "s\xff", events.ExpectAny, ev(wire.EventIn{Type: "T"}))
			return err
		}, "stream"},
		{"multi: stream", func() error {
			_, err := c.AppendMulti(t.Context(), wire.AppendIn{Appends: []wire.StreamAppendIn{{Stream: "a", Events: ev(wire.EventIn{Type: "T"})}, {Stream: "b\xff", Events: ev(wire.EventIn{Type: "T"})}}})
			return err
		}, "appends[1].stream"},
		{"multi: type", func() error {
			_, err := c.AppendMulti(t.Context(), wire.AppendIn{Appends: []wire.StreamAppendIn{{Stream: "a", Events: ev(wire.EventIn{Type: "T\xff"})}}})
			return err
		}, "appends[0].events[1].type"},
		{"command name", func() error {
			_, err := c.Command(t.Context(), wire.CommandIn{Command: "Grant\xff", ID: uuid.NewString()})
			return err
		}, "command"},
		{"command actor", func() error {
			_, err := c.Command(t.Context(), wire.CommandIn{Command: "GrantApproval", ID: uuid.NewString(), Actor: "\xff"})
			return err
		}, "actor"},
		{"command correlation id", func() error {
			_, err := c.Command(t.Context(), wire.CommandIn{Command: "GrantApproval", ID: uuid.NewString(), CorrelationID: "\xfe"})
			return err
		}, "correlation_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := n.store.Head()
			err := tc.send()
			var ae *wire.Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want a *wire.Error", err)
			}
			if diff := cmp.Diff(refusal{400, events.CodeInvalidUTF8, tc.field}, refusal{ae.Status, ae.Code, ae.Field}); diff != "" {
				t.Errorf("(-want +got):\n%s\n%v", diff, err)
			}
			if after := n.store.Head(); after != before {
				t.Errorf("a refused append moved the ledger: %+v -> %+v", before, after)
			}
		})
	}
}

// TestAPI_FieldPaths: unknown_field names the key by its full path (it gave
// the key alone: "actor" for events[0].actor, "priority" for
// appends[0].priority), and expected_version errors carry the field and
// their own code (they had neither), in both append bodies.
func TestAPI_FieldPaths(t *testing.T) {
	n := startNode(t, nil)
	unknown := func(field string) refusal { return refusal{400, events.CodeUnknownField, field} }
	badVersion := func(field string) refusal { return refusal{400, events.CodeInvalidExpectedVersion, field} }
	cases := []refusalCase{
		{"unknown at the top", "/v1/streams/s", `{"events":[{"type":"A"}],"expected":"any"}`, unknown("expected")},
		{"unknown in an event", "/v1/streams/s", `{"events":[{"type":"A","actor":"mallory"}]}`, unknown("events[0].actor")},
		{"unknown in the third event", "/v1/streams/s", `{"events":[{"type":"A"},{"type":"A"},{"type":"A","payload":{}}]}`, unknown("events[2].payload")},
		{"unknown in an envelope", "/v1/streams/s", `{"events":[{"type":"A","envelope":{"payloadType":"p","signatures":[{"keyid":"k","sig":"AQ==","alg":"x"}]}}]}`, unknown("events[0].envelope.signatures[0].alg")},
		{"unknown in an append entry", "/v1/append", `{"appends":[{"stream":"a","priority":1,"events":[{"type":"A"}]}]}`, unknown("appends[0].priority")},
		{"unknown in a multi event", "/v1/append", `{"appends":[{"stream":"a","events":[{"type":"A"}]},{"stream":"b","events":[{"type":"A","actor":"x"}]}]}`, unknown("appends[1].events[0].actor")},
		{"wrong type keeps its index", "/v1/streams/s", `{"events":[{"type":"A"},{"type":5}]}`, refusal{400, events.CodeMalformedJSON, "events[1].type"}},
		{"multi: wrong type keeps its index", "/v1/append", `{"appends":[{"stream":"a","events":[{"type":"A"}]},{"stream":7}]}`, refusal{400, events.CodeMalformedJSON, "appends[1].stream"}},
		// A name given twice is refused anywhere, data and metadata
		// included (issue #14: the decoder is encoding/json/v2; readers
		// disagree on which of two names wins), on the fast path too.
		{"a name twice in data", "/v1/streams/s", `{"events":[{"type":"A","data":{"a":1,"a":2}}]}`, refusal{400, events.CodeMalformedJSON, "events[0].data.a"}},
		{"a name twice deep in metadata", "/v1/streams/s", `{"events":[{"type":"A","metadata":{"m":[{"k":1,"k":2}]}}]}`, refusal{400, events.CodeMalformedJSON, "events[0].metadata.m[0].k"}},
		{"multi: a name twice in data", "/v1/append", `{"appends":[{"stream":"a","events":[{"type":"A"},{"type":"A","data":{"x":{"y":1,"y":2}}}]}]}`, refusal{400, events.CodeMalformedJSON, "appends[0].events[1].data.x.y"}},
		{"one name in sibling objects", "/v1/streams/s", `{"events":[{"type":"A","data":{"x":{"a":1},"y":{"a":2}}}]}`, refusal{Status: 200}},
		// A syntax error is named by the value it is in.
		{"syntax error in an event", "/v1/streams/s", `{"events":[{"type":"A"},{"type":}]}`, refusal{400, events.CodeMalformedJSON, "events[1].type"}},
	}
	for _, v := range []string{`1e999`, `18446744073709551616`, `18446744073709551615`, `4611686018427387905`, `-1`, `1.5`, `1e3`, `true`, `null`, `{}`, `[]`, `"nostream"`, `"stream_exists"`, `"-1"`, `""`} {
		cases = append(cases,
			refusalCase{"expected_version " + v, "/v1/streams/s", `{"expected_version":` + v + `,"events":[{"type":"A"}]}`, badVersion("expected_version")},
			refusalCase{"multi: expected_version " + v, "/v1/append", `{"appends":[{"stream":"a","events":[{"type":"A"}]},{"stream":"b","expected_version":` + v + `,"events":[{"type":"A"}]}]}`, badVersion("appends[1].expected_version")},
		)
	}
	for _, v := range []string{`"any"`, `"no_stream"`, `0`, `"0"`, `4611686018427387904`} {
		// Accepted values decode (the condition may then fail: 409).
		cases = append(cases, refusalCase{"expected_version " + v + " decodes", "/v1/streams/never", `{"expected_version":` + v + `,"events":[]}`, refusal{400, events.CodeEmptyAppend, "events"}})
	}
	checkRefusals(t, n.url, n.store.Head, cases)

	// The sentence lists what is accepted.
	_, _, body := post(t, n.url+"/v1/streams/s", `{"expected_version":1.5,"events":[{"type":"A"}]}`, nil)
	for _, want := range []string{`\"any\"`, `\"no_stream\"`, `\"exists\"`, "4611686018427387904", "1.5"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the expected_version sentence does not name %s: %s", want, body)
		}
	}
}

// TestCommands_FieldPaths: the same in POST /v1/commands: the envelope's
// unknown keys by their path, and data's members under "data".
func TestCommands_FieldPaths(t *testing.T) {
	base, store := domainNode(t, nil, nil)
	checkRefusals(t, base, store.Head, []refusalCase{
		{"unknown in the envelope", "/v1/commands", `{"command":"GrantApproval","id":"` + uuid.NewString() + `","priority":1}`, refusal{400, events.CodeUnknownField, "priority"}},
		{"unknown in data", "/v1/commands", `{"command":"GrantApproval","id":"` + uuid.NewString() + `","data":{"approval_id":"a","foo":1}}`, refusal{400, commands.CodeInvalidCommand, "data.foo"}},
		{"unknown deep in data", "/v1/commands", `{"command":"SubmitMission","id":"` + uuid.NewString() + `","data":{"mission_id":"m","acceptance_checks":[{"id":"c1","argv":["x"],"shell":true}]}}`, refusal{400, commands.CodeInvalidCommand, "data.acceptance_checks[0].shell"}},
	})
}

// gatedLog is the real store whose appends wait for release once they
// have said so on entered: a command that takes as long as the test wants.
type gatedLog struct {
	*pebblelog.Store
	entered chan struct{}
	release chan struct{}
}

func (g gatedLog) Append(ctx context.Context, r events.AppendRequest) (events.Outcome, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return events.Outcome{}, err // the request was cut while it waited
	}
	return g.Store.Append(ctx, r)
}

// TestAPI_StalledBodyTimesOut: a client that sends headers and part of a
// chunked body, then nothing, held its handler's goroutine and buffer for
// as long as it kept the connection (seen past 200 s). The server now
// answers 408 body_timeout once BodyReadTimeout has passed since the
// handler started, and closes the connection (so the goroutine serving it
// returns). What is open all that time is not cut: a subscription (a GET
// without a body), and a command whose body arrived but whose append
// takes longer than the bound.
func TestAPI_StalledBodyTimesOut(t *testing.T) {
	const bound = 300 * time.Millisecond
	s, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), LedgerID: "api-test", CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	gate := gatedLog{Store: s, entered: make(chan struct{}, 1), release: make(chan struct{})}
	h, err := commands.New(commands.Config{Log: gate, Clock: commands.NewManualClock(cmdT0).Now})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", BodyReadTimeout: bound}, s)
	if err != nil {
		t.Fatal(err)
	}
	srv.MountCommands(h)
	base := serve(t, srv, s.Close)
	c := client.New(base, "")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	// A command whose append waits until the stalled requests are over.
	slow := make(chan error, 1)
	go func() {
		var in wire.CommandIn
		if err := json.Unmarshal([]byte(grantBody(uuid.NewString(), "slow")), &in); err != nil {
			slow <- err
			return
		}
		_, err := c.Command(ctx, in)
		slow <- err
	}()
	select {
	case <-gate.entered:
	case err := <-slow:
		t.Fatalf("the command ended before its append: %v", err)
	case <-ctx.Done():
		t.Fatal("the command never reached its append")
	}

	// A subscription from the start, open before the stalled request.
	sub, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/subscribe", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(sub)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ids := make(chan string, 8)
	go func() {
		defer close(ids)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				ids <- id
			}
		}
	}()

	for _, tc := range []struct{ name, request string }{
		{"chunked", "POST /v1/streams/stalled HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
			"Transfer-Encoding: chunked\r\n\r\n" + "c\r\n{\"events\":[{\r\n"},
		{"content length", "POST /v1/append HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
			"Content-Length: 1000\r\n\r\n" + `{"appends":[`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The test's own bound, far above the server's: without the
			// fix the read below ends here, with a timeout.
			if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := io.WriteString(conn, tc.request); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			answer, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body: %v", err)
			}
			took := time.Since(start)
			var eb wire.ErrorBody
			if err := json.NewDecoder(answer.Body).Decode(&eb); err != nil || eb.Error == nil {
				t.Fatalf("answer %d without an error body: %v", answer.StatusCode, err)
			}
			answer.Body.Close()
			if diff := cmp.Diff(refusal{http.StatusRequestTimeout, wire.CodeBodyTimeout, ""}, refusal{answer.StatusCode, eb.Error.Code, eb.Error.Field}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !answer.Close {
				t.Errorf("the answer does not say the connection closes")
			}
			// The server closed the connection: the goroutine serving it
			// (which runs the handler) has returned.
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("the connection stayed open after the answer: %v", err)
			}
			if s.Head().Size != 0 {
				t.Errorf("the stalled append wrote: head %d", s.Head().Size)
			}
			if took < bound {
				t.Errorf("answered after %v, before the bound of %v", took, bound)
			}
		})
	}

	// The command outlived the bound (each stalled request took longer):
	// its body was read, so nothing cut it.
	close(gate.release)
	if err := <-slow; err != nil {
		t.Fatalf("the command whose append took longer than the bound: %v", err)
	}
	// The subscription outlived the bound too: it delivers the command's
	// event, then what comes next.
	if _, err := c.Append(ctx, "after", events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		select {
		case id, ok := <-ids:
			if !ok {
				t.Fatalf("the subscription ended after %v", got)
			}
			got = append(got, id)
		case <-ctx.Done():
			t.Fatalf("the subscription delivered only %v", got)
		}
	}
	if diff := cmp.Diff([]string{"0", "1"}, got); diff != "" {
		t.Errorf("subscription ids (-want +got):\n%s", diff)
	}
}

// TestAPI_SubscribeOutOfRange: "Last-Event-ID: 18446744073709551615"
// resumed at that position + 1, which overflowed to 0 and replayed the
// whole log (one request, the whole ledger streamed back). 2^64-1 is
// events.FromEnd, "the end", in greffe as in KurrentDB (whose End position
// is -1 unsigned): both it and from=2^64-1 (or from=end) start at the
// head. Other positions at or beyond the head wait for the log to reach
// them, as after any Last-Event-ID (a client that resumes on a node behind
// the one it read gets no event twice); values that are not positions are
// refused.
func TestAPI_SubscribeOutOfRange(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	for range 3 {
		if _, err := c.Append(t.Context(), "s", events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
			t.Fatal(err)
		}
	}
	// open subscribes with a query and a Last-Event-ID and returns the
	// answer's status, and for a 200 the position it starts from (its
	// first comment) and the ids it then sends.
	open := func(t *testing.T, query, lastID string) (int, string, <-chan string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		t.Cleanup(cancel)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/v1/subscribe"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			var eb wire.ErrorBody
			_ = json.NewDecoder(resp.Body).Decode(&eb)
			if eb.Error == nil || eb.Error.Code != wire.CodeInvalidQuery || eb.Error.Message == "" {
				t.Errorf("refusal %d without an invalid_query error: %+v", resp.StatusCode, eb.Error)
			} else {
				return resp.StatusCode, eb.Error.Field, nil
			}
			return resp.StatusCode, "", nil
		}
		sc := bufio.NewScanner(resp.Body)
		if !sc.Scan() {
			t.Fatalf("no first line: %v", sc.Err())
		}
		from, ok := strings.CutPrefix(sc.Text(), ": greffe subscription from ")
		if !ok {
			t.Fatalf("first line %q", sc.Text())
		}
		ids := make(chan string, 16)
		go func() {
			defer close(ids)
			for sc.Scan() {
				if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
					ids <- id
				}
			}
		}()
		return resp.StatusCode, from, ids
	}
	next := func(t *testing.T, ids <-chan string) string {
		t.Helper()
		select {
		case id := <-ids:
			return id
		case <-t.Context().Done():
			t.Fatal("no event")
		}
		return ""
	}

	const max = "18446744073709551615" // 2^64-1
	t.Run("Last-Event-ID inside the log resumes after it", func(t *testing.T) {
		status, from, ids := open(t, "", "1")
		if status != http.StatusOK || from != "2" {
			t.Fatalf("status %d, from %q; want 200 from 2", status, from)
		}
		if id := next(t, ids); id != "2" {
			t.Fatalf("first id %s, want 2", id)
		}
	})
	for _, tc := range []struct{ name, query, lastID string }{
		{"Last-Event-ID 2^64-1 is the end", "", max},
		{"from 2^64-1 is the end", "?from=" + max, ""},
		{"from end", "?from=end", ""},
		{"Last-Event-ID 2^64-1 wins over from", "?from=1", max},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := fmt.Sprint(n.store.Head().Size)
			status, from, ids := open(t, tc.query, tc.lastID)
			if status != http.StatusOK || from != head {
				t.Fatalf("status %d, from %q; want 200 from the head, %s", status, from, head)
			}
			if _, err := c.Append(t.Context(), "s", events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
				t.Fatal(err)
			}
			if id := next(t, ids); id != head {
				t.Fatalf("first id %s, want %s: the subscription did not start at the head", id, head)
			}
		})
	}

	t.Run("Last-Event-ID beyond the head waits for it", func(t *testing.T) {
		head := n.store.Head().Size
		last := head + 2
		status, from, ids := open(t, "", fmt.Sprint(last))
		if want := fmt.Sprint(last + 1); status != http.StatusOK || from != want {
			t.Fatalf("status %d, from %q; want 200 from %s", status, from, want)
		}
		for range 4 {
			if _, err := c.Append(t.Context(), "s", events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
				t.Fatal(err)
			}
		}
		if id, want := next(t, ids), fmt.Sprint(last+1); id != want {
			t.Fatalf("first id %s, want %s", id, want)
		}
	})

	for _, tc := range []struct{ name, query, lastID, field string }{
		{"Last-Event-ID 2^64", "", "18446744073709551616", "Last-Event-ID"},
		{"Last-Event-ID negative", "", "-1", "Last-Event-ID"},
		{"Last-Event-ID with a sign", "", "+3", "Last-Event-ID"},
		{"Last-Event-ID not a number", "", "abc", "Last-Event-ID"},
		{"from 2^64", "?from=18446744073709551616", "", "from"},
		{"from negative", "?from=-1", "", "from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := n.store.Head()
			status, field, _ := open(t, tc.query, tc.lastID)
			if status != http.StatusBadRequest || field != tc.field {
				t.Errorf("status %d field %q, want 400 invalid_query at %s", status, field, tc.field)
			}
			if n.store.Head() != before {
				t.Error("the ledger moved")
			}
		})
	}

	// The reads of the same family take 2^64-1 without replaying: a page
	// from there forward is empty, backward it starts at the last event.
	for _, path := range []string{"/v1/all?from=" + max, "/v1/streams/s?from=" + max} {
		b, err := c.Get(t.Context(), path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var out wire.ReadOut
		if err := json.Unmarshal(b, &out); err != nil || len(out.Events) != 0 || out.Next != nil {
			t.Errorf("%s: %d events, next %v, %v; want an empty page", path, len(out.Events), out.Next, err)
		}
	}
}

// TestCommands_DerivedIDsUnreachable: a command's events get ids derived
// from its id (commands.EventID, commands.RefusalID: UUIDv5), so anyone
// who could append raw events could take such an id first, and the
// command then failed with command_id_reused. Version-5 ids are reserved
// for commands: raw appends carrying one are refused (reserved_event_id,
// with the path of the id) on every route and through the Go client, and
// the command then succeeds with the id the attacker tried to take.
func TestCommands_DerivedIDsUnreachable(t *testing.T) {
	base, store := domainNode(t, nil, nil)
	cmdID := uuid.New()
	derived, refusalID := commands.EventID(cmdID, 0), commands.RefusalID(cmdID)
	reserved := func(field string) refusal { return refusal{400, events.CodeReservedEventID, field} }
	ev := func(id uuid.UUID) string { return `{"id":"` + id.String() + `","type":"Squat"}` }
	checkRefusals(t, base, store.Head, []refusalCase{
		{"the derived id", "/v1/streams/notes", `{"events":[` + ev(derived) + `]}`, reserved("events[0].id")},
		{"the refusal id, second event", "/v1/streams/notes", `{"events":[` + ev(uuid.New()) + `,` + ev(refusalID) + `]}`, reserved("events[1].id")},
		{"another event of the command", "/v1/streams/notes", `{"events":[` + ev(commands.EventID(cmdID, 7)) + `]}`, reserved("events[0].id")},
		{"any version-5 id", "/v1/streams/notes", `{"events":[` + ev(uuid.NewSHA1(uuid.NameSpaceDNS, []byte("example.org"))) + `]}`, reserved("events[0].id")},
		{"multi", "/v1/append", `{"appends":[{"stream":"a","events":[` + ev(uuid.New()) + `]},{"stream":"b","events":[` + ev(uuid.New()) + `,` + ev(derived) + `]}]}`, reserved("appends[1].events[1].id")},
		{"other versions are fine", "/v1/streams/notes", `{"events":[` + ev(uuid.New()) + `,` + ev(uuid.Must(uuid.NewV7())) + `,` + ev(uuid.NewMD5(uuid.NameSpaceDNS, []byte("x"))) + `]}`, refusal{Status: 200}},
	})

	// The Go client gets the same refusal.
	c := client.New(base, "")
	before := store.Head()
	_, err := c.Append(t.Context(), "notes", events.ExpectAny, []wire.EventIn{{ID: derived.String(), Type: "Squat"}})
	var ae *wire.Error
	if !errors.As(err, &ae) || ae.Code != events.CodeReservedEventID || ae.Field != "events[0].id" || store.Head() != before {
		t.Fatalf("client append of the derived id: %v (field %q)", err, ae.Field)
	}

	// The command the attack aimed at goes through, with that very id.
	var in wire.CommandIn
	if err := json.Unmarshal([]byte(grantBody(cmdID.String(), "squatted")), &in); err != nil {
		t.Fatal(err)
	}
	out, err := c.Command(t.Context(), in)
	if err != nil {
		t.Fatalf("the command after the attack: %v", err)
	}
	if len(out.Events) != 1 || out.Events[0].ID != derived {
		t.Fatalf("the command's events: %+v, want one with id %s", out.Events, derived)
	}
}

// TestLoadTokens_RefusesAmbiguousEntries: a tokens file that listed one
// token twice (under two names or roles) was accepted and the last entry
// won, so a reader's token could silently become an admin's; one name with
// two roles was accepted too. Both are refused at start, naming the
// entries by index and name, never printing a token.
func TestLoadTokens_RefusesAmbiguousEntries(t *testing.T) {
	const secret, other = "s3cret-token-0123456789", "other-token-0123456789"
	entry := func(name, role, token string) string {
		return `{"name":"` + name + `","role":"` + role + `","token":"` + token + `"}`
	}
	for _, tc := range []struct {
		name    string
		entries []string
		want    []string // in the error; empty: accepted
	}{
		{"one token, two names", []string{entry("alice", "reader", secret), entry("bob", "reader", other), entry("mallory", "reader", secret)},
			[]string{`tokens[0] ("alice", reader)`, `tokens[2] ("mallory", reader)`, "same token"}},
		{"one token, two roles", []string{entry("alice", "reader", secret), entry("alice", "admin", secret)},
			[]string{`tokens[0] ("alice", reader)`, `tokens[1] ("alice", admin)`, "same token"}},
		{"one token listed twice alike", []string{entry("alice", "reader", secret), entry("alice", "reader", secret)},
			[]string{`tokens[0] ("alice", reader)`, `tokens[1] ("alice", reader)`, "same token"}},
		{"one name, two roles", []string{entry("alice", "reader", secret), entry("alice", "admin", other)},
			[]string{`tokens[0] ("alice") is reader`, `tokens[1] ("alice") is admin`, "one name has one role"}},
		{"every ambiguity at once", []string{entry("alice", "reader", secret), entry("bob", "writer", secret), entry("bob", "admin", other)},
			[]string{`tokens[0] ("alice", reader) and tokens[1] ("bob", writer)`, `tokens[1] ("bob") is writer and tokens[2] ("bob") is admin`}},
		{"one name, one role, two tokens (a rotation)", []string{entry("alice", "writer", secret), entry("alice", "writer", other)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens.json")
			if err := os.WriteFile(path, []byte("["+strings.Join(tc.entries, ",")+"]"), 0o600); err != nil {
				t.Fatal(err)
			}
			tokens, err := api.LoadTokens(path)
			if len(tc.want) == 0 {
				if err != nil || !tokens.Enabled() {
					t.Fatalf("refused: %v", err)
				}
				for _, tok := range []string{secret, other} {
					if p, ok := tokens.Identify("alice", tok); !ok || p.Role != api.RoleWriter {
						t.Errorf("token %d… of the rotation: %+v %v", len(tok), p, ok)
					}
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), other) {
				t.Errorf("error %q prints a token", err)
			}
		})
	}
	// A name is the actor of what its token writes: one the log would
	// refuse as an actor is refused at start, in a file (as any string
	// that is not UTF-8) or given to NewTokens.
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte("["+entry("bob\xff", "writer", secret)+"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := api.LoadTokens(path); events.CodeOf(err) != events.CodeInvalidUTF8 || !strings.Contains(err.Error(), "[0].name") {
		t.Errorf("a name that is not UTF-8 in the file: %v", err)
	}
	for _, name := range []string{"bob\xff", "bob\nroot", strings.Repeat("b", events.MaxTextFieldLen+1)} {
		if _, err := api.NewTokens([]api.Token{{Name: name, Role: api.RoleWriter, Token: secret}}); err == nil || !strings.Contains(err.Error(), "tokens[0].name") {
			t.Errorf("NewTokens with the name %.20q: %v", name, err)
		}
	}
}

// TestAPI_ReservedStreamNames: a stream named "$all" could be created over
// HTTP, while KurrentDB (and greffe's gRPC surface, and the mirror, which
// skips "$" streams when it resumes) give names starting with "$" a
// meaning: its system streams and $all. They are reserved: raw appends to
// them are refused with reserved_stream_name and the stream's path; they
// can still be read (there is nothing in them).
func TestAPI_ReservedStreamNames(t *testing.T) {
	n := startNode(t, nil)
	reserved := func(field string) refusal { return refusal{http.StatusForbidden, events.CodeReservedStreamName, field} }
	checkRefusals(t, n.url, n.store.Head, []refusalCase{
		{"$all", "/v1/streams/$all", `{"events":[{"type":"T"}]}`, reserved("stream")},
		{"a system stream", "/v1/streams/$stats-127.0.0.1:2113", `{"events":[{"type":"T"}]}`, reserved("stream")},
		{"stream metadata", "/v1/streams/$$orders", `{"events":[{"type":"T"}]}`, reserved("stream")},
		{"escaped in the path", "/v1/streams/%24all", `{"events":[{"type":"T"}]}`, reserved("stream")},
		{"condition only", "/v1/append", `{"appends":[{"stream":"ok","events":[{"type":"T"}]},{"stream":"$all","expected_version":"no_stream"}]}`, reserved("appends[1].stream")},
		{"multi", "/v1/append", `{"appends":[{"stream":"$ce-orders","events":[{"type":"T"}]}]}`, reserved("appends[0].stream")},
		{"$ inside a name is fine", "/v1/streams/price$usd", `{"events":[{"type":"T"}]}`, refusal{Status: 200}},
	})
	if _, err := client.New(n.url, "").ReadStream(t.Context(), "$all", events.ReadOptions{}); client.CodeOf(err) != events.CodeNotFound {
		t.Errorf("reading $all: %v, want not_found", err)
	}
}
