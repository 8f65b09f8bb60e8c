package events

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

// TestEvent_AppendJSON: the public JSON shape of an event, written by
// hand so that data and metadata go out as stored. Where encoding/json
// would write the same bytes (compact data, nothing to HTML-escape), the
// shape is exactly what it wrote before (the API's answers did not move);
// where it would not, the stored bytes win, and every answer decodes back
// to the same event.
func TestEvent_AppendJSON(t *testing.T) {
	at := time.Date(2026, 12, 4, 21, 0, 0, 123456000, time.FixedZone("CET", 3600))
	base := Event{Position: 7, Stream: "mission-1", Version: 2, ID: uuid.MustParse("81c3d96b-08c1-4bc7-bc27-00c72bfb7189"),
		Type: "MissionCreated", RecordedAt: at, LeafHash: [32]byte{1, 2, 3}}
	with := func(f func(e *Event)) Event { e := base; f(&e); return e }
	// reference is how MarshalJSON wrote an event before: encoding/json.
	reference := func(e Event) []byte {
		b, err := json.Marshal(eventJSON{Position: e.Position, Stream: e.Stream, Version: e.Version, ID: e.ID, Type: e.Type,
			Data: nonEmptyJSON(e.Data), Metadata: nonEmptyJSON(e.Metadata), RecordedAt: e.RecordedAt.UTC(),
			CorrelationID: e.CorrelationID, CausationID: e.CausationID, Actor: e.Actor, Envelope: e.Envelope, LeafHash: e.LeafHash[:]})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	plain := []struct {
		name string
		e    Event
	}{
		{"empty data and metadata", base},
		{"compact data", with(func(e *Event) {
			e.Data = json.RawMessage(`{"a":1,"b":[true,null]}`)
			e.Metadata = json.RawMessage(`{"m":"x"}`)
		})},
		{"ids and actor", with(func(e *Event) { e.CorrelationID, e.CausationID, e.Actor = "c-1", "k-2", "owner" })},
		{"an envelope", with(func(e *Event) {
			e.Envelope = &Envelope{PayloadType: "application/vnd.greffe.measurement+json", Signatures: []Signature{{KeyID: "ed25519:ab", Sig: []byte{9, 9}}}}
		})},
		{"whole seconds", with(func(e *Event) { e.RecordedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })},
	}
	for _, tc := range plain {
		if diff := cmp.Diff(string(reference(tc.e)), string(tc.e.AppendJSON(nil))); diff != "" {
			t.Errorf("%s: AppendJSON differs from encoding/json's shape (-before +now):\n%s", tc.name, diff)
		}
	}

	stored := []struct {
		name, data, meta, stream string
	}{
		{"HTML-sensitive bytes", `{"note":"a<b & c>d"}`, `{"s":"<script>"}`, "a<b>&c"},
		{"whitespace as sent", `{ "a" : 1,  "b" : [ 1 , 2 ] }`, "{\n\t\"m\": true\n}", "s"},
		{"non-ASCII text and escapes", `{"été":"naïve — ✓","e":"\u00e9\t\""}`, `{"ligne":"\u2028"}`, "flux-é"},
	}
	for _, tc := range stored {
		e := with(func(e *Event) {
			e.Data, e.Metadata, e.Stream = json.RawMessage(tc.data), json.RawMessage(tc.meta), tc.stream
		})
		got := e.AppendJSON(nil)
		for what, want := range map[string]string{"data": tc.data, "metadata": tc.meta} {
			if !bytes.Contains(got, []byte(`"`+what+`":`+want+`,`)) {
				t.Errorf("%s: the %s is not the stored bytes: %s", tc.name, what, got)
			}
		}
		if !json.Valid(got) {
			t.Fatalf("%s: not JSON: %s", tc.name, got)
		}
		var back Event
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		e.RecordedAt = e.RecordedAt.UTC()
		back.RecordedAt = back.RecordedAt.UTC()
		if diff := cmp.Diff(e, back); diff != "" {
			t.Errorf("%s: decoded back differently (-written +read):\n%s", tc.name, diff)
		}
	}
}

// TestEvent_AppendJSONLine: one line per event (an SSE data line, JSONL):
// the stored bytes when they hold no line break, compacted (and escaped no
// more) when they do.
func TestEvent_AppendJSONLine(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"one line", `{ "a" : "<b>" }`, `{ "a" : "<b>" }`},
		{"a line feed", "{\n\"a\": \"<b>\"}", `{"a":"<b>"}`},
		{"a carriage return", "{\"a\":\r\n [1, 2]}", `{"a":[1,2]}`},
	} {
		e := Event{Stream: "s", Type: "T", Data: json.RawMessage(tc.data)}
		got := e.AppendJSONLine([]byte("prefix "))
		if !bytes.HasPrefix(got, []byte("prefix ")) || bytes.ContainsAny(got, "\r\n") || !bytes.Contains(got, []byte(`"data":`+tc.want+`,`)) {
			t.Errorf("%s: %q; want one line after the prefix with data %s", tc.name, got, tc.want)
		}
	}
}
