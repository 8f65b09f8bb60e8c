package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/jsonscan/jsontest"
)

// sameAsWriteJSON checks that writeAppendOut writes the bytes writeJSON
// writes for o.
func sameAsWriteJSON(t *testing.T, o events.Outcome) {
	t.Helper()
	want := httptest.NewRecorder()
	writeJSON(want, 200, appendOut(o))
	got := httptest.NewRecorder()
	writeAppendOut(got, o)
	if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
		t.Fatalf("writeAppendOut wrote\n%s\nwriteJSON\n%s", got.Body.Bytes(), want.Body.Bytes())
	}
}

func TestAppendOut_SameBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	streams := []string{"orders-1", "a", "bench-15", "<html>", "é-accent", "quote\"d", "back\\slash", "x\u2028y", "tab\tname"}
	times := []time.Time{time.Unix(0, 0).UTC(), time.Unix(1_780_000_000, 123456789).UTC(), time.Unix(1_780_000_000, 100).In(time.FixedZone("X", 3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	for round := range 200 {
		o := events.Outcome{Duplicate: round%7 == 0}
		for range rng.IntN(5) {
			var e events.Event
			e.ID = uuid.New()
			e.Stream = streams[rng.IntN(len(streams))]
			e.Version, e.Position = rng.Uint64(), rng.Uint64N(1<<40)
			for i := range e.LeafHash {
				e.LeafHash[i] = byte(rng.Uint32())
			}
			e.RecordedAt = times[rng.IntN(len(times))]
			o.Events = append(o.Events, e)
		}
		sameAsWriteJSON(t, o)
	}
	sameAsWriteJSON(t, events.Outcome{})
}

// FuzzAppendOut: whatever the stream name and the numbers, the hand-written
// answer is encoding/json's.
func FuzzAppendOut(f *testing.F) {
	for i, s := range jsontest.Strings() {
		f.Add(s, uint64(i), uint64(7*i), int64(i)*1_780_000_000_123456789/4, i%2 == 1)
	}
	f.Fuzz(func(t *testing.T, stream string, version, position uint64, ns int64, dup bool) {
		e := events.Event{ID: uuid.NewSHA1(uuid.NameSpaceURL, []byte(stream)), Stream: stream, Version: version, Position: position,
			RecordedAt: time.Unix(0, ns).UTC()}
		e.LeafHash[0] = byte(version)
		o := events.Outcome{Events: []events.Event{e, e}, Duplicate: dup}
		if _, err := json.Marshal(appendOut(o)); err != nil {
			return
		}
		sameAsWriteJSON(t, o)
	})
}

// discardWriter is a ResponseWriter that keeps nothing, so that a
// benchmark measures the writing of the answer, not a recorder's buffer.
type discardWriter struct{ h http.Header }

func (w discardWriter) Header() http.Header       { return w.h }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

// BenchmarkAppendOut compares the hand-written answer with its reference
// (writeJSON of appendOut: encoding/json) on the answer to a 100-event
// append; the fast path stays only while it is measured faster.
func BenchmarkAppendOut(b *testing.B) {
	o := events.Outcome{Events: make([]events.Event, 100)}
	at := time.Unix(1_780_000_000, 123456789).UTC()
	for i := range o.Events {
		e := &o.Events[i]
		e.ID, e.Stream, e.Version, e.Position = uuid.New(), "bench-3", uint64(i), uint64(1000+i)
		e.RecordedAt = at.Add(time.Duration(i) * time.Microsecond)
		for j := range e.LeafHash {
			e.LeafHash[j] = byte(i*31 + j)
		}
	}
	w := discardWriter{http.Header{}}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeAppendOut(w, o)
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeJSON(w, http.StatusOK, appendOut(o))
		}
	})
}
