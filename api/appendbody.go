package api

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/greffe/greffe/internal/jsonscan"
	"github.com/greffe/greffe/wire"
)

// The single-stream append body (POST /v1/streams/{stream}) is the hottest
// request the node decodes. fastDecodeStreamAppend is a hand-written
// decoder for the plain shape clients actually send, kept because it is
// measured faster than the reference decoder, events.DecodeJSON
// (encoding/json/v2), on the same body in the same run (docs/PERFORMANCE.md;
// BenchmarkDecodeStreamAppend, a 100-event body of 256-byte payloads,
// go test ./api -run '^$' -bench DecodeStreamAppend -count 3, 2 shared
// cores, issue #21: 90-92 µs, 37.6 KB and 112 allocations against 152-193
// µs, 64.8 KB and 313 with v2). It is only a shortcut: DecodeJSON is the
// reference. The fast path accepts a body only when it is sure DecodeJSON
// would accept it and produce the same value, and declines everything else
// (odd names, escapes, null, malformed input, ...), which then goes through
// DecodeJSON, so every error and every edge case is the reference's.
// FuzzFastDecodeStreamAppend checks this.

// decodeStreamAppend is decodeBody for wire.StreamAppendIn with the fast
// path in front: same Content-Type check, same size limit, same errors.
func decodeStreamAppend(w http.ResponseWriter, r *http.Request, v *wire.StreamAppendIn) error {
	if err := checkContentType(r); err != nil {
		return err
	}
	body, err := readAppendBody(http.MaxBytesReader(w, r.Body, maxBodyBytes), r.ContentLength)
	if err != nil {
		return readError(err) // over the limit, or the connection lost: as DecodeStrict
	}
	if fv, ok := fastDecodeStreamAppend(body); ok {
		*v = fv
		return nil
	}
	return decodeBytes(body, v)
}

// readAppendBody is io.ReadAll with the buffer sized from Content-Length when the
// client sent one (it is only a hint: the reader enforces the limit).
func readAppendBody(rd io.Reader, contentLength int64) ([]byte, error) {
	n := 512
	if contentLength > 0 && contentLength <= maxBodyBytes {
		n = int(contentLength) + 1 // +1: the read that sees EOF needs no growth
	}
	b := make([]byte, 0, n)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// maxRawDepth bounds the nesting of data and metadata on the fast path.
// The reference decoder refuses documents nested deeper than 10000 levels
// counted from the top of the body, which a check of the sub-value alone
// cannot see; deeper values are left to it.
const maxRawDepth = 1000

// The names of the body and of an event, in the order of the fast path's
// switches.
var (
	bodyNames  = []string{"stream", "expected_version", "events"}
	eventNames = []string{"id", "type", "data", "metadata", "correlation_id", "causation_id"}
)

// fastDecodeStreamAppend decodes body as DecodeJSON would decode it into
// a wire.StreamAppendIn, or returns false when the body is not the plain
// shape it handles. It accepts only: the exact names stream,
// expected_version and events at the top, and id, type, data, metadata,
// correlation_id, causation_id in an event, each at most once; strings
// without escapes, control bytes or invalid UTF-8; no null as a field value;
// expected_version as a string or a non-negative integer that
// events.Expected accepts; data and metadata that are JSON text without a
// name given twice (or escaped). data and metadata alias body (capped, so
// an append to one cannot overwrite the next).
func fastDecodeStreamAppend(body []byte) (wire.StreamAppendIn, bool) {
	var out wire.StreamAppendIn
	p := fastScanner{jsonscan.Scanner{B: body}}
	ok := p.Fields(bodyNames, func(i int) bool {
		switch i {
		case 0:
			s, ok := p.PlainString()
			out.Stream = string(s)
			return ok
		case 1:
			raw, ok := p.expectedRaw()
			return ok && out.ExpectedVersion.UnmarshalJSON(raw) == nil
		default:
			evs, ok := p.events()
			out.Events = evs
			return ok
		}
	})
	return out, ok && p.End()
}

// events decodes the events array.
func (p *fastScanner) events() ([]wire.EventIn, bool) {
	evs := []wire.EventIn{} // "[]" decodes to an empty, non-nil slice
	ok := p.Array(func() bool {
		var e, prev wire.EventIn
		if len(evs) > 0 {
			prev = evs[len(evs)-1]
		}
		ok := p.Fields(eventNames, func(i int) bool {
			var ok bool
			switch i {
			case 0:
				var s []byte
				s, ok = p.PlainString()
				e.ID = string(s)
			case 1:
				var s []byte
				s, ok = p.PlainString()
				e.Type = internString(s, prev.Type)
			case 2:
				e.Data, ok = p.rawValue()
			case 3:
				e.Metadata, ok = p.rawValue()
			case 4:
				var s []byte
				s, ok = p.PlainString()
				e.CorrelationID = internString(s, prev.CorrelationID)
			default:
				var s []byte
				s, ok = p.PlainString()
				e.CausationID = internString(s, prev.CausationID)
			}
			return ok
		})
		evs = append(evs, e)
		return ok
	})
	return evs, ok
}

// fastScanner is the shared cursor with the append body's own readers
// (events, expectedRaw, rawValue) on top.
type fastScanner struct{ jsonscan.Scanner }

// internString returns prev when s equals it (no allocation: events of one append
// usually share their type), else a copy of s.
func internString(s []byte, prev string) string {
	if string(s) == prev {
		return prev
	}
	return string(s)
}

// expectedRaw returns the bytes of an expected_version value: a string (as
// PlainString accepts it, quotes included) or a non-negative integer
// without leading zeros, sign, fraction or exponent, whatever its size
// (ExpectedVersion.UnmarshalJSON then decides).
func (p *fastScanner) expectedRaw() ([]byte, bool) {
	p.Space()
	start := p.I
	if p.I < len(p.B) && p.B[p.I] == '"' {
		if _, ok := p.PlainString(); !ok {
			return nil, false
		}
		return p.B[start:p.I], true
	}
	return p.Digits()
}

// rawValue returns the bytes of any JSON value except null, exactly as
// the reference hands them to json.RawMessage (no surrounding
// whitespace), capped so that appending to it reallocates: JSON text
// (jsonscan.Valid) in which no object gives a name twice, as the
// reference refuses (SkipValueUniqueNames).
func (p *fastScanner) rawValue() (json.RawMessage, bool) {
	p.Space()
	start := p.I
	if !p.SkipValueUniqueNames(maxRawDepth) {
		return nil, false
	}
	v := p.B[start:p.I:p.I]
	if string(v) == "null" {
		return nil, false
	}
	// SkipValueUniqueNames only matched brackets and strings. This scan
	// and the log's own (events.Check) read data twice: kept, because it
	// is what lets the fast path promise to take only what the reference
	// takes (FuzzFastDecodeStreamAppend), and it costs 106-113 ns per
	// 256-byte object (BenchmarkValidJSON, issue #21), under 1 % of the
	// node's 16 µs of CPU per event at 16 writers × 100 events
	// (docs/PERFORMANCE.md). Dropping it would need every refusal of a
	// fast-path body to ask the reference again for its answer.
	if !jsonscan.Valid(v) {
		return nil, false
	}
	return v, true
}
