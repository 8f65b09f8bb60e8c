package api

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/jsonscan"
)

// The single-stream append body (POST /v1/streams/{stream}) is the hottest
// request the node decodes, and reflection-based encoding/json was a large
// share of the append path's CPU. fastDecodeStreamAppend is a hand-written
// decoder for the plain shape clients actually send. It is only a shortcut:
// DecodeStrict is the reference. The fast path accepts a body only when it
// is sure DecodeStrict would accept it and produce the same value, and
// declines everything else (odd keys, escapes, null, malformed input, ...),
// which then goes through DecodeStrict, so every error and every edge case
// behaves exactly as before. FuzzFastDecodeStreamAppend checks this.

// decodeStreamAppend is decodeBody for client.StreamAppendIn with the fast
// path in front: same Content-Type check, same size limit, same errors.
func decodeStreamAppend(w http.ResponseWriter, r *http.Request, v *client.StreamAppendIn) error {
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
// encoding/json refuses documents nested deeper than 10000 levels counted
// from the top of the body, which json.Valid on the sub-value cannot see;
// deeper values are left to DecodeStrict.
const maxRawDepth = 1000

// fastDecodeStreamAppend decodes body as DecodeStrict would decode it into
// a client.StreamAppendIn, or returns false when the body is not the plain
// shape it handles. It accepts only: the exact keys stream,
// expected_version and events at the top, and id, type, data, metadata,
// correlation_id, causation_id in an event, each at most once; strings
// without escapes, control bytes or invalid UTF-8; no null as a field value;
// expected_version as a string or a non-negative integer that
// events.Expected accepts. data and metadata alias body (capped, so an
// append to one cannot overwrite the next).
func fastDecodeStreamAppend(body []byte) (client.StreamAppendIn, bool) {
	var out client.StreamAppendIn
	p := fastScanner{jsonscan.Scanner{B: body}}
	if !p.Consume('{') {
		return out, false
	}
	var seen uint8
	if !p.Consume('}') {
		for {
			key, ok := p.PlainString()
			if !ok || !p.Consume(':') {
				return out, false
			}
			var bit uint8
			switch string(key) {
			case "stream":
				bit = 1
				s, ok := p.PlainString()
				if !ok {
					return out, false
				}
				out.Stream = string(s)
			case "expected_version":
				bit = 2
				raw, ok := p.expectedRaw()
				if !ok || out.ExpectedVersion.UnmarshalJSON(raw) != nil {
					return out, false
				}
			case "events":
				bit = 4
				evs, ok := p.events()
				if !ok {
					return out, false
				}
				out.Events = evs
			default:
				return out, false
			}
			if seen&bit != 0 {
				return out, false
			}
			seen |= bit
			if p.Consume(',') {
				continue
			}
			if p.Consume('}') {
				break
			}
			return out, false
		}
	}
	return out, p.End()
}

// events decodes the events array.
func (p *fastScanner) events() ([]client.EventIn, bool) {
	if !p.Consume('[') {
		return nil, false
	}
	evs := []client.EventIn{} // "[]" decodes to an empty, non-nil slice
	if p.Consume(']') {
		return evs, true
	}
	for {
		var e, prev client.EventIn
		if len(evs) > 0 {
			prev = evs[len(evs)-1]
		}
		if !p.Consume('{') {
			return nil, false
		}
		var seen uint8
		if !p.Consume('}') {
			for {
				key, ok := p.PlainString()
				if !ok || !p.Consume(':') {
					return nil, false
				}
				var bit uint8
				switch string(key) {
				case "id":
					bit = 1
					s, ok := p.PlainString()
					if !ok {
						return nil, false
					}
					e.ID = string(s)
				case "type":
					bit = 2
					s, ok := p.PlainString()
					if !ok {
						return nil, false
					}
					e.Type = internString(s, prev.Type)
				case "data":
					bit = 4
					if e.Data, ok = p.rawValue(); !ok {
						return nil, false
					}
				case "metadata":
					bit = 8
					if e.Metadata, ok = p.rawValue(); !ok {
						return nil, false
					}
				case "correlation_id":
					bit = 16
					s, ok := p.PlainString()
					if !ok {
						return nil, false
					}
					e.CorrelationID = internString(s, prev.CorrelationID)
				case "causation_id":
					bit = 32
					s, ok := p.PlainString()
					if !ok {
						return nil, false
					}
					e.CausationID = internString(s, prev.CausationID)
				default:
					return nil, false
				}
				if seen&bit != 0 {
					return nil, false
				}
				seen |= bit
				if p.Consume(',') {
					continue
				}
				if p.Consume('}') {
					break
				}
				return nil, false
			}
		}
		evs = append(evs, e)
		if p.Consume(',') {
			continue
		}
		if p.Consume(']') {
			return evs, true
		}
		return nil, false
	}
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
// encoding/json hands them to json.RawMessage (no surrounding whitespace),
// capped so that appending to it reallocates.
func (p *fastScanner) rawValue() (json.RawMessage, bool) {
	p.Space()
	start := p.I
	if !p.SkipValue(maxRawDepth) {
		return nil, false
	}
	v := p.B[start:p.I:p.I]
	if string(v) == "null" {
		return nil, false
	}
	if !events.ValidJSON(v) { // SkipValue only matched brackets and strings
		return nil, false
	}
	return v, true
}
