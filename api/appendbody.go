package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
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
	// Same check and message as decodeBody.
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &Error{Status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedMedia, Message: "send the body as application/json"}
	}
	body, err := readAppendBody(http.MaxBytesReader(w, r.Body, maxBodyBytes), r.ContentLength)
	if err != nil {
		// Replay the bytes read and then the same read error (over the
		// limit, connection lost): DecodeStrict sees exactly the stream it
		// would have read from the body and reports what it reports today.
		return DecodeStrict(io.MultiReader(bytes.NewReader(body), replayErr{err}), v)
	}
	if fv, ok := fastDecodeStreamAppend(body); ok {
		*v = fv
		return nil
	}
	return DecodeStrict(bytes.NewReader(body), v)
}

// replayErr is a reader that only fails.
type replayErr struct{ err error }

func (e replayErr) Read([]byte) (int, error) { return 0, e.err }

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
	p := fastScanner{b: body}
	if !p.consume('{') {
		return out, false
	}
	var seen uint8
	if !p.consume('}') {
		for {
			key, ok := p.str()
			if !ok || !p.consume(':') {
				return out, false
			}
			var bit uint8
			switch string(key) {
			case "stream":
				bit = 1
				s, ok := p.str()
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
			if p.consume(',') {
				continue
			}
			if p.consume('}') {
				break
			}
			return out, false
		}
	}
	p.ws()
	return out, p.i == len(p.b)
}

// events decodes the events array.
func (p *fastScanner) events() ([]client.EventIn, bool) {
	if !p.consume('[') {
		return nil, false
	}
	evs := []client.EventIn{} // "[]" decodes to an empty, non-nil slice
	if p.consume(']') {
		return evs, true
	}
	for {
		var e, prev client.EventIn
		if len(evs) > 0 {
			prev = evs[len(evs)-1]
		}
		if !p.consume('{') {
			return nil, false
		}
		var seen uint8
		if !p.consume('}') {
			for {
				key, ok := p.str()
				if !ok || !p.consume(':') {
					return nil, false
				}
				var bit uint8
				switch string(key) {
				case "id":
					bit = 1
					s, ok := p.str()
					if !ok {
						return nil, false
					}
					e.ID = string(s)
				case "type":
					bit = 2
					s, ok := p.str()
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
					s, ok := p.str()
					if !ok {
						return nil, false
					}
					e.CorrelationID = internString(s, prev.CorrelationID)
				case "causation_id":
					bit = 32
					s, ok := p.str()
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
				if p.consume(',') {
					continue
				}
				if p.consume('}') {
					break
				}
				return nil, false
			}
		}
		evs = append(evs, e)
		if p.consume(',') {
			continue
		}
		if p.consume(']') {
			return evs, true
		}
		return nil, false
	}
}

// fastScanner reads the JSON of b from offset i. Every method skips leading
// whitespace and reports false rather than guessing.
type fastScanner struct {
	b []byte
	i int
}

// ws skips JSON whitespace.
func (p *fastScanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// consume skips whitespace and then c, if c is next.
func (p *fastScanner) consume(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string without escapes, control bytes or invalid UTF-8 and
// returns its contents (which are then exactly what encoding/json decodes).
func (p *fastScanner) str() ([]byte, bool) {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	ascii := true
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := p.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			p.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// internString returns prev when s equals it (no allocation: events of one append
// usually share their type), else a copy of s.
func internString(s []byte, prev string) string {
	if string(s) == prev {
		return prev
	}
	return string(s)
}

// expectedRaw returns the bytes of an expected_version value: a string (as
// str accepts it, quotes included) or a non-negative integer without
// leading zeros, sign, fraction or exponent.
func (p *fastScanner) expectedRaw() ([]byte, bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '"' {
		if _, ok := p.str(); !ok {
			return nil, false
		}
		return p.b[start:p.i], true
	}
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - start
	if n == 0 || (n > 1 && p.b[start] == '0') || !p.atDelim() {
		return nil, false
	}
	return p.b[start:p.i], true
}

// atDelim reports whether a number or literal may end here.
func (p *fastScanner) atDelim() bool {
	if p.i == len(p.b) {
		return true
	}
	switch p.b[p.i] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// rawValue returns the bytes of any JSON value except null, exactly as
// encoding/json hands them to json.RawMessage (no surrounding whitespace),
// capped so that appending to it reallocates.
func (p *fastScanner) rawValue() (json.RawMessage, bool) {
	p.ws()
	start := p.i
	if !p.skipValue() {
		return nil, false
	}
	v := p.b[start:p.i:p.i]
	if string(v) == "null" {
		return nil, false
	}
	if !events.ValidJSON(v) {
		return nil, false
	}
	return v, true
}

// skipValue moves past one value by matching brackets and strings only;
// rawValue's events.ValidJSON does the real validation.
func (p *fastScanner) skipValue() bool {
	if p.i >= len(p.b) {
		return false
	}
	switch p.b[p.i] {
	case '{', '[':
		depth := 0
		for p.i < len(p.b) {
			switch p.b[p.i] {
			case '{', '[':
				if depth++; depth > maxRawDepth {
					return false
				}
			case '}', ']':
				if depth--; depth == 0 {
					p.i++
					return true
				}
			case '"':
				if !p.skipString() {
					return false
				}
				continue
			}
			p.i++
		}
		return false
	case '"':
		return p.skipString()
	}
	start := p.i
	for p.i < len(p.b) && !p.atDelim() {
		p.i++
	}
	return p.i > start
}

// skipString moves past a string, escapes included, starting at its quote.
func (p *fastScanner) skipString() bool {
	for j := p.i + 1; j < len(p.b); j++ {
		switch p.b[j] {
		case '\\':
			j++
		case '"':
			p.i = j + 1
			return true
		}
	}
	return false
}
