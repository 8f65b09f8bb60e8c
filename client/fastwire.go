package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/greffe/greffe/internal/jsonscan"
	"github.com/greffe/greffe/wire"
)

// Append is the request clients send most, and reflection-based
// encoding/json was a large share of its CPU on both ends of the wire. This
// file holds hand-written codecs for its two bodies: encodeStreamAppend for
// the request and fastDecodeAppendOut for the response. encoding/json is the
// reference for both. The encoder produces exactly json.Marshal's bytes (so
// a node stores the same data bytes whichever path ran) and hands anything
// it is not sure about to json.Marshal; the decoder accepts only the plain
// shape the node writes and hands anything else to encoding/json.
// FuzzEncodeStreamAppend and FuzzFastDecodeAppendOut check both claims.
// They stay while measured faster (BenchmarkAppendCodecs, a 100-event
// append of 256-byte payloads and its answer, go test ./client -run '^$'
// -bench AppendCodecs -count 3, 2 shared cores, issue #21): the request in
// 59-63 µs against json.Marshal's 204-236 µs; the answer in 72-96 µs
// against encoding/json's 323-353 µs and encoding/json/v2's 121-146 µs.

// jsonBody is a request body that is already JSON: raw sends it as is.
type jsonBody []byte

// streamAppendBody returns the body for in: its JSON when the fast encoder
// handles it, else in itself, which raw then passes to json.Marshal (so
// errors, e.g. for invalid data, are those of json.Marshal).
func streamAppendBody(in wire.StreamAppendIn) any {
	if b, ok := encodeStreamAppend(in); ok {
		return jsonBody(b)
	}
	return in
}

// encodeStreamAppend returns json.Marshal(in), or false when in has
// something only json.Marshal should handle: an event with an Envelope, or
// data or metadata that is not valid JSON (json.Marshal then gives the
// error) or holds a string that is not text (json.Marshal then copies it,
// and the node refuses it with invalid_utf8).
func encodeStreamAppend(in wire.StreamAppendIn) ([]byte, bool) {
	// Size the buffer for the plain case: keys, quotes and separators
	// around each field (escaping and fallbacks may still grow it).
	size := 64 + len(in.Stream)
	for i := range in.Events {
		e := &in.Events[i]
		if e.Envelope != nil {
			return nil, false
		}
		size += 12 + len(e.Type) // {"type":""},
		if e.ID != "" {
			size += 8 + len(e.ID)
		}
		if len(e.Data) > 0 {
			size += 8 + len(e.Data)
		}
		if len(e.Metadata) > 0 {
			size += 12 + len(e.Metadata)
		}
		if e.CorrelationID != "" {
			size += 20 + len(e.CorrelationID)
		}
		if e.CausationID != "" {
			size += 18 + len(e.CausationID)
		}
	}
	b := make([]byte, 0, size)
	b = append(b, '{')
	if in.Stream != "" {
		b = append(b, `"stream":`...)
		b = jsonscan.AppendMarshalString(b, in.Stream)
		b = append(b, ',')
	}
	x, err := in.ExpectedVersion.MarshalJSON()
	if err != nil || !plainJSON(x) {
		return nil, false
	}
	b = append(b, `"expected_version":`...)
	b = append(b, x...)
	b = append(b, `,"events":`...)
	if in.Events == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range in.Events {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendEventIn(b, &in.Events[i]); !ok {
				return nil, false
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

// appendEventIn appends one event in json.Marshal's field order, omitting
// what omitempty omits. Envelope was checked nil by the caller.
func appendEventIn(b []byte, e *wire.EventIn) ([]byte, bool) {
	b = append(b, '{')
	if e.ID != "" {
		b = append(b, `"id":`...)
		b = jsonscan.AppendMarshalString(b, e.ID)
		b = append(b, ',')
	}
	b = append(b, `"type":`...)
	b = jsonscan.AppendMarshalString(b, e.Type)
	var ok bool
	if len(e.Data) > 0 {
		b = append(b, `,"data":`...)
		if b, ok = appendRawJSON(b, e.Data); !ok {
			return nil, false
		}
	}
	if len(e.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		if b, ok = appendRawJSON(b, e.Metadata); !ok {
			return nil, false
		}
	}
	if e.CorrelationID != "" {
		b = append(b, `,"correlation_id":`...)
		b = jsonscan.AppendMarshalString(b, e.CorrelationID)
	}
	if e.CausationID != "" {
		b = append(b, `,"causation_id":`...)
		b = jsonscan.AppendMarshalString(b, e.CausationID)
	}
	return append(b, '}'), true
}

// appendRawJSON appends a json.RawMessage as json.Marshal does: json.Marshal
// compacts it and escapes <, >, &, U+2028 and U+2029, so raw bytes are
// copied only when that changes nothing; otherwise json.Marshal of the
// value itself gives the exact bytes. False when raw is not valid JSON or
// not text (jsonscan.Valid): json.Marshal then decides.
func appendRawJSON(b, raw []byte) ([]byte, bool) {
	if !jsonscan.Valid(raw) {
		return nil, false
	}
	if plainJSON(raw) {
		return append(b, raw...), true
	}
	m, err := json.Marshal(json.RawMessage(raw))
	if err != nil {
		return nil, false
	}
	return append(b, m...), true
}

// plainJSON reports whether valid JSON v is left unchanged by json.Marshal's
// compaction: no whitespace outside strings and nothing it escapes (<, >,
// &, U+2028, U+2029).
func plainJSON(v []byte) bool {
	inString := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '"':
			inString = !inString
		case '\\':
			i++ // only inside strings in valid JSON; skip the escaped byte
		case ' ', '\t', '\n', '\r':
			if !inString {
				return false
			}
		case '<', '>', '&':
			return false
		case 0xE2:
			if i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8 {
				return false
			}
		}
	}
	return true
}

// doAppend sends an append and decodes its AppendOut, with the fast decoder
// in front of encoding/json.
func (c *Client) doAppend(ctx context.Context, method, path string, body any, out *wire.AppendOut) error {
	resp, err := c.raw(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := decodeAppendOut(resp.Body, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// bufPool holds response buffers: nothing decoded aliases them.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// decodeAppendOut decodes a response into *out (which must be zero) as
// json.NewDecoder(r).Decode(out) does, trying fastDecodeAppendOut first.
func decodeAppendOut(r io.Reader, out *wire.AppendOut) error {
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			bufPool.Put(buf)
		}
	}()
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		// Replay the bytes read, then the error: the decoder sees the same
		// stream it would have read from r.
		return json.NewDecoder(io.MultiReader(bytes.NewReader(buf.Bytes()), failingReader{err})).Decode(out)
	}
	if v, ok := fastDecodeAppendOut(buf.Bytes()); ok {
		*out = v
		return nil
	}
	return json.NewDecoder(bytes.NewReader(buf.Bytes())).Decode(out)
}

// failingReader is a reader that only fails.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

// fastDecodeAppendOut decodes b as json.Unmarshal would decode it into an
// AppendOut, or returns false when b is not the plain shape it handles: the
// exact keys events and duplicate at the top and id, stream, version,
// position, leaf_hash, recorded_at in an event, each at most once; strings
// without escapes, control bytes or invalid UTF-8; integers without sign,
// fraction, exponent or leading zero; no null; nothing after the value but
// whitespace. Each field is converted by the same function encoding/json
// uses: uuid's UnmarshalText, base64.StdEncoding, time.Time's UnmarshalJSON.
func fastDecodeAppendOut(b []byte) (wire.AppendOut, bool) {
	var out wire.AppendOut
	p := wireScanner{jsonscan.Scanner{B: b}}
	ok := p.Fields(appendOutNames, func(i int) bool {
		var ok bool
		if i == 0 {
			out.Events, ok = p.appendedEvents()
		} else {
			out.Duplicate, ok = p.Bool()
		}
		return ok
	})
	if !ok || !p.End() {
		return wire.AppendOut{}, false
	}
	return out, true
}

// The names of the answer and of an appended event, in the order of the
// fast path's switches.
var (
	appendOutNames     = []string{"events", "duplicate"}
	appendedEventNames = []string{"id", "stream", "version", "position", "leaf_hash", "recorded_at"}
)

func (p *wireScanner) appendedEvents() ([]wire.AppendedEvent, bool) {
	evs := []wire.AppendedEvent{} // "[]" decodes to an empty, non-nil slice
	var hashes []byte             // one allocation for many leaf hashes
	ok := p.Array(func() bool {
		var e wire.AppendedEvent
		prevStream := ""
		if len(evs) > 0 {
			prevStream = evs[len(evs)-1].Stream
		}
		ok := p.Fields(appendedEventNames, func(i int) bool {
			switch i {
			case 0:
				s, ok := p.PlainString()
				return ok && e.ID.UnmarshalText(s) == nil
			case 1:
				s, ok := p.PlainString()
				if string(s) == prevStream {
					e.Stream = prevStream // an append's events usually share a stream
				} else {
					e.Stream = string(s)
				}
				return ok
			case 2:
				var ok bool
				e.Version, ok = p.Uint()
				return ok
			case 3:
				var ok bool
				e.Position, ok = p.Uint()
				return ok
			case 4:
				s, ok := p.PlainString()
				if !ok {
					return false
				}
				// As encoding/json: decode into DecodedLen bytes, keep
				// what was written; "" gives an empty, non-nil slice.
				n := base64.StdEncoding.DecodedLen(len(s))
				if cap(hashes)-len(hashes) < n {
					hashes = make([]byte, 0, max(n, 32*64))
				}
				dst := hashes[len(hashes) : len(hashes)+n : len(hashes)+n]
				m, err := base64.StdEncoding.Decode(dst, s)
				if err != nil {
					return false
				}
				if m == 0 {
					e.LeafHash = []byte{}
					return true
				}
				e.LeafHash = dst[:m:m]
				hashes = hashes[:len(hashes)+m]
				return true
			default:
				p.Space()
				start := p.I
				_, ok := p.PlainString()
				return ok && e.RecordedAt.UnmarshalJSON(p.B[start:p.I]) == nil
			}
		})
		evs = append(evs, e)
		return ok
	})
	if !ok {
		return nil, false
	}
	return evs, true
}

// wireScanner is the shared cursor with the append answer's own reader
// (appendedEvents) on top.
type wireScanner struct{ jsonscan.Scanner }
