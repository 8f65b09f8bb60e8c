package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/bench"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// TestAPI_ReadEntries reads the global log as stored bytes and checks it
// against the JSON pages: the same events, in order, and each raw entry
// hashes to the event's leaf hash (the bytes are exactly those hashed).
func TestAPI_ReadEntries(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	for i := range 50 {
		evs := []wire.EventIn{{Type: "T", Data: json.RawMessage(fmt.Sprintf(`{"i":%d,  "s":"é"}`, i))}}
		if _, err := c.Append(t.Context(), fmt.Sprintf("e-%d", i%3), events.ExpectAny, evs); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.ReadAll(t.Context(), events.ReadOptions{From: 0, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Pos, Version uint64
		Stream, Data string
		Leaf         [32]byte
	}
	var want []seen
	for _, e := range page.Events {
		want = append(want, seen{e.Position, e.Version, e.Stream, string(e.Data), e.LeafHash})
	}
	for _, tc := range []struct {
		name        string
		from        uint64
		limit       int
		first, next uint64
	}{
		{"all", 0, 0, 0, 50},
		{"a middle page", 7, 10, 7, 17},
		{"the tail", 45, 10, 45, 50},
		{"past the head", 60, 0, 50, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []seen
			next, err := c.ReadEntries(t.Context(), tc.from, tc.limit, func(raw []byte, e events.Event) error {
				got = append(got, seen{e.Position, e.Version, strings.Clone(e.Stream), string(e.Data), events.LeafHash(raw)})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if next != tc.next {
				t.Errorf("next %d, want %d", next, tc.next)
			}
			if diff := cmp.Diff(want[tc.first:tc.next], got); len(got) > 0 && diff != "" {
				t.Errorf("(-JSON pages +entries):\n%s", diff)
			}
			if len(got) != int(tc.next-tc.first) {
				t.Errorf("%d entries, want %d", len(got), tc.next-tc.first)
			}
		})
	}
	for _, tc := range []struct{ path, field string }{
		{"/v1/all?format=entries&limit=0", "limit"},
		{"/v1/all?format=entries&limit=99999999", "limit"},
		{"/v1/all?format=entries&from=x", "from"},
		{"/v1/all?format=entries&direction=backward", "direction"},
		{"/v1/all?format=yaml", "format"},
	} {
		_, err := c.Get(t.Context(), tc.path)
		var ae *wire.Error
		if !errors.As(err, &ae) || ae.Code != "invalid_query" || ae.Status != 400 || ae.Field != tc.field {
			t.Errorf("%s: %v, want 400 invalid_query on %s", tc.path, err, tc.field)
		}
	}
}

// TestClient_ReadEntriesCutShort: an answer that holds fewer entries than it
// announced is an error, never a short read taken for the head.
func TestClient_ReadEntriesCutShort(t *testing.T) {
	n := startNode(t, nil)
	c := client.New(n.url, "")
	for i := range 3 {
		if _, err := c.Append(t.Context(), "cut", events.ExpectAny, []wire.EventIn{{Type: "T", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.Stream(t.Context(), "/v1/all?format=entries")
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 4096)
	m, _ := resp.Body.Read(body)
	resp.Body.Close()
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", api.EntriesContentType)
		w.Header().Set("Greffe-From", "0")
		w.Header().Set("Greffe-Entries", "3")
		_, _ = w.Write(body[:m-10]) // the last entry cut short
	}))
	defer cut.Close()
	_, err = client.New(cut.URL, "").ReadEntries(t.Context(), 0, 0, func([]byte, events.Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "of 3") {
		t.Fatalf("a cut answer: %v, want an error saying how many of 3 it held", err)
	}
}

// BenchmarkHTTPReadAll reads 200,000 events of 256 bytes in order over HTTP
// on loopback (client and server in one process): as JSON pages of 10,000,
// and as stored bytes (format=entries), decoded by the client both ways.
//
//	go test ./api -run '^$' -bench HTTPReadAll -benchtime 5x
func BenchmarkHTTPReadAll(b *testing.B) {
	n := startNode(b, nil)
	c := client.New(n.url, "")
	const total = 200_000
	payload := bench.Payload(256)
	for i := 0; i < total; i += 1000 {
		in := make([]wire.EventIn, 1000)
		for j := range in {
			in[j] = wire.EventIn{Type: "BenchEvent", Data: payload}
		}
		if _, err := c.Append(b.Context(), fmt.Sprintf("r-%d", i%7), events.ExpectAny, in); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("json", func(b *testing.B) {
		for range b.N {
			read := 0
			for from := uint64(0); from < total; {
				page, err := c.ReadAll(b.Context(), events.ReadOptions{From: from, Limit: events.MaxReadLimit})
				if err != nil {
					b.Fatal(err)
				}
				read += len(page.Events)
				from += uint64(len(page.Events))
			}
			if read != total {
				b.Fatalf("read %d", read)
			}
		}
		b.ReportMetric(float64(b.N*total)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("entries", func(b *testing.B) {
		for range b.N {
			read := 0
			next, err := c.ReadEntries(b.Context(), 0, total, func([]byte, events.Event) error { read++; return nil })
			if err != nil || next != total || read != total {
				b.Fatalf("read %d to %d: %v", read, next, err)
			}
		}
		b.ReportMetric(float64(b.N*total)/b.Elapsed().Seconds(), "events/s")
	})
}
