package projections

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/greffe/greffe/internal/jsonscan"
)

// Event data is decoded here with the one byte-level scanner of the module
// (internal/jsonscan, lenient mode) instead of the one decoder of stored
// data, events.DecodeStored, that the aggregates' Evolve reads through
// (issue #21 asked for read models handed typed events decoded once; this
// is why they are not): DecodeStored takes 2.5-2.9 µs and 6 allocations
// for a 300-byte CheckRecorded, the scanner 360 ns and none, for the five
// members a model reads (BenchmarkEventData, 2 shared cores); typed
// events alone would spend half the 5 s budget of rebuilding 1,000,000
// events (BenchmarkRebuild; the readiness model's mirror has the same
// reason, measured: readiness.go). The scanner walks
// the object once, hands back the raw bytes of the top-level members a
// model asked for, and skips the rest (nested objects, arrays, long
// excerpts) without allocating.
//
// The log only stores valid JSON objects (events.AppendRequest.Validate),
// so the scanner need not report syntax errors precisely: it never reads
// out of bounds, and a value it cannot make sense of decodes as its zero
// value. Read models only decode domain streams, which the deciders alone
// write.

// fields captures the raw values of the members of the JSON object data
// named in keys: vals[i] receives the value of keys[i] (nil when absent).
// Later duplicates win, as in encoding/json.
func fields(data []byte, keys []string, vals [][]byte) {
	p := jsonscan.Scanner{B: data}
	p.Members(func(name, value []byte) bool {
		for j, k := range keys {
			if string(name) == k {
				vals[j] = value
			}
		}
		return true
	})
}

// elements calls fn for each element of the JSON array v.
func elements(v []byte, fn func(el []byte)) {
	p := jsonscan.Scanner{B: v}
	p.Elements(func(el []byte) bool { fn(el); return true })
}

// members calls fn for each member of the JSON object v.
func members(v []byte, fn func(key string, val []byte)) {
	p := jsonscan.Scanner{B: v}
	p.Members(func(name, value []byte) bool { fn(string(name), value); return true })
}

// is reports whether the JSON value v is the string s (no escapes in s).
func is(v []byte, s string) bool {
	return len(v) == len(s)+2 && v[0] == '"' && string(v[1:len(v)-1]) == s
}

// raw returns the bytes inside a JSON string without escapes, or nil: a
// key to look up without allocating.
func raw(v []byte) []byte {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return nil
	}
	return v[1 : len(v)-1]
}

// str decodes a JSON string value ("" for anything else). The result never
// aliases v.
func str(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1])
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// strs decodes a JSON array of strings (nil for null or absent).
func strs(v []byte) []string {
	if len(v) == 0 || v[0] != '[' {
		return nil
	}
	out := []string{}
	elements(v, func(el []byte) { out = append(out, str(el)) })
	return out
}

func i64(v []byte) int64 {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(v), 64)
		if ferr != nil {
			return 0
		}
		return int64(f)
	}
	return n
}

func u64(v []byte) uint64 {
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func f64(v []byte) float64 {
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0
	}
	return f
}

func boolean(v []byte) bool { return string(v) == "true" }

// tm decodes a JSON time as encoding/json would (RFC 3339); the zero time
// when absent or malformed.
func tm(v []byte) time.Time {
	if len(v) < 2 || v[0] != '"' {
		return time.Time{}
	}
	var t time.Time
	if t.UnmarshalJSON(v) != nil {
		return time.Time{}
	}
	return t
}
