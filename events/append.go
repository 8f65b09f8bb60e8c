package events

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/greffe/greffe/internal/jsonscan"
)

// Bounds checked at the edge, before anything is written. Each has its own
// error code (docs/API.md).
const (
	// MaxEventsPerAppend is the most events one append call may carry.
	MaxEventsPerAppend = 1000
	// MaxAppendBytes is the most encoded bytes one append call may carry.
	MaxAppendBytes = 4 << 20
	// MaxStreamNameLen is the longest stream name, in bytes.
	MaxStreamNameLen = 200
	// MaxTypeLen is the longest event type, in bytes.
	MaxTypeLen = 200
	// MaxTextFieldLen bounds correlation_id, causation_id and actor, in bytes.
	MaxTextFieldLen = 256
)

// reservedPrefixes are the domain streams' prefixes, and "refusals" where
// the commands layer records refused commands. The raw append API refuses
// them (reserved_stream); only commands write there, after their aggregate
// has decided, so nobody can forge a decision or a refusal.
var reservedPrefixes = [...]string{"provider-", "binding-", "approval-", "mission-", "measurement-", "claim-", "executor-", "refusals"}

// IsReserved reports whether stream belongs to a domain aggregate or is the
// refusals stream.
func IsReserved(stream string) bool {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(stream, p) {
			return true
		}
	}
	return false
}

// IsReservedEventID reports whether id lies in the space the commands layer
// derives its events' ids from: UUID version 5 (RFC 9562 §5.5, name-based
// with SHA-1), which commands.EventID and commands.RefusalID compute from
// the command id, so that a re-sent command proposes the same ids and the
// log recognises it. The raw append routes (HTTP and gRPC) refuse such ids
// with reserved_event_id: otherwise anyone who may append could take the
// id of a command's event before the command is sent, and the command
// would then fail with command_id_reused. A raw append wanting
// deterministic ids has version 3 (MD5) or 8. Like IsReserved, Validate
// does not check it: commands write these ids.
//
// The derivation stays as it has been (v5 of the command id), so events
// stored before the reservation keep their ids and re-sent commands keep
// finding them; reserving the whole version rather than a marker inside
// it is what makes the reservation checkable from the id alone.
func IsReservedEventID(id uuid.UUID) bool { return id.Version() == 5 }

// CheckRawEventID returns the refusal (reserved_event_id, at field) of an
// id that a raw append may not carry, or nil.
func CheckRawEventID(field string, id uuid.UUID) error {
	if !IsReservedEventID(id) {
		return nil
	}
	return Refusef(CodeReservedEventID, field, "event id %s is a version-5 UUID, which greffe reserves for the events commands append (derived from the command id); use a version 4 or 7 UUID (or 3 or 8 for ids you derive), or let the node choose", id)
}

// IsSystemStream reports whether stream's name starts with "$": in
// KurrentDB (whose protocol greffe serves and mirrors into) such names are
// its own, $all and the system and metadata streams ($$name), and the
// mirror skips them when it resumes. The raw append routes refuse them
// (reserved_stream_name), so that no one can create a "$all" stream that
// a KurrentDB client would take for something else. Nothing in greffe
// writes one; reading them is allowed.
func IsSystemStream(stream string) bool { return strings.HasPrefix(stream, "$") }

// StreamAppend is the part of an append that targets one stream. With no
// Events it only checks Expected.
type StreamAppend struct {
	Stream   string
	Expected Expected
	Events   []Proposed
	// Path is the JSON path of this entry in the request body it came in,
	// the prefix of the Field of any refusal of it (Validate): "appends[2]"
	// in the body of POST /v1/append; empty when the entry is the body
	// itself (POST /v1/streams/{stream}, whose fields are "stream" and
	// "events[j].type"), or when there is no body (gRPC, commands). It
	// only names things: it is neither stored nor replicated.
	Path string
}

// FieldPath returns the path of one of the entry's fields ("stream",
// "events[3].data") under Path, as its refusals name it.
func (s *StreamAppend) FieldPath(f string) string {
	if s.Path == "" {
		return f
	}
	return s.Path + "." + f
}

// AppendRequest is one atomic append: every stream's condition holds and all
// its events are written, or nothing is.
type AppendRequest struct {
	Streams []StreamAppend
}

// EventCount returns the number of events in r.
func (r *AppendRequest) EventCount() int {
	n := 0
	for _, s := range r.Streams {
		n += len(s.Events)
	}
	return n
}

// Outcome is the result of one AppendRequest inside a batch. Err is nil,
// a *ConditionError or an *Error; when it is nil, Events are the stored
// events in request order (the originals when Duplicate is true).
type Outcome struct {
	Events    []Event
	Duplicate bool
	Err       error
}

// Batch is the unit the log applies and the cluster replicates: the appends
// that group commit coalesced, with everything non-deterministic already
// fixed. Applying a batch is a deterministic function of the stored state and
// the batch, so every replica stores identical bytes.
type Batch struct {
	// RecordedAt is the node's clock when the batch was formed. Apply records
	// max(RecordedAt, last recorded time) so recorded_at never goes backwards.
	RecordedAt time.Time
	Appends    []AppendRequest
}

// ValidateStreamName checks the 1–200 printable characters without spaces rule.
func ValidateStreamName(field, s string) error {
	if msg := streamNameProblem(s); msg != "" {
		return Refusef(textCode(s, CodeInvalidStreamName), field, "%s", msg)
	}
	return nil
}

// textCode is the code of a refused text field: invalid_utf8 when s is not
// UTF-8, whatever the field, else the field's own code. Called only for a
// refusal, so the valid path pays nothing for it.
func textCode(s, code string) string {
	if !utf8.ValidString(s) {
		return CodeInvalidUTF8
	}
	return code
}

// jsonRefusal refuses data or metadata (field is ".data" or ".metadata"
// under at) that isJSONObject refused: invalid_utf8 when it is a JSON
// object whose strings are not all text (json.Valid accepts it, ValidJSON
// does not), else notObject. Called only for a refusal.
func jsonRefusal(b []byte, notObject, name, field string) *Error {
	if json.Valid(b) && firstNonSpace(b) == '{' {
		return Refusef(CodeInvalidUTF8, field, "%s holds a string that is not UTF-8 text (invalid bytes or an unpaired surrogate escape such as \\ud800) at byte %d; send JSON as UTF-8 (RFC 8259 §8.1)", name, jsonscan.BadTextOffset(b))
	}
	return Refusef(notObject, field, "%s must be a JSON object", name)
}

func firstNonSpace(b []byte) byte {
	if i := jsonscan.SkipSpace(b, 0); i < len(b) {
		return b[i]
	}
	return 0
}

// streamNameProblem says what is wrong with a stream name, or "" if nothing.
// The checks return sentences rather than errors so that Validate builds a
// field path only for a refusal: building them for every event was a tenth of
// the bytes allocated by an append load.
func streamNameProblem(s string) string {
	if s == "" || len(s) > MaxStreamNameLen {
		return fmt.Sprintf("stream names are 1 to %d bytes long, got %d", MaxStreamNameLen, len(s))
	}
	if !utf8.ValidString(s) {
		return "stream name is not valid UTF-8"
	}
	for _, c := range s {
		if !unicode.IsPrint(c) || unicode.IsSpace(c) {
			return fmt.Sprintf("stream name %q contains %q; use printable characters without spaces", s, c)
		}
	}
	return ""
}

// textProblem says what is wrong with a text field, or "" if nothing
// (textCode gives the code).
func textProblem(s string, min, max int) string {
	if len(s) < min || len(s) > max {
		return fmt.Sprintf("must be %d to %d bytes long, got %d", min, max, len(s))
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return fmt.Sprintf("contains the non-printable character %q", c)
		}
	}
	return ""
}

// isJSONObject reports whether b is one valid JSON object whose strings are
// text (whitespace around it allowed, since the bytes are stored exactly as
// received). It runs on every event's data and metadata, so it uses
// ValidJSON, several times faster than json.Valid, which also checks the
// text.
func isJSONObject(b []byte) bool {
	if !ValidJSON(b) {
		return false
	}
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}

// Validated is an append whose bounds hold: the form the log's write path
// takes (Appender.AppendChecked), which checks nothing again. Only Check
// makes one, so that the edge checks an append once (issue #21: the API
// checked stream names, and the store checked them again with everything
// else). The request it holds shares its slices with the one checked:
// neither may change after Check.
type Validated struct {
	r AppendRequest
}

// Check validates r (Validate) and returns it as Validated.
func Check(r AppendRequest) (Validated, error) {
	if err := r.Validate(); err != nil {
		return Validated{}, err
	}
	return Validated{r: r}, nil
}

// Request returns the checked request; it must not be changed.
func (v Validated) Request() AppendRequest { return v.r }

// Validate checks every bound of an append before anything is written: stream
// names, event types and text fields, JSON objects, the per-event encoded
// size, the per-append count and bytes, duplicate streams and duplicate ids.
// It is the one check of the log's bounds: Check runs it, once per append
// (at the edge, or in Append for a caller that did not), and nothing
// re-checks what it passed. It does not check reserved streams (the raw
// API does, commands do not).
//
// Field paths are those of the body the request came in: each entry's
// fields are named under its Path ("appends[0].events[3].data", or
// "events[3].data" for the single-stream body), so no caller rewrites
// them; the append's own bounds (count, total size, emptiness) are named
// "events".
func (r *AppendRequest) Validate() error {
	if len(r.Streams) == 0 || r.EventCount() == 0 {
		return Refusef(CodeEmptyAppend, "events", "an append needs at least one event")
	}
	if n := r.EventCount(); n > MaxEventsPerAppend {
		return Refusef(CodeTooManyEvents, "events", "%d events in one append; the limit is %d, split it", n, MaxEventsPerAppend)
	}
	streams := make(map[string]bool, len(r.Streams))
	ids := make(map[[16]byte]bool, r.EventCount())
	total := 0
	for i := range r.Streams {
		s := &r.Streams[i]
		if msg := streamNameProblem(s.Stream); msg != "" {
			return Refusef(textCode(s.Stream, CodeInvalidStreamName), s.FieldPath("stream"), "%s", msg)
		}
		if streams[s.Stream] {
			return Refusef(CodeDuplicateStream, s.FieldPath("stream"), "stream %q appears twice in one append; merge its events into one entry", s.Stream)
		}
		streams[s.Stream] = true
		// A stream entry without events is a condition only: the append
		// proceeds only if that stream is where the caller read it (commands
		// use it for streams a decision read but does not write).
		for j := range s.Events {
			p := &s.Events[j]
			// at is the field's path, built only for a refusal.
			at := func(field string) string { return s.FieldPath(fmt.Sprintf("events[%d]%s", j, field)) }
			if p.ID == [16]byte{} {
				return Refusef(CodeInvalidEventID, at(".id"), "event id must be a non-nil UUID")
			}
			if ids[p.ID] {
				return Refusef(CodeDuplicateEventID, at(".id"), "event id %s appears twice in one append", p.ID)
			}
			ids[p.ID] = true
			if msg := textProblem(p.Type, 1, MaxTypeLen); msg != "" {
				return Refusef(textCode(p.Type, CodeInvalidEventType), at(".type"), "%s", msg)
			}
			if msg := textProblem(p.CorrelationID, 0, MaxTextFieldLen); msg != "" {
				return Refusef(textCode(p.CorrelationID, CodeInvalidField), at(".correlation_id"), "%s", msg)
			}
			if msg := textProblem(p.CausationID, 0, MaxTextFieldLen); msg != "" {
				return Refusef(textCode(p.CausationID, CodeInvalidField), at(".causation_id"), "%s", msg)
			}
			if msg := textProblem(p.Actor, 0, MaxTextFieldLen); msg != "" {
				return Refusef(textCode(p.Actor, CodeInvalidField), at(".actor"), "%s", msg)
			}
			if !isJSONObject(p.Data) {
				return jsonRefusal(p.Data, CodeDataNotObject, "data", at(".data"))
			}
			if !isJSONObject(p.Metadata) {
				return jsonRefusal(p.Metadata, CodeMetadataNotObject, "metadata", at(".metadata"))
			}
			if p.Envelope != nil {
				if len(p.Envelope.Signatures) == 0 || len(p.Envelope.Signatures) > 16 {
					return Refusef(CodeInvalidSignature, at(".envelope.signatures"), "an envelope carries 1 to 16 signatures")
				}
				if msg := textProblem(p.Envelope.PayloadType, 1, MaxTypeLen); msg != "" {
					return Refusef(textCode(p.Envelope.PayloadType, CodeInvalidSignature), at(".envelope.payloadType"), "%s", msg)
				}
				for k, sg := range p.Envelope.Signatures {
					if msg := textProblem(sg.KeyID, 1, MaxTextFieldLen); msg != "" {
						return Refusef(textCode(sg.KeyID, CodeInvalidSignature), at(fmt.Sprintf(".envelope.signatures[%d].keyid", k)), "%s", msg)
					}
					if len(sg.Sig) == 0 || len(sg.Sig) > 1024 {
						return Refusef(CodeInvalidSignature, at(fmt.Sprintf(".envelope.signatures[%d].sig", k)), "a signature is 1 to 1024 bytes")
					}
				}
			}
			ev := Event{Stream: s.Stream, Type: p.Type, Data: p.Data, Metadata: p.Metadata,
				CorrelationID: p.CorrelationID, CausationID: p.CausationID, Actor: p.Actor, Envelope: p.Envelope}
			n := EncodedSize(&ev)
			if n > MaxEncodedSize {
				return Refusef(CodeEventTooLarge, at(""), "the encoded event is %d bytes, above the limit of %d; reference bulky evidence by digest", n, MaxEncodedSize)
			}
			total += n
		}
	}
	if total > MaxAppendBytes {
		return Refusef(CodeAppendTooLarge, "events", "the append encodes to %d bytes, above the limit of %d; split it", total, MaxAppendBytes)
	}
	return nil
}

// batchMagic opens every encoded batch; the trailing digit is the layout.
const batchMagic = "GRB1"

// EncodeBatch returns the binary form of b replicated as one raft entry.
func EncodeBatch(b *Batch) []byte {
	dst := make([]byte, 0, 256)
	dst = append(dst, batchMagic...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.RecordedAt.UnixNano()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b.Appends)))
	for _, r := range b.Appends {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Streams)))
		for _, s := range r.Streams {
			dst = appendString16(dst, s.Stream)
			dst = append(dst, byte(s.Expected.Kind))
			dst = binary.BigEndian.AppendUint64(dst, s.Expected.Version)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.Events)))
			for _, p := range s.Events {
				dst = append(dst, p.ID[:]...)
				dst = appendString16(dst, p.Type)
				dst = appendString16(dst, p.CorrelationID)
				dst = appendString16(dst, p.CausationID)
				dst = appendString16(dst, p.Actor)
				dst = appendBytes32(dst, p.Data)
				dst = appendBytes32(dst, p.Metadata)
				if p.Envelope == nil || len(p.Envelope.Signatures) == 0 {
					dst = append(dst, 0)
					continue
				}
				dst = append(dst, byte(len(p.Envelope.Signatures)))
				dst = appendString16(dst, p.Envelope.PayloadType)
				for _, sg := range p.Envelope.Signatures {
					dst = appendString16(dst, sg.KeyID)
					dst = appendString16(dst, string(sg.Sig))
				}
			}
		}
	}
	return dst
}

// DecodeBatch parses the output of EncodeBatch. Slices alias b.
func DecodeBatch(b []byte) (*Batch, error) {
	if len(b) < len(batchMagic)+12 || string(b[:len(batchMagic)]) != batchMagic {
		return nil, fmt.Errorf("decode batch: bad magic: %w", ErrCorrupt)
	}
	r := reader{b: b, off: len(batchMagic)}
	out := &Batch{RecordedAt: time.Unix(0, int64(r.u64())).UTC()}
	n := r.u32()
	if n > len(b) {
		return nil, fmt.Errorf("decode batch: %d appends in %d bytes: %w", n, len(b), ErrCorrupt)
	}
	out.Appends = make([]AppendRequest, n)
	for i := range out.Appends {
		ns := r.u32()
		if r.err != nil || ns > len(b) {
			return nil, fmt.Errorf("decode batch: %w", ErrCorrupt)
		}
		streams := make([]StreamAppend, ns)
		for j := range streams {
			s := &streams[j]
			s.Stream = r.str16("stream")
			s.Expected.Kind = ExpectedKind(r.u8())
			s.Expected.Version = r.u64()
			ne := r.u32()
			if r.err != nil || ne > len(b) {
				return nil, fmt.Errorf("decode batch: %w", ErrCorrupt)
			}
			s.Events = make([]Proposed, ne)
			for k := range s.Events {
				p := &s.Events[k]
				if r.need(16, "id") {
					copy(p.ID[:], b[r.off:])
					r.off += 16
				}
				p.Type = r.str16("type")
				p.CorrelationID = r.str16("correlation_id")
				p.CausationID = r.str16("causation_id")
				p.Actor = r.str16("actor")
				p.Data = r.bytes32("data")
				p.Metadata = r.bytes32("metadata")
				if k := r.u8(); k > 0 {
					env := &Envelope{PayloadType: r.str16("payload_type")}
					for x := 0; x < int(k) && r.err == nil; x++ {
						env.Signatures = append(env.Signatures, Signature{KeyID: r.str16("keyid"), Sig: r.raw16("sig")})
					}
					p.Envelope = env
				}
			}
		}
		out.Appends[i].Streams = streams
	}
	if r.err != nil {
		return nil, fmt.Errorf("decode batch: %v: %w", r.err, ErrCorrupt)
	}
	if r.off != len(b) {
		return nil, fmt.Errorf("decode batch: %d trailing bytes: %w", len(b)-r.off, ErrCorrupt)
	}
	return out, nil
}
