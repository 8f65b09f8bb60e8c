package strictjson_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

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
