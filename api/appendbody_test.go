package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/jsonscan"
	"github.com/greffe/greffe/internal/jsonscan/jsontest"
	"github.com/greffe/greffe/wire"
)

// decodeStrictAppend is the reference: what DecodeStrict (events.DecodeJSON,
// encoding/json/v2) decodes, as every other body.
func decodeStrictAppend(body []byte) (wire.StreamAppendIn, error) {
	var v wire.StreamAppendIn
	err := DecodeStrict(bytes.NewReader(body), &v)
	return v, err
}

func TestFastDecodeStreamAppend(t *testing.T) {
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	tests := []struct {
		name   string
		body   string
		accept bool // whether the fast path must take it
	}{
		{"empty object", `{}`, true},
		{"plain", `{"expected_version":"any","events":[{"type":"T","data":{"a":1}}]}`, true},
		{"all fields", `{"stream":"s-1","expected_version":7,"events":[{"id":"0b6e8a57-2f0d-4f3e-9d7e-6c1a2b3c4d5e","type":"T","data":{"a":[1,2,{"b":null}]},"metadata":{"m":"x"},"correlation_id":"c","causation_id":"d"}]}`, true},
		{"whitespace", " \n{ \"expected_version\" :\t\"no_stream\" ,\r\n \"events\" : [ { \"type\" : \"T\" , \"data\" : { \"a\" : 1 } } ] } \n", true},
		{"unicode", `{"stream":"flux-é","events":[{"type":"Événement ✓ 😀","data":"ü","metadata":["\u00e9"]}]}`, true},
		{"exists", `{"expected_version":"exists","events":[]}`, true},
		{"version as string", `{"expected_version":"42"}`, true},
		{"version zero", `{"expected_version":0}`, true},
		{"version max", `{"expected_version":4611686018427387904}`, true},
		{"empty events", `{"events":[]}`, true},
		{"empty event", `{"events":[{}]}`, true},
		{"empty strings", `{"stream":"","events":[{"id":"","type":"","correlation_id":""}]}`, true},
		{"scalar data", `{"events":[{"type":"T","data":"text","metadata":12.5e3},{"type":"U","data":true,"metadata":[]}]}`, true},
		{"escapes inside data", `{"events":[{"type":"T","data":{"s":"a\"b\\c\u0041\n"}}]}`, true},
		{"one name in sibling objects", `{"events":[{"type":"T","data":{"x":{"a":1},"y":{"a":1},"a":[{"a":2},{"a":3}]}}]}`, true},
		{"many events, shared type", `{"events":[{"type":"T","correlation_id":"c"},{"type":"T","correlation_id":"c"},{"type":"U","correlation_id":"d"}]}`, true},

		// Declined: DecodeStrict decides (and may accept).
		{"envelope", `{"events":[{"type":"T","envelope":{"payloadType":"x","signatures":[]}}]}`, false},
		{"case variant", `{"events":[{"Type":"T"}]}`, false},
		{"case variant top", `{"Expected_Version":"any"}`, false},
		{"unknown top key", `{"foo":1}`, false},
		{"unknown event key", `{"events":[{"type":"T","foo":1}]}`, false},
		{"duplicate top key", `{"stream":"a","stream":"b"}`, false},
		{"duplicate event key", `{"events":[{"type":"a","type":"b"}]}`, false},
		{"escaped string", `{"events":[{"type":"T\u0041"}]}`, false},
		{"escaped key", `{"events":[{"typ\u0065":"T"}]}`, false},
		{"control byte", "{\"events\":[{\"type\":\"T\x01\"}]}", false},
		{"invalid utf-8", "{\"events\":[{\"type\":\"T\xff\"}]}", false},
		{"surrogate utf-8", "{\"events\":[{\"type\":\"\xed\xa0\x80\"}]}", false},
		{"invalid utf-8 in stream", "{\"stream\":\"s\xff\"}", false},
		{"invalid utf-8 in data", "{\"events\":[{\"type\":\"T\",\"data\":{\"a\":\"\xff\"}}]}", false},
		{"a name twice in data", `{"events":[{"type":"T","data":{"a":1,"a":2}}]}`, false},
		{"a name twice deep in metadata", `{"events":[{"type":"T","metadata":{"x":[{"b":1,"b":2}]}}]}`, false},
		{"an escaped name in data", `{"events":[{"type":"T","data":{"\u0061":1}}]}`, false},
		{"invalid utf-8 in a data key", "{\"events\":[{\"type\":\"T\",\"data\":{\"\xc0\xaf\":1}}]}", false},
		{"invalid utf-8 in metadata", "{\"events\":[{\"type\":\"T\",\"metadata\":[\"\xe4\xb8\"]}]}", false},
		{"lone surrogate in data", `{"events":[{"type":"T","data":{"a":"\ud800"}}]}`, false},
		{"lone surrogate in metadata", `{"events":[{"type":"T","metadata":{"a":"\udc00"}}]}`, false},
		{"null events", `{"events":null}`, false},
		{"null type", `{"events":[{"type":null}]}`, false},
		{"null data", `{"events":[{"type":"T","data":null}]}`, false},
		{"null version", `{"expected_version":null}`, false},
		{"null body", `null`, false},
		{"version negative", `{"expected_version":-1}`, false},
		{"version float", `{"expected_version":1.0}`, false},
		{"version exponent", `{"expected_version":1e3}`, false},
		{"version leading zero", `{"expected_version":01}`, false},
		{"version too big", `{"expected_version":4611686018427387905}`, false},
		{"version overflow", `{"expected_version":18446744073709551616}`, false},
		{"version bad word", `{"expected_version":"maybe"}`, false},
		{"version bool", `{"expected_version":true}`, false},
		{"version object", `{"expected_version":{}}`, false},
		{"type not string", `{"events":[{"type":1}]}`, false},
		{"events not array", `{"events":{}}`, false},
		{"event not object", `{"events":[1]}`, false},
		{"invalid data", `{"events":[{"type":"T","data":{"a":}}]}`, false},
		{"data mismatched brackets", `{"events":[{"type":"T","data":{"a":1]}]}`, false},
		{"data bad literal", `{"events":[{"type":"T","data":tru}]}`, false},
		{"data leading zero", `{"events":[{"type":"T","data":01}]}`, false},
		{"data too deep", `{"events":[{"type":"T","data":` + deep + `}]}`, false},
		{"trailing comma", `{"events":[{"type":"T"},]}`, false},
		{"trailing comma object", `{"stream":"s",}`, false},
		{"missing colon", `{"stream" "s"}`, false},
		{"trailing data", `{} {}`, false},
		{"trailing garbage", `{}x`, false},
		{"empty", ``, false},
		{"truncated", `{"events":[{"type":"T"`, false},
		{"not an object", `[]`, false},
		{"bom", "\xef\xbb\xbf{}", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fastDecodeStreamAppend([]byte(tc.body))
			if ok != tc.accept {
				t.Fatalf("fast path accepted = %v, want %v", ok, tc.accept)
			}
			want, err := decodeStrictAppend([]byte(tc.body))
			if !ok {
				return
			}
			if err != nil {
				t.Fatalf("fast path accepted a body DecodeStrict refuses: %v", err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("fast path differs from DecodeStrict (-strict +fast):\n%s", d)
			}
		})
	}
}

// answer is the API's answer to err (nil for nil): what a client sees.
func answer(err error) *wire.Error {
	if err == nil {
		return nil
	}
	return toAPIError(err)
}

// TestDecodeStreamAppendErrors checks that the handler-level decoder gives
// decodeBody's exact errors and values, including for bodies over the limit.
func TestDecodeStreamAppendErrors(t *testing.T) {
	big := `{"events":[{"type":"T","data":"` + strings.Repeat("x", maxBodyBytes) + `"}]}`
	tests := []struct {
		name, ct, body string
	}{
		{"ok", "application/json", `{"events":[{"type":"T","data":{}}]}`},
		{"slow ok", "application/json", `{"events":[{"Type":"T"}]}`},
		{"no content type", "", `{"events":[{"type":"T"}]}`},
		{"wrong content type", "text/plain", `{}`},
		{"unknown field", "application/json", `{"events":[{"tipe":"T"}]}`},
		{"syntax", "application/json", `{"events":[{"type":}]}`},
		{"wrong type", "application/json", `{"events":[{"type":1}]}`},
		{"bad version", "application/json", `{"expected_version":"maybe"}`},
		{"empty", "application/json", ``},
		{"truncated", "application/json", `{"events":[`},
		{"two values", "application/json", `{} {}`},
		{"trailing", "application/json", `{} x`},
		{"too large", "application/json", big},
		{"too large after a value", "application/json", `{}` + strings.Repeat(" ", maxBodyBytes)},
		{"too large, early syntax error", "application/json", `{"x` + "\x01" + strings.Repeat(" ", maxBodyBytes)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := func() *http.Request {
				r := httptest.NewRequest(http.MethodPost, "/v1/streams/s", strings.NewReader(tc.body))
				if tc.ct != "" {
					r.Header.Set("Content-Type", tc.ct)
				}
				return r
			}
			var want, got wire.StreamAppendIn
			wantErr := decodeBody(httptest.NewRecorder(), req(), &want)
			gotErr := decodeStreamAppend(httptest.NewRecorder(), req(), &got)
			if d := cmp.Diff(answer(wantErr), answer(gotErr)); d != "" {
				t.Fatalf("error differs (-decodeBody +decodeStreamAppend):\n%s", d)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("value differs (-decodeBody +decodeStreamAppend):\n%s", d)
			}
		})
	}
}

// TestFastDecodeStreamAppendAliasing checks that data slices are capped:
// appending to one must not overwrite the rest of the body.
func TestFastDecodeStreamAppendAliasing(t *testing.T) {
	body := []byte(`{"events":[{"type":"T","data":[1],"metadata":{"a":2}}]}`)
	v, ok := fastDecodeStreamAppend(body)
	if !ok {
		t.Fatal("declined")
	}
	_ = append(v.Events[0].Data, 'X')
	if string(v.Events[0].Metadata) != `{"a":2}` {
		t.Fatalf("metadata overwritten: %s", v.Events[0].Metadata)
	}
}

// testAppendBody returns a realistic body: n events of a 256-byte payload.
func testAppendBody(tb testing.TB, n int) []byte {
	payload, _ := json.Marshal(map[string]string{"k": strings.Repeat("v", 248)})
	in := wire.StreamAppendIn{ExpectedVersion: events.ExpectAny, Events: make([]wire.EventIn, n)}
	for i := range in.Events {
		in.Events[i] = wire.EventIn{ID: fmt.Sprintf("0b6e8a57-2f0d-4f3e-9d7e-%012d", i), Type: "BenchEvent", Data: payload, Metadata: json.RawMessage(`{"src":"bench"}`)}
	}
	b, err := json.Marshal(in)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzFastDecodeStreamAppend: the fast path and the reference decoder
// (events.DecodeJSON, encoding/json/v2) agree. Whenever the fast path
// takes a body, the reference takes it too and decodes the same value;
// and the handler's decoder (fast path, then the reference for what it
// declines) accepts and refuses exactly what the reference does, with the
// same value or the same answer. Nothing that is not text is taken.
func FuzzFastDecodeStreamAppend(f *testing.F) {
	for _, b := range jsontest.Seeds() {
		f.Add(b)
	}
	f.Add(testAppendBody(f, 3)) // the body BenchmarkDecodeStreamAppend decodes
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := fastDecodeStreamAppend(body)
		want, err := decodeStrictAppend(body)
		// Nothing that is not text is taken (issue 13): invalid UTF-8 or
		// an unpaired surrogate escape anywhere, data included, would be
		// read as U+FFFD or stored as no reader shows it.
		if (ok || err == nil) && !jsonscan.Valid(body) {
			t.Fatalf("a body that is not text was accepted (fast %v, reference %v): %q", ok, err == nil, body)
		}
		if err != nil && json.Valid(body) && !jsonscan.Valid(body) && events.CodeOf(err) != events.CodeInvalidUTF8 {
			t.Fatalf("a body that is not text got %v, want %s: %q", err, events.CodeInvalidUTF8, body)
		}
		if ok {
			if err != nil {
				t.Fatalf("fast path accepted %q, the reference refuses it: %v", body, err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("fast path differs from the reference on %q (-reference +fast):\n%s", body, d)
			}
		}
		// The handler's decoder, fast path first, against the reference.
		r := httptest.NewRequest(http.MethodPost, "/v1/streams/s", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json") // required (api/errors.go, checkContentType)
		var handled wire.StreamAppendIn
		herr := decodeStreamAppend(httptest.NewRecorder(), r, &handled)
		if (herr == nil) != (err == nil) {
			t.Fatalf("the handler's decoder %v, the reference %v, on %q", herr, err, body)
		}
		if err != nil {
			if d := cmp.Diff(answer(err), answer(herr)); d != "" {
				t.Fatalf("the answers differ on %q (-reference +handler):\n%s", body, d)
			}
		} else if d := cmp.Diff(want, handled); d != "" {
			t.Fatalf("the handler's decoder differs from the reference on %q (-reference +handler):\n%s", body, d)
		}
	})
}

// BenchmarkDecodeStreamAppend compares the fast path with the reference
// decoder, events.DecodeJSON (encoding/json/v2), on a 100-event body: the
// fast path stays only while it is measured faster. Run the two in the
// same process, alternating, e.g.
//
//	go test -c -o api.test ./api
//	for i in 1 2 3 4 5; do ./api.test -test.run '^$' -test.bench DecodeStreamAppend -test.benchtime 2000x; done
func BenchmarkDecodeStreamAppend(b *testing.B) {
	body := testAppendBody(b, 100)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := fastDecodeStreamAppend(body); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("v2", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var v wire.StreamAppendIn
			if err := decodeBytes(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
