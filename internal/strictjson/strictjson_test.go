package strictjson_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/strictjson"
)

type event struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
	N    int8            `json:"n"`
}

type body struct {
	Stream string  `json:"stream"`
	Events []event `json:"events"`
}

// TestCheck: paths under an empty root and under "data", null with and
// without nullOK, and what encoding/json would let through (another case,
// a repeated key) refused; the inside of a RawMessage is not walked.
func TestCheck(t *testing.T) {
	typ := reflect.TypeFor[body]()
	tests := []struct {
		name   string
		raw    string
		root   string
		nullOK bool
		want   *strictjson.Error // nil: accepted
	}{
		{name: "ok", raw: `{"stream":"s","events":[{"type":"A","data":{"Any":1,"Any":2}}]}`},
		{name: "another case", raw: `{"events":[{"Type":"A"}]}`,
			want: &strictjson.Error{Path: "events[0].Type", Reason: "unknown field; known fields are data, n, type"}},
		{name: "another case under data", raw: `{"events":[{"Type":"A"}]}`, root: "data",
			want: &strictjson.Error{Path: "data.events[0].Type", Reason: "unknown field; known fields are data, n, type"}},
		{name: "repeated key", raw: `{"stream":"a","stream":"b"}`, want: &strictjson.Error{Path: "stream", Reason: "appears twice"}},
		{name: "null refused", raw: `{"stream":null}`, want: &strictjson.Error{Path: "stream", Reason: "must not be null"}},
		{name: "null accepted", raw: `{"stream":null}`, nullOK: true},
		{name: "number out of range", raw: `{"events":[{"type":"A","n":300}]}`,
			want: &strictjson.Error{Path: "events[0].n", Reason: "300 does not fit int8"}},
		{name: "empty", raw: `  `, root: "data", want: &strictjson.Error{Path: "data", Reason: "is empty"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := strictjson.Check([]byte(tc.raw), typ, tc.root, tc.nullOK)
			var got *strictjson.Error
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("error %v is not a *strictjson.Error", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckText: the path of the first string that is not text, keys
// included (by the path of their object), inside RawMessage values too;
// nil when every string is text.
func TestCheckText(t *testing.T) {
	tests := []struct {
		name, raw, root string
		want            string // the path, "-" when accepted
	}{
		{"text", `{"a":"é","b":["\ud83d\ude00",{"c":"\u0041"}],"\u00e9":1}`, "", "-"},
		{"escaped backslash before u", `{"a":"\\ud800"}`, "", "-"},
		{"value", "{\"stream\":\"s\xff\"}", "", "stream"},
		{"value under root", "{\"name\":\"p\xfe\"}", "data", "data.name"},
		{"deep", "{\"events\":[{\"type\":\"A\"},{\"data\":{\"x\":[\"ok\",\"\xc0\xaf\"]}}]}", "", "events[1].data.x[1]"},
		{"key", "{\"events\":[{\"t\xffpe\":\"A\"}]}", "", "events[0]"},
		{"key at the root", "{\"\xff\":1}", "", ""},
		{"lone high surrogate", `{"a":"x\ud800"}`, "", "a"},
		{"lone low surrogate", `{"a":"\udc00x"}`, "", "a"},
		{"reversed pair", `{"a":["\udc00\ud800"]}`, "", "a[0]"},
		{"a string alone", "\"\xff\"", "data", "data"},
		{"first of two", "{\"a\":\"\xff\",\"b\":\"\xfe\"}", "", "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.raw)) {
				t.Fatalf("the case is not JSON: %q", tc.raw)
			}
			got := "-"
			if err := strictjson.CheckText([]byte(tc.raw), tc.root); err != nil {
				var se *strictjson.Error
				if !errors.As(err, &se) || se.Reason == "" {
					t.Fatalf("error %v is not a *strictjson.Error with a reason", err)
				}
				got = se.Path
			}
			if got != tc.want {
				t.Errorf("path %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzCheckText: on JSON that json.Valid accepts, CheckText finds a string
// that is not text exactly when events.ValidJSON refuses the document, so
// a refusal always has a path.
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{
		`{"a":"é","b":["\ud83d\ude00",{"c":"\u0041"}]}`,
		"{\"events\":[{\"t\xffpe\":\"A\"}]}",
		`{"a":["\udc00\ud800"],"b":"\\ud800"}`,
		"[\"\xc0\xaf\",{\"\xe4\xb8\":1}]",
		`"\ud800"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		err := strictjson.CheckText(b, "")
		if text := events.ValidJSON(b); (err == nil) != text {
			t.Fatalf("CheckText(%q) = %v, events.ValidJSON = %v", b, err, text)
		}
	})
}

// TestCheck_DecodesItself: the error of a type that decodes itself comes
// back as Err (so callers can match its code), for null too: encoding/json
// hands null to a value's UnmarshalJSON.
func TestCheck_DecodesItself(t *testing.T) {
	type doc struct {
		Expected events.Expected  `json:"expected_version"`
		Ptr      *events.Expected `json:"ptr"`
	}
	typ := reflect.TypeFor[doc]()
	for _, tc := range []struct {
		raw      string
		wantPath string // "" when accepted
	}{
		{`{"expected_version":"any","ptr":7}`, ""},
		{`{"ptr":null}`, ""},
		{`{"expected_version":1.5}`, "expected_version"},
		{`{"expected_version":null}`, "expected_version"},
		{`{"ptr":"nostream"}`, "ptr"},
	} {
		err := strictjson.Check([]byte(tc.raw), typ, "", true)
		if tc.wantPath == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.raw, err)
			}
			continue
		}
		var se *strictjson.Error
		var ee *events.Error
		if !errors.As(err, &se) || se.Path != tc.wantPath || !errors.As(err, &ee) || ee.Code != events.CodeInvalidExpectedVersion {
			t.Errorf("%s: %#v, want %s at %s", tc.raw, err, events.CodeInvalidExpectedVersion, tc.wantPath)
		}
	}
}
