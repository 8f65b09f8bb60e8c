package aggregates

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
)

// benchGrantApproval is a typical small command.
const benchGrantApproval = `{"approval_id":"appr-2031","approver":"owner","action":"startup","subject":"provider gpu-node-1",
	"uses":3,"expires_at":"2031-05-01T12:00:00Z","conditions":["only during the maintenance window","not on weekends"]}`

// benchSubmitMission is a larger command: nested arrays of objects, lists of
// strings and a nested object with durations.
const benchSubmitMission = `{
	"mission_id": "m-2031-0007",
	"task_class": "code",
	"mode": "proposal",
	"confidential": false,
	"allow_connected": false,
	"declared_provider": "gpu-node-1",
	"starts_runtime": true,
	"allowed_files": ["bin/*.sh", "internal/*.go", "cmd/tool/*.go", "docs/*.md", "Makefile"],
	"acceptance_checks": [
		{"id": "c01", "argv": ["bash", "-c", "go test ./... -run 'TestA|TestB' -count=1"]},
		{"id": "c02", "argv": ["go", "vet", "./..."]},
		{"id": "c03", "argv": ["bash", "t.sh", "--flag=\"quoted\"", "a,b]}"]},
		{"id": "c04", "argv": ["make", "lint", "LINTER=golangci-lint"]},
		{"id": "c05", "argv": ["python3", "check.py", "--json", "{\"k\":[1,2]}"]},
		{"id": "c06", "argv": ["sh", "-c", "test -f out/report.txt"]}
	],
	"budgets": {"inference_requests": 40, "attempts": 3, "corrections": 2, "command_timeout": "10m", "attempt_timeout": "1h", "output_bytes_per_command": 65536}
}`

func BenchmarkDecodeCommand(b *testing.B) {
	for _, bc := range []struct{ name, data string }{
		{"GrantApproval", benchGrantApproval},
		{"SubmitMission", benchSubmitMission},
	} {
		data := []byte(bc.data)
		if _, err := DecodeCommand(bc.name, data); err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := DecodeCommand(bc.name, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type pathCheck struct {
	ID   string   `json:"id"`
	Argv []string `json:"argv"`
}

type pathDoc struct {
	Name   string         `json:"name"`
	Checks []pathCheck    `json:"checks"`
	Labels map[string]int `json:"labels"`
	Nums   [2]int         `json:"nums"`
	At     time.Time      `json:"at"`
	Any    any            `json:"any"`
	Dur    *Duration      `json:"dur"`
	Blob   []byte         `json:"blob"`
}

// TestDecodeStrictPaths pins the exact path and code of decodeStrict's
// errors, and what it accepts, on inputs that exercise the decoder:
// escapes in keys, brackets and quotes inside strings, whitespace. The
// reasons are those of events.DecodeJSON (the walk this decoder replaced
// gave the same paths, but for a syntax error, now named by the value it
// is in, and an array both too long and with a bad element past its
// length, now refused for its length).
func TestDecodeStrictPaths(t *testing.T) {
	// notText was the sentence of a string that is not text (only the
	// path and the code are compared).
	notText := func(prefix string) string {
		return prefix + `is not UTF-8 text (a byte that is not UTF-8, or an unpaired surrogate escape such as \ud800); JSON is UTF-8 (RFC 8259 §8.1)`
	}
	cases := []struct {
		name string
		data string
		want *InvalidCommandError // nil: accepted
		doc  *pathDoc             // the decoded value, when accepted and set
	}{
		// The expectations were captured from the Token-based walk this
		// scanner replaced.
		{name: "unknown nested field inside an array element", data: `{"checks":[{"id":"a"},{"id":"b","argvv":[]}]}`,
			want: &InvalidCommandError{Path: "data.checks[1].argvv", Reason: "unknown field; known fields are argv, id"}},
		{name: "duplicate key", data: `{"name":"a","name":"b"}`,
			want: &InvalidCommandError{Path: "data.name", Reason: "appears twice"}},
		{name: "duplicate key written with an escape", data: `{"labels":{"a":1,"\u0061":2}}`,
			want: &InvalidCommandError{Path: "data.labels.a", Reason: "appears twice"}},
		{name: "duplicate struct key written with an escape", data: `{"name":"a","\u006eame":"b"}`,
			want: &InvalidCommandError{Path: "data.name", Reason: "appears twice"}},
		{name: "case-mismatched key", data: `{"Name":"a"}`,
			want: &InvalidCommandError{Path: "data.Name", Reason: "unknown field; known fields are any, at, blob, checks, dur, labels, name, nums"}},
		{name: "case-mismatched key in an array element", data: `{"checks":[{"ID":"a"}]}`,
			want: &InvalidCommandError{Path: "data.checks[0].ID", Reason: "unknown field; known fields are argv, id"}},
		{name: "wrong type in an array element", data: `{"checks":[{"id":"a","argv":["x",7]}]}`,
			want: &InvalidCommandError{Path: "data.checks[0].argv[1]", Reason: "must be a string, got a number"}},
		{name: "wrong type for an array element", data: `{"checks":["a"]}`,
			want: &InvalidCommandError{Path: "data.checks[0]", Reason: "must be an object, got a string"}},
		{name: "null array element", data: `{"checks":[null]}`,
			want: &InvalidCommandError{Path: "data.checks[0]", Reason: "must not be null"}},
		{name: "key containing an escaped quote", data: `{"labels":{"a\"b":"x"}}`,
			want: &InvalidCommandError{Path: "data.labels.a\"b", Reason: "must be a number, got a string"}},
		{name: "unknown key containing an escaped quote", data: `{"na\"me":1}`,
			want: &InvalidCommandError{Path: "data.na\"me", Reason: "unknown field; known fields are any, at, blob, checks, dur, labels, name, nums"}},
		{name: "key containing an escaped backslash", data: `{"labels":{"a\\b":"x"}}`,
			want: &InvalidCommandError{Path: "data.labels.a\\b", Reason: "must be a number, got a string"}},
		{name: "key containing unicode escapes", data: `{"labels":{"\u00e9t\u00E9":"x"}}`,
			want: &InvalidCommandError{Path: "data.labels.été", Reason: "must be a number, got a string"}},
		// A key that is not text is refused before its value is looked at,
		// with the path of its object (issue 13): it used to be read as
		// U+FFFD, so "\ud800" and "\udfff" were one key.
		{name: "key containing a lone surrogate", data: `{"labels":{"\ud800":"x"}}`,
			want: &InvalidCommandError{Path: "data.labels", Reason: notText("holds a key that "), Code: events.CodeInvalidUTF8}},
		{name: "key containing a surrogate pair", data: `{"labels":{"\ud83d\ude00":"x"}}`,
			want: &InvalidCommandError{Path: "data.labels.😀", Reason: "must be a number, got a string"}},
		{name: "key containing invalid UTF-8", data: "{\"labels\":{\"a\xffb\":\"x\"}}",
			want: &InvalidCommandError{Path: "data.labels", Reason: notText("holds a key that "), Code: events.CodeInvalidUTF8}},
		{name: "value containing invalid UTF-8", data: "{\"labels\":{\"a\":1},\"name\":\"p\xfe\"}",
			want: &InvalidCommandError{Path: "data.name", Reason: notText(""), Code: events.CodeInvalidUTF8}},
		{name: "key containing raw UTF-8", data: `{"labels":{"été":"x"}}`,
			want: &InvalidCommandError{Path: "data.labels.été", Reason: "must be a number, got a string"}},
		{name: "escaped and raw UTF-8 keys are duplicates", data: `{"labels":{"été":1,"\u00e9t\u00e9":2}}`,
			want: &InvalidCommandError{Path: "data.labels.été", Reason: "appears twice"}},
		{name: "empty key", data: `{"labels":{"":"x"}}`,
			want: &InvalidCommandError{Path: "data.labels.", Reason: "must be a number, got a string"}},
		{name: "strings with brackets, commas and escaped quotes inside arrays",
			data: `{"checks":[{"id":"]},{\"","argv":["a,b","}]","\\","\"],[","\\\"]}"]},{"id":"x","argv":[]}],"name":"after"}`,
			doc:  &pathDoc{Name: "after", Checks: []pathCheck{{ID: "]},{\"", Argv: []string{"a,b", "}]", "\\", "\"],[", "\\\"]}"}}, {ID: "x", Argv: []string{}}}}},
		{name: "an error after strings with brackets, commas and escaped quotes",
			data: `{"checks":[{"id":"]}","argv":["\"]}",",\\","{[\\\""]},{"id":"y","argv":["ok",1]}]}`,
			want: &InvalidCommandError{Path: "data.checks[1].argv[1]", Reason: "must be a string, got a number"}},
		{name: "an error after nested values of any type",
			data: `{"any":{"x":[1,{"y":"]}\"[{"},[[],{}],-1.5e3,true,false,null],"z":"\\"},"name":1}`,
			want: &InvalidCommandError{Path: "data.name", Reason: "must be a string, got a number"}},
		{name: "a duplicate key past 16 keys", data: `{"labels":{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k18":18,"k19":19,"k\u0031\u0037":1}}`,
			want: &InvalidCommandError{Path: "data.labels.k17", Reason: "appears twice"}},
		{name: "a duplicate key within the first 16 keys, found past them", data: `{"labels":{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k18":18,"k19":19,"k3":1}}`,
			want: &InvalidCommandError{Path: "data.labels.k3", Reason: "appears twice"}},
		{name: "empty array and object", data: `{"checks":[],"labels":{}}`, doc: &pathDoc{Checks: []pathCheck{}, Labels: map[string]int{}}},
		{name: "empty object", data: `{}`},
		{name: "empty data", data: ``},
		{name: "empty element object", data: `{"checks":[{}]}`, doc: &pathDoc{Checks: []pathCheck{{}}}},
		{name: "whitespace everywhere", data: " \n{ \"checks\" :\t[ { \"id\" : \"a\" , \"argv\" : [ \"x\" , 3 ] } ] } \t\r\n",
			want: &InvalidCommandError{Path: "data.checks[0].argv[1]", Reason: "must be a string, got a number"}},
		{name: "whitespace everywhere, accepted", data: " \n{ \"checks\" :\t[ { \"id\" : \"a\" , \"argv\" : [ \"x\" , \"y\" ] } , { } ] , \"labels\" : { \"k\" : 1 } , \"nums\" : [ 1 , 2 ] } \t\r\n",
			doc: &pathDoc{Checks: []pathCheck{{ID: "a", Argv: []string{"x", "y"}}, {}}, Labels: map[string]int{"k": 1}, Nums: [2]int{1, 2}}},
		{name: "whitespace in an empty array and object", data: `{"checks":[ ],"labels":{ },"any":[ { } , [ ] ]}`,
			doc: &pathDoc{Checks: []pathCheck{}, Labels: map[string]int{}, Any: []any{map[string]any{}, []any{}}}},
		{name: "too many array elements", data: `{"nums":[1,2,3]}`,
			want: &InvalidCommandError{Path: "data.nums", Reason: "has more than 2 elements"}},
		{name: "a bad element past the array's length", data: `{"nums":[1,2,"x"]}`,
			want: &InvalidCommandError{Path: "data.nums", Reason: "too many array elements"}},
		{name: "a number that does not fit", data: `{"nums":[1e99]}`,
			want: &InvalidCommandError{Path: "data.nums[0]", Reason: "1e99 does not fit int"}},
		{name: "a bad time", data: `{"at":"tomorrow"}`,
			want: &InvalidCommandError{Path: "data.at", Reason: "parsing time \"tomorrow\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"tomorrow\" as \"2006\""}},
		{name: "a bad duration", data: `{"dur":15}`,
			want: &InvalidCommandError{Path: "data.dur", Reason: "want a duration string such as \"15s\""}},
		{name: "base64", data: `{"blob":"AAEC"}`, doc: &pathDoc{Blob: []byte{0, 1, 2}}},
		{name: "bad base64", data: `{"blob":"!!"}`,
			want: &InvalidCommandError{Path: "data.blob", Reason: "must be a base64 string, got a string"}},
		{name: "an object for a map's number value", data: `{"labels":{"a":{"b":1}}}`,
			want: &InvalidCommandError{Path: "data.labels.a", Reason: "must be a number, got an object"}},
		{name: "null map and slice", data: `{"labels":null,"checks":null,"any":null}`},
		{name: "any takes only text", data: `{"any":[1,{"x":"\udfff"}]}`,
			want: &InvalidCommandError{Path: "data.any[1].x", Reason: notText(""), Code: events.CodeInvalidUTF8}},
		{name: "not an object", data: `[1]`,
			want: &InvalidCommandError{Path: "data", Reason: "must be a JSON object"}},
		{name: "not JSON", data: `{"name":`,
			want: &InvalidCommandError{Path: "data.name", Reason: "is not JSON: it ends at byte 8, inside a value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var doc pathDoc
			err := decodeStrict([]byte(tc.data), &doc)
			var got *InvalidCommandError
			if err != nil {
				var ok bool
				if got, ok = err.(*InvalidCommandError); !ok {
					t.Fatalf("not an *InvalidCommandError: %T %v", err, err)
				}
			}
			// The path and the code are the contract; the reason is a
			// sentence that may improve (it is pinned by events' tests).
			pathCode := func(e *InvalidCommandError) []string {
				if e == nil {
					return nil
				}
				return []string{e.Path, e.Code}
			}
			if diff := cmp.Diff(pathCode(tc.want), pathCode(got)); diff != "" {
				t.Errorf("error (-want +got):\n%s\n%v", diff, err)
			}
			if got != nil && got.Reason == "" {
				t.Errorf("an error without a reason: %#v", got)
			}
			if tc.want == nil && tc.doc != nil {
				if diff := cmp.Diff(tc.doc, &doc); diff != "" {
					t.Errorf("decoded (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// BenchmarkDecodeStrict is BenchmarkDecodeCommand's decoding alone, without
// the catalogue lookup and the shape checks.
func BenchmarkDecodeStrict(b *testing.B) {
	for _, bc := range []struct {
		name string
		data string
		new  func() any
	}{
		{"GrantApproval", benchGrantApproval, func() any { return &GrantApproval{} }},
		{"SubmitMission", benchSubmitMission, func() any { return &SubmitMission{} }},
	} {
		data := []byte(bc.data)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := decodeStrict(data, bc.new()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
