package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
)

type decodeEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
	N    int8            `json:"n"`
}

type decodeBody struct {
	Stream   string           `json:"stream"`
	Expected events.Expected  `json:"expected_version"`
	Ptr      *events.Expected `json:"ptr"`
	Events   []decodeEvent    `json:"events"`
	Labels   map[string]int   `json:"labels"`
	Nums     [2]int           `json:"nums"`
	Blob     []byte           `json:"blob"`
}

// decoded is what TestDecodeJSON compares of an error.
type decoded struct{ Code, Field string }

// TestDecodeJSON: the code and the full path of every kind of refusal,
// under an empty root and under "data", and what is accepted. Paths tell
// array indices from names by the document, not the pointer ("/labels/0"
// is a name).
func TestDecodeJSON(t *testing.T) {
	ok := decoded{}
	malformed := func(f string) decoded { return decoded{events.CodeMalformedJSON, f} }
	unknown := func(f string) decoded { return decoded{events.CodeUnknownField, f} }
	utf8 := func(f string) decoded { return decoded{events.CodeInvalidUTF8, f} }
	tests := []struct {
		name, raw, root string
		refuseNull      bool
		want            decoded
	}{
		{name: "ok", raw: `{"stream":"s","events":[{"type":"A","data":{"Any":1}}],"labels":{"0":1}}`, want: ok},
		{name: "another case", raw: `{"events":[{"Type":"A"}]}`, want: unknown("events[0].Type")},
		{name: "another case under data", raw: `{"events":[{"Type":"A"}]}`, root: "data", want: unknown("data.events[0].Type")},
		{name: "unknown at the top", raw: `{"stream":"s","expected":"any"}`, want: unknown("expected")},
		{name: "unknown in the third event", raw: `{"events":[{},{},{"payload":{}}]}`, want: unknown("events[2].payload")},
		{name: "repeated key", raw: `{"stream":"a","stream":"b"}`, want: malformed("stream")},
		{name: "repeated key in an event", raw: `{"events":[{"type":"a"},{"type":"a","type":"b"}]}`, want: malformed("events[1].type")},
		{name: "repeated key in data", raw: `{"events":[{"data":{"a":1,"a":2}}]}`, want: malformed("events[0].data.a")},
		{name: "repeated key of a map", raw: `{"labels":{"k":1,"k":2}}`, want: malformed("labels.k")},
		{name: "null refused", raw: `{"stream":null}`, refuseNull: true, want: malformed("stream")},
		{name: "null in an array refused", raw: `{"events":[null]}`, refuseNull: true, want: malformed("events[0]")},
		{name: "null accepted", raw: `{"stream":null,"events":[null]}`, want: ok},
		{name: "null for a pointer, slice, map", raw: `{"ptr":null,"events":null,"labels":null}`, refuseNull: true, want: ok},
		{name: "number out of range", raw: `{"events":[{"type":"A","n":300}]}`, want: malformed("events[0].n")},
		{name: "wrong type keeps its index", raw: `{"events":[{"type":"A"},{"type":5}]}`, want: malformed("events[1].type")},
		{name: "map key that looks like an index", raw: `{"labels":{"0":"x"}}`, want: malformed("labels.0")},
		{name: "array index", raw: `{"nums":[1,"x"]}`, want: malformed("nums[1]")},
		{name: "name with a dot and a quote", raw: `{"labels":{"a.\"b":"x"}}`, want: malformed(`labels.a."b`)},
		{name: "escaped name", raw: `{"labels":{"\u00e9t\u00e9":"x"}}`, want: malformed("labels.été")},
		{name: "base64", raw: `{"blob":"A"}`, want: malformed("blob")},
		{name: "empty", raw: `  `, root: "data", want: malformed("data")},
		{name: "trailing data", raw: `{"stream":"a"} x`, want: malformed("")},
		{name: "two values", raw: `{} {}`, want: malformed("")},
		{name: "syntax", raw: `{"events":[{"type":}]}`, want: malformed("events[0].type")},
		{name: "ends early", raw: `{"events":[{"type":"A"`, want: malformed("events[0]")},
		{name: "expected_version keeps its code", raw: `{"expected_version":1.5}`, want: decoded{events.CodeInvalidExpectedVersion, "expected_version"}},
		{name: "expected_version null", raw: `{"expected_version":null}`, want: decoded{events.CodeInvalidExpectedVersion, "expected_version"}},
		{name: "expected_version behind a pointer", raw: `{"ptr":"nostream"}`, want: decoded{events.CodeInvalidExpectedVersion, "ptr"}},
		// Text (RFC 8259 §8.1): the path of the string, or for a name the
		// path of its object; before any other problem but syntax.
		{name: "text", raw: `{"stream":"é","events":[{"data":{"b":["\ud83d\ude00",{"c":"\u0041"}],"\u00e9":1}}]}`, want: ok},
		{name: "escaped backslash before u", raw: `{"stream":"\\ud800"}`, want: ok},
		{name: "value", raw: "{\"stream\":\"s\xff\"}", want: utf8("stream")},
		{name: "value under root", raw: "{\"stream\":\"p\xfe\"}", root: "data", want: utf8("data.stream")},
		{name: "deep in data", raw: "{\"events\":[{\"type\":\"A\"},{\"data\":{\"x\":[\"ok\",\"\xc0\xaf\"]}}]}", want: utf8("events[1].data.x[1]")},
		{name: "name", raw: "{\"events\":[{\"t\xffpe\":\"A\"}]}", want: utf8("events[0]")},
		{name: "name at the root", raw: "{\"\xff\":1}", want: utf8("")},
		{name: "lone high surrogate", raw: `{"stream":"x\ud800"}`, want: utf8("stream")},
		{name: "lone low surrogate", raw: `{"events":[{"data":{"a":"\udc00x"}}]}`, want: utf8("events[0].data.a")},
		{name: "reversed pair", raw: `{"events":[{"data":{"a":["\udc00\ud800"]}}]}`, want: utf8("events[0].data.a[0]")},
		{name: "text before an unknown field", raw: "{\"foo\":1,\"stream\":\"\xff\"}", want: utf8("stream")},
		{name: "not JSON beats text", raw: "{\"stream\":\"\xff\",}", want: malformed("")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v decodeBody
			err := events.DecodeJSON([]byte(tc.raw), &v, events.DecodeOptions{Root: tc.root, RefuseNull: tc.refuseNull})
			var got decoded
			if err != nil {
				var ee *events.Error
				if !errors.As(err, &ee) {
					t.Fatalf("%v is not an *events.Error", err)
				}
				if ee.Message == "" || ee.Kind != events.KindRefused {
					t.Errorf("a refusal without a sentence, or of kind %v: %#v", ee.Kind, ee)
				}
				if ee.Field != "" && strings.Contains(ee.Message, ee.Field+":") {
					t.Errorf("the message repeats the field: %q", ee.Message)
				}
				got = decoded{ee.Code, ee.Field}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecodeJSON(%q) (-want +got):\n%s\nerr: %v", tc.raw, diff, err)
			}
		})
	}
}

// TestDecodeJSON_Reasons pins the sentences people read.
func TestDecodeJSON_Reasons(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"events":[{"Type":"A"}]}`, "unknown field (names are case-sensitive); known fields are data, n, type"},
		{`{"stream":"a","stream":"b"}`, "appears twice; a name appears once in an object"},
		{`{"events":[{"type":5}]}`, "must be a string, got a number"},
		{`{"events":[{"n":300}]}`, "300 does not fit int8"},
		{`{"events":[{"n":1.5}]}`, "must be an integer, got 1.5"},
		{`{"events":{}}`, "must be an array, got an object"},
		{`{"nums":[1,2,3]}`, "too many array elements"},
	} {
		var v decodeBody
		err := events.DecodeJSON([]byte(tc.raw), &v, events.DecodeOptions{})
		var ee *events.Error
		if !errors.As(err, &ee) || !strings.Contains(ee.Message, tc.want) {
			t.Errorf("DecodeJSON(%s) = %v, want a message holding %q", tc.raw, err, tc.want)
		}
	}
}

// FuzzDecodeJSON: a value is refused with invalid_utf8 exactly when it is
// JSON (json.Valid) that events.ValidJSON refuses, and every refusal is an
// *events.Error with a sentence; nothing panics.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"stream":"é","events":[{"type":"A","data":{"b":["\ud83d\ude00"]}}]}`,
		"{\"events\":[{\"t\xffpe\":\"A\"}]}",
		`{"labels":{"0":1},"nums":[1,2]}`,
		`{"events":[{"data":["\udc00\ud800"]}],"stream":"\\ud800"}`,
		`{"expected_version":"any","ptr":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v decodeBody
		err := events.DecodeJSON(b, &v, events.DecodeOptions{Root: "data"})
		if err == nil {
			if !events.ValidJSON(b) {
				t.Fatalf("accepted %q, which is not JSON text", b)
			}
			return
		}
		var ee *events.Error
		if !errors.As(err, &ee) || ee.Message == "" {
			t.Fatalf("%q: %v is not an *events.Error with a sentence", b, err)
		}
		if text := json.Valid(b) && !events.ValidJSON(b); text != (ee.Code == events.CodeInvalidUTF8) {
			t.Fatalf("%q: code %s; json.Valid %v, events.ValidJSON %v", b, ee.Code, json.Valid(b), events.ValidJSON(b))
		}
		if !strings.HasPrefix(ee.Field, "data") {
			t.Fatalf("%q: field %q is not under the root", b, ee.Field)
		}
	})
}
