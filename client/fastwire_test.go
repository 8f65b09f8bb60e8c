package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/jsonscan/jsontest"
	"github.com/greffe/greffe/wire"
)

func TestEncodeStreamAppend(t *testing.T) {
	ev := func(e wire.EventIn) []wire.EventIn { return []wire.EventIn{e} }
	tests := []struct {
		name     string
		in       wire.StreamAppendIn
		fallback bool // whether the fast encoder must hand it to json.Marshal
	}{
		{"nil events", wire.StreamAppendIn{}, false},
		{"empty events", wire.StreamAppendIn{Events: []wire.EventIn{}}, false},
		{"plain", wire.StreamAppendIn{ExpectedVersion: events.ExpectAny, Events: ev(wire.EventIn{Type: "T", Data: json.RawMessage(`{"a":1}`)})}, false},
		{"all fields", wire.StreamAppendIn{Stream: "s-1", ExpectedVersion: events.ExpectVersion(7), Events: ev(wire.EventIn{
			ID: "0b6e8a57-2f0d-4f3e-9d7e-6c1a2b3c4d5e", Type: "T", Data: json.RawMessage(`[1,"a b",{"c":null}]`),
			Metadata: json.RawMessage(`{"m":"x"}`), CorrelationID: "c", CausationID: "d"})}, false},
		{"no_stream", wire.StreamAppendIn{ExpectedVersion: events.ExpectNoStream, Events: ev(wire.EventIn{Type: "T"})}, false},
		{"exists", wire.StreamAppendIn{ExpectedVersion: events.ExpectExists, Events: ev(wire.EventIn{Type: "T"})}, false},
		{"unknown kind", wire.StreamAppendIn{ExpectedVersion: events.Expected{Kind: 9}}, false},
		{"unicode", wire.StreamAppendIn{Stream: "flux-é", Events: ev(wire.EventIn{Type: "Événement ✓ 😀", Data: json.RawMessage(`"ü"`)})}, false},
		{"escaped strings", wire.StreamAppendIn{Stream: "a\"b\\c\n\x01<>&\u2028\u2029\xff", Events: ev(wire.EventIn{Type: "<T>", CorrelationID: "\t"})}, false},
		{"data with whitespace", wire.StreamAppendIn{Events: ev(wire.EventIn{Type: "T", Data: json.RawMessage(" { \"a\" : [ 1 , 2 ] }\n")})}, false},
		{"data with html", wire.StreamAppendIn{Events: ev(wire.EventIn{Type: "T", Data: json.RawMessage(`{"a":"<b>&\u2028"}`)})}, false},
		{"data with raw U+2028", wire.StreamAppendIn{Events: ev(wire.EventIn{Type: "T", Metadata: json.RawMessage("\"\u2028\u2029\"")})}, false},
		{"data with escapes", wire.StreamAppendIn{Events: ev(wire.EventIn{Type: "T", Data: json.RawMessage(`{"a":"\"\\ \u0041"}`)})}, false},
		// Not text: json.Marshal copies it as it is, and the node refuses it.
		{"data invalid utf-8 in string", wire.StreamAppendIn{Events: ev(wire.EventIn{Type: "T", Data: json.RawMessage("\"\xff\"")})}, true},
		{"invalid data", wire.StreamAppendIn{Events: ev(wire.EventIn{Type: "T", Data: json.RawMessage(`{"a":}`)})}, true},
		{"invalid metadata", wire.StreamAppendIn{Events: ev(wire.EventIn{Type: "T", Metadata: json.RawMessage(`nul`)})}, true},
		{"envelope", wire.StreamAppendIn{Events: ev(wire.EventIn{Type: "T", Envelope: &events.Envelope{PayloadType: "x"}})}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := encodeStreamAppend(tc.in)
			want, err := json.Marshal(tc.in)
			if ok == tc.fallback {
				t.Fatalf("fast encoder handled = %v, want %v", ok, !tc.fallback)
			}
			if !ok {
				return
			}
			if err != nil {
				t.Fatalf("fast encoder handled a value json.Marshal refuses: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("fast encoder:\n%s\njson.Marshal:\n%s", got, want)
			}
		})
	}
}

// TestStreamAppendBodyError checks that a value the fast encoder declines
// still gets json.Marshal's error.
func TestStreamAppendBodyError(t *testing.T) {
	in := wire.StreamAppendIn{Events: []wire.EventIn{{Type: "T", Data: json.RawMessage(`{`)}}}
	if _, ok := streamAppendBody(in).(jsonBody); ok {
		t.Fatal("invalid data was pre-encoded")
	}
	if _, err := json.Marshal(in); err == nil {
		t.Fatal("json.Marshal accepted invalid data")
	}
}

func FuzzEncodeStreamAppend(f *testing.F) {
	// Every seed document as data (and the next as metadata), with the
	// seed strings in turn as the stream, id, type and links; kind runs
	// over every ExpectedKind, and over nil events from 128 on.
	docs, strs := jsontest.Seeds(), jsontest.Strings()
	str := func(i int) string { return strs[i%len(strs)] }
	for i, d := range docs {
		f.Add(str(i), uint8(i), uint64(i), str(i+1), str(i+2), d, docs[(i+1)%len(docs)], str(i+3), str(i+4))
	}
	f.Fuzz(func(t *testing.T, stream string, kind uint8, version uint64, id, typ string, data, meta []byte, corr, caus string) {
		in := wire.StreamAppendIn{Stream: stream, ExpectedVersion: events.Expected{Kind: events.ExpectedKind(kind % 5), Version: version},
			Events: []wire.EventIn{
				{ID: id, Type: typ, Data: data, Metadata: meta, CorrelationID: corr, CausationID: caus},
				{Type: typ, Data: meta, Metadata: data},
			}}
		if kind&0x80 != 0 {
			in.Events = nil
		}
		got, ok := encodeStreamAppend(in)
		if !ok {
			return
		}
		want, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("fast encoder handled a value json.Marshal refuses: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("fast encoder:\n%q\njson.Marshal:\n%q", got, want)
		}
	})
}

// serverBody encodes out as the node does (api's writeJSON: a json.Encoder
// with its defaults, then a newline).
func serverBody(t testing.TB, out wire.AppendOut) []byte {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(out); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sampleOut builds an AppendOut as api's appendOut does from stored events.
func sampleOut(n int, stream string, at time.Time) wire.AppendOut {
	out := wire.AppendOut{Events: make([]wire.AppendedEvent, n)}
	for i := range out.Events {
		var h [32]byte
		for j := range h {
			h[j] = byte(i*31 + j)
		}
		out.Events[i] = wire.AppendedEvent{ID: uuid.New(), Stream: stream, Version: uint64(i), Position: uint64(1000 + i),
			LeafHash: h[:], RecordedAt: at.Add(time.Duration(i) * time.Microsecond)}
	}
	return out
}

// timeExact compares times including their location, which cmp's default
// (time.Time's Equal method) ignores.
var timeExact = cmp.Comparer(func(a, b time.Time) bool {
	an, ao := a.Zone()
	bn, bo := b.Zone()
	return a.Equal(b) && an == bn && ao == bo && a.Location().String() == b.Location().String()
})

func TestFastDecodeAppendOut(t *testing.T) {
	utc := time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)
	fromServer := []struct {
		name string
		out  wire.AppendOut
	}{
		{"one", sampleOut(1, "s", utc)},
		{"hundred", sampleOut(100, "bench-3", utc)},
		{"whole seconds", sampleOut(3, "s", utc.Truncate(time.Second))},
		{"fixed zone", sampleOut(2, "s", utc.In(time.FixedZone("", 2*3600+30*60)))},
		{"unicode stream", sampleOut(2, "flux-é✓", utc)},
		{"html stream", sampleOut(2, "a<b>&c", utc)}, // escaped by the encoder: slow path
		{"duplicate", func() wire.AppendOut { o := sampleOut(2, "s", utc); o.Duplicate = true; return o }()},
		{"empty", wire.AppendOut{Events: []wire.AppendedEvent{}}},
		{"nil events", wire.AppendOut{}},
		{"zero event", wire.AppendOut{Events: make([]wire.AppendedEvent, 1)}},
	}
	for _, tc := range fromServer {
		t.Run(tc.name, func(t *testing.T) {
			body := serverBody(t, tc.out)
			var want wire.AppendOut
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(&want); err != nil {
				t.Fatal(err)
			}
			var got wire.AppendOut
			if err := decodeAppendOut(bytes.NewReader(body), &got); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got, timeExact); d != "" {
				t.Fatalf("differs from encoding/json (-json +fast):\n%s", d)
			}
		})
	}
	// The shape the node writes must take the fast path.
	if _, ok := fastDecodeAppendOut(serverBody(t, sampleOut(100, "bench-3", utc))); !ok {
		t.Fatal("fast decoder declined the node's own output")
	}

	raw := []struct {
		name, body string
		accept     bool
	}{
		{"whitespace", " {\n \"events\" : [ { \"version\" : 0 , \"position\" : 12 } ] , \"duplicate\" : false } \n\t", true},
		{"empty leaf hash", `{"events":[{"leaf_hash":""}]}`, true},
		{"short base64", `{"events":[{"leaf_hash":"AA=="}]}`, true},
		{"uuid forms", `{"events":[{"id":"{0b6e8a57-2f0d-4f3e-9d7e-6c1a2b3c4d5e}"},{"id":"0b6e8a572f0d4f3e9d7e6c1a2b3c4d5e"}]}`, true},
		{"time offset", `{"events":[{"recorded_at":"2026-03-14T15:09:26.5+02:00"}]}`, true},
		{"time no fraction", `{"events":[{"recorded_at":"2026-03-14T15:09:26Z"}]}`, true},
		{"max uint64", `{"events":[{"version":18446744073709551615}]}`, true},

		{"null", `null`, false},
		{"null events", `{"events":null}`, false},
		{"null time", `{"events":[{"recorded_at":null}]}`, false},
		{"null leaf hash", `{"events":[{"leaf_hash":null}]}`, false},
		{"bad base64", `{"events":[{"leaf_hash":"A"}]}`, false},
		{"bad base64 padding", `{"events":[{"leaf_hash":"AAA"}]}`, false},
		{"bad uuid", `{"events":[{"id":"nope"}]}`, false},
		{"bad time", `{"events":[{"recorded_at":"yesterday"}]}`, false},
		{"time not a string", `{"events":[{"recorded_at":1}]}`, false},
		{"negative", `{"events":[{"version":-1}]}`, false},
		{"float", `{"events":[{"version":1.0}]}`, false},
		{"leading zero", `{"events":[{"version":01}]}`, false},
		{"overflow", `{"events":[{"version":18446744073709551616}]}`, false},
		{"unknown key", `{"events":[],"next":1}`, false},
		{"case variant", `{"Events":[]}`, false},
		{"duplicate key", `{"duplicate":true,"duplicate":false}`, false},
		{"escaped stream", `{"events":[{"stream":"a\u003cb"}]}`, false},
		{"trailing data", `{} {}`, false},
		{"truncated", `{"events":[`, false},
		{"bad literal", `{"duplicate":tru}`, false},
		{"literal run-on", `{"duplicate":truex}`, false},
	}
	for _, tc := range raw {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fastDecodeAppendOut([]byte(tc.body))
			if ok != tc.accept {
				t.Fatalf("fast decoder accepted = %v, want %v", ok, tc.accept)
			}
			if !ok {
				return
			}
			var want wire.AppendOut
			if err := json.Unmarshal([]byte(tc.body), &want); err != nil {
				t.Fatalf("fast decoder accepted a body encoding/json refuses: %v", err)
			}
			if d := cmp.Diff(want, got, timeExact); d != "" {
				t.Fatalf("differs from encoding/json (-json +fast):\n%s", d)
			}
		})
	}
}

// TestDecodeAppendOutErrors checks that decodeAppendOut fails where
// json.Decoder.Decode fails, with the same error, and like it ignores what
// follows the first value.
func TestDecodeAppendOutErrors(t *testing.T) {
	lost := errors.New("connection lost")
	for _, tc := range []struct {
		name string
		r    func() io.Reader
	}{
		{"syntax", func() io.Reader { return strings.NewReader(`{"events":[}`) }},
		{"type", func() io.Reader { return strings.NewReader(`{"events":[{"version":"x"}]}`) }},
		{"empty", func() io.Reader { return strings.NewReader(``) }},
		{"trailing ignored", func() io.Reader { return strings.NewReader(`{"duplicate":true} garbage`) }},
		{"read error mid-value", func() io.Reader {
			return io.MultiReader(strings.NewReader(`{"events":[`), failingReader{lost})
		}},
		{"read error after value", func() io.Reader {
			return io.MultiReader(strings.NewReader(`{"duplicate":true}`), failingReader{lost})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want, got wire.AppendOut
			wantErr := json.NewDecoder(tc.r()).Decode(&want)
			gotErr := decodeAppendOut(tc.r(), &got)
			if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
				t.Fatalf("error %v, want %v", gotErr, wantErr)
			}
			if d := cmp.Diff(want, got, timeExact); d != "" {
				t.Fatalf("differs (-json +fast):\n%s", d)
			}
		})
	}
}

func FuzzFastDecodeAppendOut(f *testing.F) {
	for _, b := range jsontest.Seeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := fastDecodeAppendOut(body)
		if !ok {
			return
		}
		var want wire.AppendOut
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("fast decoder accepted %q, encoding/json refuses it: %v", body, err)
		}
		if d := cmp.Diff(want, got, timeExact); d != "" {
			t.Fatalf("differs from encoding/json on %q (-json +fast):\n%s", body, d)
		}
	})
}

// BenchmarkAppendCodecs compares the fast codecs with encoding/json, their
// reference (the encoder must produce json.Marshal's bytes: they are what
// the node stores), and the answer's decoder with encoding/json/v2 too
// (github.com/go-json-experiment/json, the node's decoder): the fast
// paths stay only while they are measured faster. On a 100-event append
// of 256-byte payloads and its response.
func BenchmarkAppendCodecs(b *testing.B) {
	payload := json.RawMessage(`{"k":"` + strings.Repeat("v", 248) + `"}`)
	in := wire.StreamAppendIn{ExpectedVersion: events.ExpectAny, Events: make([]wire.EventIn, 100)}
	for i := range in.Events {
		in.Events[i] = wire.EventIn{Type: "BenchEvent", Data: payload}
	}
	resp := serverBody(b, sampleOut(100, "bench-3", time.Now().UTC()))
	b.Run("encode/fast", func(b *testing.B) {
		for b.Loop() {
			encodeStreamAppend(in)
		}
	})
	b.Run("encode/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(in)
		}
	})
	b.Run("decode/fast", func(b *testing.B) {
		for b.Loop() {
			var out wire.AppendOut
			_ = decodeAppendOut(bytes.NewReader(resp), &out)
		}
	})
	b.Run("decode/json", func(b *testing.B) {
		for b.Loop() {
			var out wire.AppendOut
			_ = json.NewDecoder(bytes.NewReader(resp)).Decode(&out)
		}
	})
	b.Run("decode/v2", func(b *testing.B) {
		for b.Loop() {
			var out wire.AppendOut
			_ = jsonv2.UnmarshalRead(bytes.NewReader(resp), &out)
		}
	})
}
