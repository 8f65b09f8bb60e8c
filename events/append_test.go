package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// Validate names the field of a refusal by its path in the HTTP body,
// whichever stream and event it is in (under each entry's Path); the
// paths are built only for a refusal, so each one is checked here.
func TestValidate_FieldPaths(t *testing.T) {
	ok := func() events.Proposed {
		return events.Proposed{ID: uuid.New(), Type: "T", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}
	}
	// req puts bad as the third event of the second stream.
	req := func(stream string, bad events.Proposed) events.AppendRequest {
		return events.AppendRequest{Streams: []events.StreamAppend{
			{Stream: "first", Events: []events.Proposed{ok()}, Path: "appends[0]"},
			{Stream: stream, Events: []events.Proposed{ok(), ok(), bad}, Path: "appends[1]"},
		}}
	}
	with := func(f func(*events.Proposed)) events.Proposed { p := ok(); f(&p); return p }
	type refusal struct{ Code, Field string }
	cases := []struct {
		name string
		r    events.AppendRequest
		want refusal
	}{
		{"stream name", req("has space", ok()), refusal{events.CodeInvalidStreamName, "appends[1].stream"}},
		{"stream twice", req("first", ok()), refusal{events.CodeDuplicateStream, "appends[1].stream"}},
		{"nil id", req("s", with(func(p *events.Proposed) { p.ID = uuid.Nil })), refusal{events.CodeInvalidEventID, "appends[1].events[2].id"}},
		{"type", req("s", with(func(p *events.Proposed) { p.Type = "" })), refusal{events.CodeInvalidEventType, "appends[1].events[2].type"}},
		{"correlation id", req("s", with(func(p *events.Proposed) { p.CorrelationID = "a\x00b" })), refusal{events.CodeInvalidField, "appends[1].events[2].correlation_id"}},
		{"causation id", req("s", with(func(p *events.Proposed) { p.CausationID = "a\nb" })), refusal{events.CodeInvalidField, "appends[1].events[2].causation_id"}},
		{"actor", req("s", with(func(p *events.Proposed) { p.Actor = strings.Repeat("a", events.MaxTextFieldLen+1) })), refusal{events.CodeInvalidField, "appends[1].events[2].actor"}},
		{"data", req("s", with(func(p *events.Proposed) { p.Data = json.RawMessage(`[]`) })), refusal{events.CodeDataNotObject, "appends[1].events[2].data"}},
		{"metadata", req("s", with(func(p *events.Proposed) { p.Metadata = json.RawMessage(`1`) })), refusal{events.CodeMetadataNotObject, "appends[1].events[2].metadata"}},
		// Invalid UTF-8 has its own code whatever the field (RFC 8259 §8.1).
		{"stream name not UTF-8", req("a\xffb", ok()), refusal{events.CodeInvalidUTF8, "appends[1].stream"}},
		{"type not UTF-8", req("s", with(func(p *events.Proposed) { p.Type = "T\xc0\xaf" })), refusal{events.CodeInvalidUTF8, "appends[1].events[2].type"}},
		{"correlation id not UTF-8", req("s", with(func(p *events.Proposed) { p.CorrelationID = "\xed\xa0\x80" })), refusal{events.CodeInvalidUTF8, "appends[1].events[2].correlation_id"}},
		{"causation id not UTF-8", req("s", with(func(p *events.Proposed) { p.CausationID = "\x80" })), refusal{events.CodeInvalidUTF8, "appends[1].events[2].causation_id"}},
		{"actor not UTF-8", req("s", with(func(p *events.Proposed) { p.Actor = "bob\xff" })), refusal{events.CodeInvalidUTF8, "appends[1].events[2].actor"}},
		{"payload type not UTF-8", req("s", with(func(p *events.Proposed) {
			p.Envelope = &events.Envelope{PayloadType: "x\xff", Signatures: []events.Signature{{KeyID: "k", Sig: []byte{1}}}}
		})), refusal{events.CodeInvalidUTF8, "appends[1].events[2].envelope.payloadType"}},
		{"key id not UTF-8", req("s", with(func(p *events.Proposed) {
			p.Envelope = &events.Envelope{PayloadType: "x", Signatures: []events.Signature{{KeyID: "k", Sig: []byte{1}}, {KeyID: "k\xff", Sig: []byte{1}}}}
		})), refusal{events.CodeInvalidUTF8, "appends[1].events[2].envelope.signatures[1].keyid"}},
		{"data not UTF-8", req("s", with(func(p *events.Proposed) { p.Data = json.RawMessage("{\"name\":\"\xff\"}") })), refusal{events.CodeInvalidUTF8, "appends[1].events[2].data"}},
		{"data key not UTF-8", req("s", with(func(p *events.Proposed) { p.Data = json.RawMessage("{\"\xe4\xb8\":1}") })), refusal{events.CodeInvalidUTF8, "appends[1].events[2].data"}},
		{"data lone surrogate", req("s", with(func(p *events.Proposed) { p.Data = json.RawMessage(`{"a":["\ud800"]}`) })), refusal{events.CodeInvalidUTF8, "appends[1].events[2].data"}},
		{"metadata not UTF-8", req("s", with(func(p *events.Proposed) { p.Metadata = json.RawMessage("{\"trace\":\"\xc3\"}") })), refusal{events.CodeInvalidUTF8, "appends[1].events[2].metadata"}},
		{"metadata lone surrogate", req("s", with(func(p *events.Proposed) { p.Metadata = json.RawMessage(`{"x":"\udc00"}`) })), refusal{events.CodeInvalidUTF8, "appends[1].events[2].metadata"}},
		// Not JSON at all stays data_not_object, even with a byte above 0x7f.
		{"data not JSON", req("s", with(func(p *events.Proposed) { p.Data = json.RawMessage("{\xff}") })), refusal{events.CodeDataNotObject, "appends[1].events[2].data"}},
		{"data array with bad text", req("s", with(func(p *events.Proposed) { p.Data = json.RawMessage("[\"\xff\"]") })), refusal{events.CodeDataNotObject, "appends[1].events[2].data"}},
		{"too large", req("s", with(func(p *events.Proposed) {
			p.Data = json.RawMessage(`{"x":"` + strings.Repeat("x", events.MaxEncodedSize) + `"}`)
		})), refusal{events.CodeEventTooLarge, "appends[1].events[2]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e *events.Error
			if err := c.r.Validate(); !errors.As(err, &e) {
				t.Fatalf("Validate = %v, want a refusal", err)
			}
			if diff := cmp.Diff(c.want, refusal{e.Code, e.Field}); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
			if e.Message == "" {
				t.Error("a refusal without a sentence")
			}
		})
	}
	valid := req("s", ok())
	if err := valid.Validate(); err != nil {
		t.Fatalf("a valid request refused: %v", err)
	}
}

// TestValidate_SingleStreamPaths: an entry that is the body itself (no
// Path: POST /v1/streams/{stream}) is named from the top, as that body is:
// no caller rewrites the paths (api's singleField did).
func TestValidate_SingleStreamPaths(t *testing.T) {
	ev := events.Proposed{ID: uuid.New(), Type: "T", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`[]`)}
	for _, tc := range []struct {
		r    events.AppendRequest
		want string
	}{
		{events.AppendRequest{Streams: []events.StreamAppend{{Stream: "s", Events: []events.Proposed{ev}}}}, "events[0].metadata"},
		{events.AppendRequest{Streams: []events.StreamAppend{{Stream: "a b", Events: []events.Proposed{ev}}}}, "stream"},
	} {
		var e *events.Error
		if err := tc.r.Validate(); !errors.As(err, &e) || e.Field != tc.want {
			t.Errorf("Validate = %v, want a refusal at %s", err, tc.want)
		}
	}
}
