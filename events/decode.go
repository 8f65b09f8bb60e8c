package events

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Strict decoding of JSON input: request bodies (package api, the CLI),
// command data and policy files (package aggregates). There is one
// decoder, github.com/go-json-experiment/json: the code behind Go's
// encoding/json/v2, so that moving to the standard library is an import
// change. Its defaults are what an authority needs from an instruction:
// names match case-sensitively, a name given twice and a string that is
// not UTF-8 text (invalid bytes, an unpaired surrogate escape) are refused
// anywhere in the value (inside json.RawMessage values too: data and
// metadata), and so is anything after the value; with RejectUnknownMembers
// an unknown name is refused too. Its errors carry RFC 6901 JSON pointers,
// which jsonError turns into the field paths of docs/API.md
// ("/events/0/actor" → "events[0].actor"). It replaced a walk of our own
// (internal/strictjson) that ran before encoding/json, which matched names
// case-insensitively, kept the last of two equal names, read invalid UTF-8
// as U+FFFD and dropped array indices from its errors.

// DecodeOptions say how DecodeJSON reads one input.
type DecodeOptions struct {
	// Root is the path of the decoded value in the input it came from, the
	// start of every Field: "data" for a command's data, "" for a whole
	// request body.
	Root string
	// RefuseNull refuses null for a value that is not a pointer, slice,
	// map or interface. Without it null leaves such a value zero, as
	// encoding/json does (request bodies). Command data sets it: a
	// required field sent as null must not read as "not given".
	RefuseNull bool
}

var (
	// strictOptions are the options of every strict decoding; v2's
	// defaults already refuse duplicate names and invalid UTF-8 and match
	// names exactly. Options values are immutable: shared by every call.
	strictOptions = jsonv2.JoinOptions(jsonv2.RejectUnknownMembers(true))
	// noNullOptions add RefuseNull.
	noNullOptions = jsonv2.JoinOptions(strictOptions, jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(refuseNull)))
)

// errNull is refuseNull's refusal.
var errNull = errors.New("must not be null")

// refuseNull is called by the decoder before any value is decoded into v
// (a non-nil pointer): null is refused unless *v may hold it.
func refuseNull(dec *jsontext.Decoder, v any) error {
	if dec.PeekKind() == 'n' {
		switch reflect.TypeOf(v).Elem().Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		default:
			return errNull
		}
	}
	return errors.ErrUnsupported // decode as usual
}

// DecodeJSON decodes data, one JSON value, into v, a non-nil pointer,
// strictly (see above). v is undefined after an error.
//
// Errors are *Error, refusals with the path of the offending value under
// o.Root: malformed_json, unknown_field, invalid_utf8, or the code of an
// *Error returned by a type that decodes itself (Expected:
// invalid_expected_version). Message is the reason alone, without the
// path. When a value has several problems, the one reported is the first
// of: not JSON at all (malformed_json, even if it also holds bytes that
// are not UTF-8), a string that is not text anywhere (invalid_utf8), then
// the first problem in the order of the input.
func DecodeJSON(data []byte, v any, o DecodeOptions) error {
	opts := strictOptions
	if o.RefuseNull {
		opts = noNullOptions
	}
	err := jsonv2.Unmarshal(data, v, opts)
	if err == nil {
		return nil
	}
	return jsonError(data, err, o.Root)
}

// jsonError describes the decoder's err on data. It runs for a refusal
// only, so it may read data again: to put syntax before text and text
// before the rest, and to tell array indices from names in a path.
func jsonError(data []byte, err error, root string) *Error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &Error{Code: CodeMalformedJSON, Field: root, Message: "is empty; send a JSON object", Err: err}
	}
	// Not JSON, whatever its bytes: malformed_json.
	if serr := syntaxError(data, jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true)); serr != nil {
		return serr.describe(data, root)
	}
	// JSON with a string that is not text: invalid_utf8, wherever it is.
	if !ValidJSON(data) {
		if serr := syntaxError(data, jsontext.AllowDuplicateNames(true)); serr != nil {
			return &Error{Code: CodeInvalidUTF8, Field: fieldPath(root, data, serr.ptr), Err: err,
				Message: "is not UTF-8 text (a byte that is not UTF-8, or an unpaired surrogate escape such as \\ud800; for a name, the object holding it); JSON is UTF-8 (RFC 8259 §8.1)"}
		}
	}
	var synErr *jsontext.SyntacticError
	if errors.As(err, &synErr) {
		if synErr.Err == jsontext.ErrDuplicateName {
			return &Error{Code: CodeMalformedJSON, Field: fieldPath(root, data, synErr.JSONPointer), Err: err,
				Message: "appears twice; a name appears once in an object"}
		}
		return (&syntax{ptr: synErr.JSONPointer, offset: synErr.ByteOffset, err: synErr.Err}).describe(data, root)
	}
	var semErr *jsonv2.SemanticError
	if !errors.As(err, &semErr) {
		return &Error{Code: CodeMalformedJSON, Field: root, Message: err.Error(), Err: err}
	}
	field := fieldPath(root, data, semErr.JSONPointer)
	// A type that decodes itself refused with a code of its own.
	var coded *Error
	if errors.As(semErr.Err, &coded) {
		return &Error{Code: coded.Code, Kind: coded.Kind, Field: field, Message: coded.Message, Details: coded.Details, Err: err}
	}
	return &Error{Code: semanticCode(semErr), Field: field, Message: semanticReason(semErr), Err: err}
}

// syntax is a syntactic error found by syntaxError.
type syntax struct {
	ptr    jsontext.Pointer
	offset int64
	err    error
	extra  bool // a second value follows the first
}

// syntaxError reads data as one JSON value under opts and returns what
// makes it not one, or nil.
func syntaxError(data []byte, opts ...jsontext.Options) *syntax {
	dec := jsontext.NewDecoder(bytes.NewReader(data), opts...)
	_, err := dec.ReadValue()
	if err == nil {
		if _, err = dec.ReadToken(); err == io.EOF {
			return nil
		}
		if err == nil {
			return &syntax{offset: dec.InputOffset(), extra: true}
		}
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		return &syntax{ptr: se.JSONPointer, offset: se.ByteOffset, err: se.Err}
	}
	return &syntax{err: err}
}

func (s *syntax) describe(data []byte, root string) *Error {
	e := &Error{Code: CodeMalformedJSON, Field: fieldPath(root, data, s.ptr)}
	switch {
	case s.extra:
		e.Message = "holds more than one JSON value; send one"
	case s.err == io.ErrUnexpectedEOF || s.err == io.EOF:
		e.Message = fmt.Sprintf("is not JSON: it ends at byte %d, inside a value", len(data))
	default:
		e.Message = fmt.Sprintf("is not JSON: at byte %d: %v", s.offset, s.err)
	}
	return e
}

// semanticCode is the code of a semantic error.
func semanticCode(e *jsonv2.SemanticError) string {
	if e.Err == jsonv2.ErrUnknownName {
		return CodeUnknownField
	}
	return CodeMalformedJSON
}

// semanticReason words a semantic error of the decoder without its path.
func semanticReason(e *jsonv2.SemanticError) string {
	switch {
	case e.Err == jsonv2.ErrUnknownName:
		if names := knownNames(e.GoType); names != "" {
			return "unknown field (names are case-sensitive); known fields are " + names
		}
		return "unknown field (names are case-sensitive)"
	case e.Err == errNull:
		return errNull.Error()
	case e.Err == nil:
		return fmt.Sprintf("must be %s, got %s", describeType(e.GoType), describeKind(e.JSONKind))
	case errors.Is(e.Err, strconv.ErrRange):
		return fmt.Sprintf("%s does not fit %s", e.JSONValue, e.GoType)
	case errors.Is(e.Err, strconv.ErrSyntax) && e.JSONKind == '0':
		return fmt.Sprintf("must be %s, got %s", describeType(e.GoType), e.JSONValue)
	case e.GoType != nil && e.GoType.Kind() == reflect.Slice && e.GoType.Elem().Kind() == reflect.Uint8:
		return "must be a base64 string: " + e.Err.Error()
	case isTimeError(e):
		// time.Time's own error quotes Go's layout string
		// ("2006-01-02T15:04:05Z07:00"), which a user cannot act on.
		got := string(e.JSONValue)
		if pe := (*time.ParseError)(nil); errors.As(e.Err, &pe) {
			got = strconv.Quote(pe.Value)
		}
		if got == "" {
			return fmt.Sprintf("must be an RFC 3339 time such as %q (UTC) or %q", RFC3339Example, "2026-03-01T10:00:00+01:00")
		}
		return fmt.Sprintf("must be an RFC 3339 time such as %q (UTC) or %q, got %s", RFC3339Example, "2026-03-01T10:00:00+01:00", got)
	}
	return e.Err.Error()
}

// RFC3339Example is the time messages show as an example of RFC 3339.
const RFC3339Example = "2026-03-01T09:00:00Z"

// isTimeError reports whether e is a time that did not parse.
func isTimeError(e *jsonv2.SemanticError) bool {
	var pe *time.ParseError
	if errors.As(e.Err, &pe) {
		return true
	}
	t := e.GoType
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t == timeType && e.Err != nil
}

var (
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType            = reflect.TypeFor[time.Time]()
)

// describeType names what a Go type takes in JSON, for messages.
func describeType(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		return "an RFC 3339 time string"
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return fmt.Sprintf("an array of %d elements", t.Len())
	}
	return "a " + t.String()
}

// describeKind names a JSON kind, for messages.
func describeKind(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "another value"
}

// knownNames lists the JSON names of struct type t, sorted, for the
// unknown-field message; "" when t is not a struct.
func knownNames(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	names := map[string]bool{}
	structNames(t, names)
	return strings.Join(slices.Sorted(maps.Keys(names)), ", ")
}

func structNames(t reflect.Type, names map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, tagged := f.Name, false
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name, tagged = n, true
			}
		}
		if f.Anonymous && !tagged {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				structNames(ft, names) // inlined, as the decoder does
				continue
			}
		}
		if f.IsExported() {
			names[name] = true
		}
	}
}

// fieldPath renders ptr, an RFC 6901 pointer into data, as the field paths
// of docs/API.md under root: "/events/0/actor" → "events[0].actor",
// "/labels/a.b" → "labels.a.b" (names as they are, unescaped). A pointer
// does not say whether a token is an array index or a name ("/labels/0"),
// so data is walked along it; a part that cannot be walked (data ends
// early) is rendered from the tokens alone.
func fieldPath(root string, data []byte, ptr jsontext.Pointer) string {
	b := []byte(root)
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	walkable := true
	for tok := range ptr.Tokens() {
		kind := jsontext.Kind(0)
		if walkable {
			kind = dec.PeekKind()
		}
		n, numErr := strconv.ParseUint(tok, 10, 63)
		isIndex := kind == '[' || kind == 0 && numErr == nil
		if isIndex {
			b = append(b, '[')
			b = append(b, tok...)
			b = append(b, ']')
		} else {
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, tok...)
		}
		if !walkable {
			continue
		}
		// Move to the value tok names (it may be the last: then nothing
		// needs it, and a failure is harmless).
		switch kind {
		case '[':
			walkable = numErr == nil && enterElement(dec, n)
		case '{':
			walkable = enterMember(dec, tok)
		default:
			walkable = false
		}
	}
	return string(b)
}

// enterElement moves dec, at an array, to its element i.
func enterElement(dec *jsontext.Decoder, i uint64) bool {
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	for ; i > 0; i-- {
		if dec.PeekKind() == ']' || dec.SkipValue() != nil {
			return false
		}
	}
	return dec.PeekKind() != ']'
}

// enterMember moves dec, at an object, to the value of its first member
// named name.
func enterMember(dec *jsontext.Decoder, name string) bool {
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if tok.String() == name {
			return true
		}
		if dec.SkipValue() != nil {
			return false
		}
	}
	return false
}
