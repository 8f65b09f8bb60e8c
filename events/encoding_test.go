package events

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

func sampleEvent() Event {
	return Event{
		Position: 7, Stream: "orders-1", Version: 2,
		ID:   uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e"),
		Type: "OrderPlaced", Data: json.RawMessage(`{"qty": 3}`), Metadata: json.RawMessage(`{}`),
		RecordedAt:    time.Unix(1_790_000_000, 123456789).UTC(),
		CorrelationID: "corr", CausationID: "cause", Actor: "alice",
	}
}

// TestEncode_GoldenVector pins format 1: the bytes and the leaf hash of one
// event. Reproduce the hash with:
//
//	python3 -c "import hashlib; print(hashlib.sha256(b'\\x00'+bytes.fromhex('<wantHex>')).hexdigest())"
func TestEncode_GoldenVector(t *testing.T) {
	e := sampleEvent()
	b, err := Encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	const wantHex = "01" + "0000000000000007" + "0000000000000002" + "0f8fad5bd9cb469fa16570867728950e" +
		"18d75b842b4ecd15" + "00086f72646572732d31" + "000b4f72646572506c61636564" + "0004636f7272" +
		"00056361757365" + "0005616c696365" + "0000000a7b22717479223a20337d" + "000000027b7d" + "00"
	if got := hex.EncodeToString(b); got != wantHex {
		t.Fatalf("encoding changed:\n got %s\nwant %s", got, wantHex)
	}
	const wantLeaf = "cd0d6af8d8640758b7d3ffb1d192252aa210cac8bb9e639580e9011678f8ab86"
	leaf := LeafHash(b)
	if got := hex.EncodeToString(leaf[:]); got != wantLeaf {
		t.Fatalf("leaf hash %s, want %s (computed with python3 hashlib over 0x00 || bytes)", got, wantLeaf)
	}
	if len(b) != EncodedSize(&e) {
		t.Fatalf("EncodedSize %d, len %d", EncodedSize(&e), len(b))
	}
}

func TestEncode_RoundTrip(t *testing.T) {
	signed := sampleEvent()
	signed.Envelope = &Envelope{PayloadType: "application/x", Signatures: []Signature{{KeyID: "k1", Sig: []byte{1, 2, 3}}, {KeyID: "k2", Sig: []byte{4}}}}
	empty := sampleEvent()
	empty.Data, empty.Metadata, empty.CorrelationID, empty.CausationID, empty.Actor = json.RawMessage(`{}`), json.RawMessage(`{}`), "", "", ""
	for name, e := range map[string]Event{"plain": sampleEvent(), "signed": signed, "empty fields": empty} {
		t.Run(name, func(t *testing.T) {
			b, err := Encode(&e)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			e.LeafHash = LeafHash(b)
			if diff := cmp.Diff(e, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecode_RejectsNonCanonical(t *testing.T) {
	e := sampleEvent()
	b, _ := Encode(&e)
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short header", b[:20]},
		{"wrong version", append([]byte{2}, b[1:]...)},
		{"truncated", b[:len(b)-1]},
		{"trailing byte", append(append([]byte(nil), b...), 0)},
		{"length past end", append(b[:41:41], 0xff, 0xff)},
		{"invalid utf8 stream", func() []byte {
			c := append([]byte(nil), b...)
			c[43] = 0xff
			return c
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.b)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

// FuzzDecode: decoding arbitrary bytes never panics, and whatever decodes
// re-encodes to exactly the same bytes (the encoding is canonical).
func FuzzDecode(f *testing.F) {
	e := sampleEvent()
	b, _ := Encode(&e)
	f.Add(b)
	e.Envelope = &Envelope{PayloadType: "p", Signatures: []Signature{{KeyID: "k", Sig: []byte("s")}}}
	b2, _ := Encode(&e)
	f.Add(b2)
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Decode(in)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error not marked corrupt: %v", err)
			}
			return
		}
		out, err := Encode(&got)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("not canonical:\n in %x\nout %x", in, out)
		}
	})
}

func TestBatch_RoundTrip(t *testing.T) {
	b := &Batch{RecordedAt: time.Unix(5, 6).UTC(), Appends: []AppendRequest{
		{Streams: []StreamAppend{{Stream: "a", Expected: ExpectVersion(3), Events: []Proposed{
			{ID: uuid.New(), Type: "T", Data: json.RawMessage(`{"a":1}`), Metadata: json.RawMessage(`{}`), Actor: "me",
				Envelope: &Envelope{PayloadType: "p", Signatures: []Signature{{KeyID: "k", Sig: []byte{9}}}}},
		}}, {Stream: "b", Expected: ExpectNoStream, Events: []Proposed{{ID: uuid.New(), Type: "U", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}}}}},
		{Streams: []StreamAppend{{Stream: "c", Expected: ExpectExists, Events: []Proposed{{ID: uuid.New(), Type: "V", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}}}}},
	}}
	got, err := DecodeBatch(EncodeBatch(b))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	enc := EncodeBatch(b)
	if _, err := DecodeBatch(enc[:len(enc)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated batch: %v", err)
	}
}

func TestExpected_JSON(t *testing.T) {
	tests := []struct {
		in   string
		want Expected
		bad  bool
	}{
		{`"any"`, ExpectAny, false},
		{`"no_stream"`, ExpectNoStream, false},
		{`"exists"`, ExpectExists, false},
		{`4`, ExpectVersion(4), false},
		{`"17"`, ExpectVersion(17), false},
		{`-1`, Expected{}, true},
		{`"maybe"`, Expected{}, true},
		{`1.5`, Expected{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var got Expected
			err := json.Unmarshal([]byte(tc.in), &got)
			if (err != nil) != tc.bad {
				t.Fatalf("err = %v, bad = %v", err, tc.bad)
			}
			if !tc.bad && got != tc.want {
				t.Fatalf("got %v want %v", got, tc.want)
			}
		})
	}
	out, _ := json.Marshal(ExpectVersion(3))
	if string(out) != "3" {
		t.Fatalf("marshal: %s", out)
	}
}

// TestFilter_MatchRawAgreesWithMatch: the filter judged on stored bytes
// (before decoding) keeps exactly the events Match keeps.
func TestFilter_MatchRawAgreesWithMatch(t *testing.T) {
	evs := []Event{
		{Stream: "executor-keys-h1", Type: TypeExecutorKeyRegistered},
		{Stream: "executor-keys-h1", Type: "Other"},
		{Stream: "mission-1", Type: "MissionOpened"},
		{Stream: "m", Type: TypeExecutorKeyRevoked},
		{Stream: "", Type: ""},
	}
	filters := []Filter{
		{},
		{StreamPrefix: "executor-keys-"},
		{Types: []string{"MissionOpened", TypeExecutorKeyRevoked}},
		{StreamPrefix: "mission-", Types: []string{"MissionOpened"}},
		{StreamPrefix: "nothing"},
	}
	for i := range evs {
		evs[i].Data, evs[i].Metadata = []byte(`{}`), []byte(`{}`)
		b, err := Encode(&evs[i])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range filters {
			if got, want := f.MatchRaw(b), f.Match(&evs[i]); got != want {
				t.Errorf("filter %+v on %q/%q: MatchRaw %v, Match %v", f, evs[i].Stream, evs[i].Type, got, want)
			}
		}
		stream, typ, ok := PeekStreamType(b)
		if !ok || string(stream) != evs[i].Stream || string(typ) != evs[i].Type {
			t.Errorf("PeekStreamType: %q %q %v", stream, typ, ok)
		}
	}
	for _, short := range [][]byte{nil, {1}, make([]byte, 42)} {
		if _, _, ok := PeekStreamType(short); ok {
			t.Errorf("PeekStreamType of %d bytes: ok", len(short))
		}
	}
}
