package events

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeStored_AsEncodingJSON: stored event data decodes as
// encoding/json decoded it before DecodeStored (the aggregates wrote it
// with encoding/json): embedded structs inlined, names matched without
// case, unknown names ignored, null leaving a value zero, times in RFC
// 3339. Only the engine changed (BenchmarkFold_Mission: 2x faster, half
// the allocations).
func TestDecodeStored_AsEncodingJSON(t *testing.T) {
	type Inner struct {
		At   time.Time `json:"at"`
		Note string    `json:"note,omitempty"`
	}
	type Data struct {
		Inner
		ID      string            `json:"id"`
		Count   int               `json:"count"`
		Tags    []string          `json:"tags"`
		Details map[string]any    `json:"details"`
		Raw     json.RawMessage   `json:"raw"`
		Ptr     *int              `json:"ptr"`
		Nested  map[string]string `json:"nested"`
	}
	for _, in := range []string{
		`{"id":"m-1","count":3,"tags":["a","b"],"at":"2026-12-04T10:00:00.5Z","note":"n"}`,
		`{"ID":"case","COUNT":2}`,
		`{"id":"x","unknown":{"deep":[1,2]},"details":{"n":1.5,"s":"t","l":[true,null]}}`,
		`{"id":null,"count":null,"tags":null,"ptr":null}`,
		`{"raw": { "kept" : [1, 2] }, "nested":{"k":"v"}, "ptr": 7}`,
		`{ "id" : "spaces" ,  "count" : 0 }`,
	} {
		var want, got Data
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if err := DecodeStored([]byte(in), &got); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: DecodeStored differs from encoding/json (-encoding/json +DecodeStored):\n%s", in, d)
		}
	}
}
