package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"
)

// FormatVersion is the first byte of every stored event. A new layout gets a
// new number; an existing layout never changes (auditors verify old bytes).
const FormatVersion byte = 1

// MaxEncodedSize is the largest encoded event: the C2SP tlog-tiles entry
// limit, so every event is a standard log entry. Bulky evidence is referenced
// by digest instead of stored.
const MaxEncodedSize = 65535

// fixedHeaderSize is version(1) + position(8) + version(8) + id(16) + time(8).
const fixedHeaderSize = 1 + 8 + 8 + 16 + 8

// Encode returns the canonical encoding of e (format 1). LeafHash is not part
// of it: it is derived from these bytes.
//
//	offset  size      field
//	0       1         format version = 1
//	1       8         position             (uint64, big-endian)
//	9       8         stream version       (uint64, big-endian)
//	17      16        event id             (UUID bytes)
//	33      8         recorded_at          (int64 Unix nanoseconds, big-endian)
//	41      2+n       stream               (uint16 length, UTF-8 bytes)
//	        2+n       type
//	        2+n       correlation_id
//	        2+n       causation_id
//	        2+n       actor
//	        4+n       data                 (uint32 length, JSON bytes as received)
//	        4+n       metadata
//	        1         signature count k (0 = no envelope)
//	        if k > 0: 2+n payload type, then k times (2+n key id, 2+n signature)
//
// The encoding is a bijection: Decode accepts exactly the outputs of Encode
// (no trailing bytes, no envelope fields without signatures), so equal events
// have equal bytes and equal leaf hashes on every replica.
func Encode(e *Event) ([]byte, error) {
	return AppendEncoded(nil, e)
}

// AppendEncoded appends the canonical encoding of e to dst.
func AppendEncoded(dst []byte, e *Event) ([]byte, error) {
	if err := checkEncodable(e); err != nil {
		return nil, err
	}
	dst = append(dst, FormatVersion)
	dst = binary.BigEndian.AppendUint64(dst, e.Position)
	dst = binary.BigEndian.AppendUint64(dst, e.Version)
	dst = append(dst, e.ID[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.RecordedAt.UnixNano()))
	dst = appendString16(dst, e.Stream)
	dst = appendString16(dst, e.Type)
	dst = appendString16(dst, e.CorrelationID)
	dst = appendString16(dst, e.CausationID)
	dst = appendString16(dst, e.Actor)
	dst = appendBytes32(dst, e.Data)
	dst = appendBytes32(dst, e.Metadata)
	if e.Envelope == nil || len(e.Envelope.Signatures) == 0 {
		dst = append(dst, 0)
	} else {
		dst = append(dst, byte(len(e.Envelope.Signatures)))
		dst = appendString16(dst, e.Envelope.PayloadType)
		for _, s := range e.Envelope.Signatures {
			dst = appendString16(dst, s.KeyID)
			dst = appendString16(dst, string(s.Sig))
		}
	}
	return dst, nil
}

// EncodedSize returns len(Encode(e)) without encoding.
func EncodedSize(e *Event) int {
	n := fixedHeaderSize + 5*2 + len(e.Stream) + len(e.Type) + len(e.CorrelationID) +
		len(e.CausationID) + len(e.Actor) + 8 + len(e.Data) + len(e.Metadata) + 1
	if e.Envelope != nil && len(e.Envelope.Signatures) > 0 {
		n += 2 + len(e.Envelope.PayloadType)
		for _, s := range e.Envelope.Signatures {
			n += 4 + len(s.KeyID) + len(s.Sig)
		}
	}
	return n
}

func checkEncodable(e *Event) error {
	for _, s := range []string{e.Stream, e.Type, e.CorrelationID, e.CausationID, e.Actor} {
		if len(s) > 0xffff {
			return fmt.Errorf("encode event: field of %d bytes exceeds 65535", len(s))
		}
	}
	if e.Envelope != nil {
		if len(e.Envelope.Signatures) > 255 {
			return fmt.Errorf("encode event: %d signatures exceed 255", len(e.Envelope.Signatures))
		}
		for _, s := range e.Envelope.Signatures {
			if len(s.KeyID) > 0xffff || len(s.Sig) > 0xffff {
				return errors.New("encode event: signature field exceeds 65535 bytes")
			}
		}
	}
	if n := EncodedSize(e); n > MaxEncodedSize {
		return Refusef(CodeEventTooLarge, "", "the encoded event is %d bytes, above the limit of %d; reference bulky evidence by digest", n, MaxEncodedSize)
	}
	return nil
}

// LeafHash returns the RFC 6962 leaf hash SHA-256(0x00 || b) of encoded bytes.
//
// Every appended and every read event is hashed, so the hasher is pooled:
// sha256.New and Sum through the hash.Hash interface allocate, and those
// allocations were 5 % of the bytes allocated by a 64-writer append load.
func LeafHash(b []byte) [32]byte {
	lh := leafHashers.Get().(*leafHasher)
	lh.h.Reset()
	lh.h.Write(leafPrefix[:])
	lh.h.Write(b)
	out := [32]byte(lh.h.Sum(lh.sum[:0]))
	leafHashers.Put(lh)
	return out
}

var leafPrefix = [1]byte{0}

type leafHasher struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

// leafHashers is a cache of hashers, not state: any hasher gives the same sums.
var leafHashers = sync.Pool{New: func() any { return &leafHasher{h: sha256.New()} }}

// DecodeError says where and why stored bytes are not a canonical event.
type DecodeError struct {
	Offset int
	Reason string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode event at byte %d: %s", e.Offset, e.Reason)
}

// Is makes every DecodeError match ErrCorrupt.
func (e *DecodeError) Is(target error) bool { return target == ErrCorrupt }

// PeekStreamType returns the stream and type of the canonical bytes b
// without decoding the rest (they alias b). ok is false when b is too short
// to hold them: decode it to learn why. Readers that filter by stream or
// type use it to skip the events they do not want.
func PeekStreamType(b []byte) (stream, typ []byte, ok bool) {
	off := fixedHeaderSize
	field := func() []byte {
		if len(b)-off < 2 {
			ok = false
			return nil
		}
		n := int(binary.BigEndian.Uint16(b[off:]))
		if len(b)-off-2 < n {
			ok = false
			return nil
		}
		v := b[off+2 : off+2+n]
		off += 2 + n
		return v
	}
	ok = len(b) > fixedHeaderSize && b[0] == FormatVersion
	if !ok {
		return nil, nil, false
	}
	stream = field()
	typ = field()
	return stream, typ, ok
}

// MatchRaw reports whether the event of canonical bytes b passes f, looking
// only at its stream and type (PeekStreamType). Bytes too short to tell
// match: the reader decodes them and reports what is wrong.
func (f *Filter) MatchRaw(b []byte) bool {
	if f.StreamPrefix == "" && len(f.Types) == 0 {
		return true
	}
	stream, typ, ok := PeekStreamType(b)
	if !ok {
		return true
	}
	if f.StreamPrefix != "" && !bytes.HasPrefix(stream, []byte(f.StreamPrefix)) {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if string(typ) == t {
			return true
		}
	}
	return false
}

// Decode parses canonical bytes into an event and sets its LeafHash. Data,
// Metadata and signature bytes alias b; the caller must not modify b
// afterwards (the Pebble store hands Decode a copy it owns).
func Decode(b []byte) (Event, error) {
	var e Event
	if err := decodeInto(&e, b, false); err != nil {
		return Event{}, err
	}
	e.LeafHash = LeafHash(b)
	return e, nil
}

// DecodeNoHash is Decode without computing LeafHash, for readers that take
// the hash from the Merkle tree instead (or do not need it).
func DecodeNoHash(b []byte) (Event, error) {
	var e Event
	err := decodeInto(&e, b, false)
	return e, err
}

// DecodeShared is DecodeNoHash whose strings also alias b (no copy, no
// allocation). REQUIRES: b is never modified afterwards, for as long as the
// event lives; the store's read path owns such buffers.
func DecodeShared(b []byte) (Event, error) {
	var e Event
	err := decodeInto(&e, b, true)
	return e, err
}

func decodeInto(e *Event, b []byte, share bool) error {
	if len(b) > MaxEncodedSize {
		return &DecodeError{0, fmt.Sprintf("%d bytes exceed the %d-byte limit", len(b), MaxEncodedSize)}
	}
	r := reader{b: b, share: share}
	if len(b) < fixedHeaderSize {
		return &DecodeError{0, fmt.Sprintf("%d bytes are shorter than the %d-byte header", len(b), fixedHeaderSize)}
	}
	if b[0] != FormatVersion {
		return &DecodeError{0, fmt.Sprintf("unknown format version %d", b[0])}
	}
	r.off = 1
	e.Position = r.u64()
	e.Version = r.u64()
	copy(e.ID[:], b[r.off:r.off+16])
	r.off += 16
	e.RecordedAt = time.Unix(0, int64(r.u64())).UTC()
	e.Stream = r.str16("stream")
	e.Type = r.str16("type")
	e.CorrelationID = r.str16("correlation_id")
	e.CausationID = r.str16("causation_id")
	e.Actor = r.str16("actor")
	e.Data = r.bytes32("data")
	e.Metadata = r.bytes32("metadata")
	k := r.u8()
	if r.err == nil && k > 0 {
		env := &Envelope{PayloadType: r.str16("payload_type"), Signatures: make([]Signature, 0, k)}
		for i := 0; i < int(k) && r.err == nil; i++ {
			id := r.str16("keyid")
			sig := r.raw16("sig")
			env.Signatures = append(env.Signatures, Signature{KeyID: id, Sig: sig})
		}
		e.Envelope = env
	}
	if r.err != nil {
		return r.err
	}
	if r.off != len(b) {
		return &DecodeError{r.off, fmt.Sprintf("%d trailing bytes", len(b)-r.off)}
	}
	return nil
}

// reader is a bounds-checked cursor; the first error sticks.
type reader struct {
	b     []byte
	off   int
	err   error
	share bool // strings alias b
}

func (r *reader) fail(reason string) {
	if r.err == nil {
		r.err = &DecodeError{r.off, reason}
	}
}

func (r *reader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail(fmt.Sprintf("%s: need %d bytes, %d left", what, n, len(r.b)-r.off))
		return false
	}
	return true
}

func (r *reader) u8() byte {
	if !r.need(1, "byte") {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u16() int {
	if !r.need(2, "length") {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.off:])
	r.off += 2
	return int(v)
}

func (r *reader) u32() int {
	if !r.need(4, "length") {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return int(v)
}

func (r *reader) u64() uint64 {
	if !r.need(8, "integer") {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *reader) raw16(what string) []byte {
	n := r.u16()
	if !r.need(n, what) {
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

func (r *reader) str16(what string) string {
	v := r.raw16(what)
	if r.err == nil && !utf8.Valid(v) {
		r.fail(what + ": not valid UTF-8")
	}
	if r.share && len(v) > 0 {
		return unsafe.String(&v[0], len(v))
	}
	return string(v)
}

func (r *reader) bytes32(what string) []byte {
	n := r.u32()
	if !r.need(n, what) {
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

func appendString16(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendBytes32(dst []byte, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}
