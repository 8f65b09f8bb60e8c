package projections

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/internal/jsonscan/jsontest"
)

// TestFields: the scanner reads the members encoding/json reads, including
// escaped keys and strings, nested values it skips and whitespace.
func TestFields(t *testing.T) {
	data := []byte(` { "skip": {"a": [1, {"b": "}]"}], "c": "\"{"}, "s\u0074r" : "x\"y\\z\u00e9", "n": -12, "f": 1.5e3,
		"b": true, "arr": ["p", "q\n"], "t": "2026-03-01T09:00:00.5Z", "nul": null, "obj": {"k": 2, "l": [3]} } `)
	var v [9][]byte
	fields(data, []string{"str", "n", "f", "b", "arr", "t", "nul", "obj", "absent"}, v[:])
	type out struct {
		Str     string
		N       int64
		F       float64
		B       bool
		Arr     []string
		T       time.Time
		Nul     string
		Members map[string]string
		Absent  []byte
	}
	got := out{Str: str(v[0]), N: i64(v[1]), F: f64(v[2]), B: boolean(v[3]), Arr: strs(v[4]), T: tm(v[5]), Nul: string(v[6]), Absent: v[8], Members: map[string]string{}}
	members(v[7], func(k string, val []byte) { got.Members[k] = string(val) })
	var ref struct {
		Str string    `json:"str"`
		N   int64     `json:"n"`
		F   float64   `json:"f"`
		B   bool      `json:"b"`
		Arr []string  `json:"arr"`
		T   time.Time `json:"t"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	want := out{Str: ref.Str, N: ref.N, F: ref.F, B: ref.B, Arr: ref.Arr, T: ref.T, Nul: "null", Members: map[string]string{"k": "2", "l": "[3]"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-encoding/json +scanner):\n%s", diff)
	}
}

// FuzzFields: the scanner never panics, whatever the bytes.
func FuzzFields(f *testing.F) {
	for _, b := range jsontest.Seeds() { // the module's one JSON seed corpus
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v [2][]byte
		fields(b, []string{"a", "c"}, v[:])
		_ = strs(v[1])
		members(v[1], func(string, []byte) {})
		_ = str(v[0])
	})
}
