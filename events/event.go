package events

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/greffe/greffe/internal/jsonscan"
)

// Event is one immutable entry of the ledger, as stored.
//
// Position is the global, 0-based, gap-free index of the event in the log and
// its Merkle leaf index. Version is the 0-based index of the event in its
// stream. ID is the idempotency key chosen by the client (or generated at the
// edge before the event is sequenced). RecordedAt is fixed by the node before
// the event's batch is applied and never moves backwards along the log.
//
// The stored form of an Event is its canonical encoding (see Encode and
// docs/FORMAT.md); LeafHash is RFC 6962 HashLeaf of exactly those bytes.
// Data and Metadata are the exact JSON bytes received; nothing is
// re-serialised.
type Event struct {
	Position      uint64
	Stream        string
	Version       uint64
	ID            uuid.UUID
	Type          string
	Data          json.RawMessage
	Metadata      json.RawMessage
	RecordedAt    time.Time
	CorrelationID string
	CausationID   string
	Actor         string
	// Envelope, when set, carries DSSE signatures over Data.
	Envelope *Envelope
	// LeafHash is HashLeaf(Encode(event)).
	LeafHash [32]byte
}

// Envelope holds the DSSE signatures over an event's Data. The DSSE payload is
// the event's Data bytes, so the envelope is never stored twice; the full
// envelope (payloadType, base64 payload, signatures) is rebuilt from the
// stored fields to verify it.
type Envelope struct {
	// PayloadType is the DSSE payload type, e.g.
	// "application/vnd.greffe.measurement+json".
	PayloadType string `json:"payloadType" jsonschema:"optional"`
	// Signatures are the DSSE signatures in the order received.
	Signatures []Signature `json:"signatures" jsonschema:"optional"`
}

// Signature is one DSSE signature: the signer's key id and the raw signature.
type Signature struct {
	// KeyID is the signing key's id: "ed25519:" and the hex of the first 16
	// bytes of SHA-256 of its public key.
	KeyID string `json:"keyid" jsonschema:"optional"`
	// Sig is the ed25519 signature over the DSSE pre-authentication encoding
	// of the payload, base64.
	Sig []byte `json:"sig" jsonschema:"optional"`
}

// Proposed is an event as submitted, before the log assigns its position,
// version and recorded time. ID must be set (the edge generates it when the
// client gave none), so that a proposal is a deterministic input.
type Proposed struct {
	ID            uuid.UUID
	Type          string
	Data          json.RawMessage
	Metadata      json.RawMessage
	CorrelationID string
	CausationID   string
	Actor         string
	Envelope      *Envelope
}

// SameContent reports whether p is the proposal that produced stored event e
// in stream. It decides idempotency: the same id with the same content is a
// retry; the same id with other content is refused.
func (p *Proposed) SameContent(stream string, e *Event) bool {
	return p.ID == e.ID && stream == e.Stream && p.Type == e.Type &&
		bytes.Equal(p.Data, e.Data) && bytes.Equal(p.Metadata, e.Metadata) &&
		p.CorrelationID == e.CorrelationID && p.CausationID == e.CausationID &&
		p.Actor == e.Actor && envelopesEqual(p.Envelope, e.Envelope)
}

func envelopesEqual(a, b *Envelope) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.PayloadType != b.PayloadType || len(a.Signatures) != len(b.Signatures) {
		return false
	}
	for i := range a.Signatures {
		if a.Signatures[i].KeyID != b.Signatures[i].KeyID || !bytes.Equal(a.Signatures[i].Sig, b.Signatures[i].Sig) {
			return false
		}
	}
	return true
}

// ExpectedKind says which condition an append puts on its stream.
type ExpectedKind uint8

// The append conditions. The zero value is ExpectAnyKind.
const (
	ExpectAnyKind      ExpectedKind = iota // no condition
	ExpectNoStreamKind                     // the stream has no event yet
	ExpectExistsKind                       // the stream has at least one event
	ExpectVersionKind                      // the stream's last version is exactly Version
)

// Expected is an append condition. The zero value is "any".
type Expected struct {
	Kind    ExpectedKind
	Version uint64 // meaningful only for ExpectVersionKind
}

// Convenience conditions.
var (
	ExpectAny      = Expected{Kind: ExpectAnyKind}
	ExpectNoStream = Expected{Kind: ExpectNoStreamKind}
	ExpectExists   = Expected{Kind: ExpectExistsKind}
)

// ExpectVersion returns the condition "the stream's last version is v".
func ExpectVersion(v uint64) Expected { return Expected{Kind: ExpectVersionKind, Version: v} }

// Holds reports whether the condition holds for a stream whose current version
// is actual (-1 for a stream without events).
func (x Expected) Holds(actual int64) bool {
	switch x.Kind {
	case ExpectAnyKind:
		return true
	case ExpectNoStreamKind:
		return actual < 0
	case ExpectExistsKind:
		return actual >= 0
	case ExpectVersionKind:
		return actual >= 0 && uint64(actual) == x.Version
	}
	return false
}

func (x Expected) String() string {
	switch x.Kind {
	case ExpectAnyKind:
		return "any"
	case ExpectNoStreamKind:
		return "no_stream"
	case ExpectExistsKind:
		return "exists"
	case ExpectVersionKind:
		return strconv.FormatUint(x.Version, 10)
	}
	return fmt.Sprintf("expected(%d)", x.Kind)
}

// MarshalJSON writes "any", "no_stream", "exists" or the version number.
func (x Expected) MarshalJSON() ([]byte, error) {
	if x.Kind == ExpectVersionKind {
		return strconv.AppendUint(nil, x.Version, 10), nil
	}
	return json.Marshal(x.String())
}

// MaxExpectedVersion is the largest version an append may expect, 2^62: far
// above any stream's length, and low enough that version arithmetic in
// int64 (actual versions are -1 for no stream) never overflows.
const MaxExpectedVersion = 1 << 62

// UnmarshalJSON accepts "any", "no_stream", "exists", an integer from 0 to
// MaxExpectedVersion or a string holding one. Anything else (null, a
// fraction, an exponent, a sign, a bool, another word) is an *Error with
// CodeInvalidExpectedVersion, without a field: the caller knows where the
// value was.
func (x *Expected) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	} else {
		s = string(b)
	}
	switch s {
	case "any":
		*x = ExpectAny
	case "no_stream":
		*x = ExpectNoStream
	case "exists":
		*x = ExpectExists
	default:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v > MaxExpectedVersion {
			return Refusef(CodeInvalidExpectedVersion, "",
				`must be "any", "no_stream", "exists", or a version number from 0 to %d (as a number or a string), got %s`, uint64(MaxExpectedVersion), b)
		}
		*x = ExpectVersion(v)
	}
	return nil
}

// eventJSON is the public JSON shape of an event (docs/API.md).
type eventJSON struct {
	Position      uint64          `json:"position"`
	Stream        string          `json:"stream"`
	Version       uint64          `json:"version"`
	ID            uuid.UUID       `json:"id"`
	Type          string          `json:"type"`
	Data          json.RawMessage `json:"data"`
	Metadata      json.RawMessage `json:"metadata"`
	RecordedAt    time.Time       `json:"recorded_at"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	CausationID   string          `json:"causation_id,omitempty"`
	Actor         string          `json:"actor,omitempty"`
	Envelope      *Envelope       `json:"envelope,omitempty"`
	LeafHash      []byte          `json:"leaf_hash"`
}

// MarshalJSON writes the public JSON shape (AppendJSON). encoding/json
// compacts and HTML-escapes what a MarshalJSON returns, so an answer that
// must carry the stored bytes writes AppendJSON itself (api, wire.ReadOut).
func (e Event) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil), nil }

// AppendJSON appends the public JSON shape of the event to b: snake_case
// fields in eventJSON's order, data and metadata as the stored bytes
// (byte for byte: evidence comes back as it was written, the bytes its
// leaf hash covers; issue #21), recorded_at in RFC 3339 with nanoseconds,
// leaf_hash in base64. Strings are quoted without HTML escaping (RFC 8785's
// minimal form); the envelope, which the node builds and never stores as
// sent, keeps encoding/json's form.
func (e Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"position":`...)
	b = strconv.AppendUint(b, e.Position, 10)
	b = append(b, `,"stream":`...)
	b = appendQuoted(b, e.Stream)
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, e.Version, 10)
	b = append(b, `,"id":"`...)
	b = jsonscan.AppendUUID(b, e.ID) // uuid's String, without its allocation
	b = append(b, `","type":`...)
	b = appendQuoted(b, e.Type)
	b = append(b, `,"data":`...)
	b = append(b, nonEmptyJSON(e.Data)...)
	b = append(b, `,"metadata":`...)
	b = append(b, nonEmptyJSON(e.Metadata)...)
	b = append(b, `,"recorded_at":"`...)
	b = e.RecordedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	for _, f := range [...]struct{ name, v string }{{"correlation_id", e.CorrelationID}, {"causation_id", e.CausationID}, {"actor", e.Actor}} {
		if f.v != "" {
			b = append(b, `,"`+f.name+`":`...)
			b = appendQuoted(b, f.v)
		}
	}
	if e.Envelope != nil {
		env, err := json.Marshal(e.Envelope)
		if err == nil { // a struct of strings and bytes: it always marshals
			b = append(append(b, `,"envelope":`...), env...)
		}
	}
	b = append(b, `,"leaf_hash":"`...)
	b = base64.StdEncoding.AppendEncode(b, e.LeafHash[:])
	return append(b, `"}`...)
}

// AppendJSONLine appends the event's JSON on one line (an SSE data line,
// a line of JSONL): AppendJSON, unless the stored data or metadata hold a
// line break, which can only be whitespace between JSON tokens (a string
// holds it escaped) and would end the line; such an event is written
// compacted (json.Compact removes whitespace and escapes nothing), and
// its stored bytes are in AppendJSON's form and the entry itself.
func (e Event) AppendJSONLine(b []byte) []byte {
	start := len(b)
	b = e.AppendJSON(b)
	if bytes.ContainsAny(b[start:], "\r\n") {
		var c bytes.Buffer
		if err := json.Compact(&c, b[start:]); err == nil { // stored JSON is valid
			b = append(b[:start], c.Bytes()...)
		}
	}
	return b
}

// appendQuoted appends s as a JSON string in RFC 8785's minimal form
// (encoding/json/v2's jsontext.AppendQuote: no HTML escaping), the form of
// the event's JSON; the hand encoders of the HTTP bodies write
// json.Marshal's form instead (jsonscan.AppendMarshalString, whose comment
// says why both exist). Stored strings are valid UTF-8 (the edge refuses
// anything else), so AppendQuote's replacement of invalid bytes never
// happens to them.
func appendQuoted(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s)
	return b
}

// UnmarshalJSON reads the public JSON shape (used by clients of the API).
func (e *Event) UnmarshalJSON(b []byte) error {
	var j eventJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.LeafHash) != 0 && len(j.LeafHash) != 32 {
		return fmt.Errorf("leaf_hash of %d bytes, want 32", len(j.LeafHash))
	}
	*e = Event{Position: j.Position, Stream: j.Stream, Version: j.Version, ID: j.ID, Type: j.Type,
		Data: j.Data, Metadata: j.Metadata, RecordedAt: j.RecordedAt, CorrelationID: j.CorrelationID,
		CausationID: j.CausationID, Actor: j.Actor, Envelope: j.Envelope}
	copy(e.LeafHash[:], j.LeafHash)
	return nil
}

func nonEmptyJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}
