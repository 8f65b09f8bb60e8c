// Package strictjson checks JSON against the Go type it will be decoded
// into, with the exact JSON path of the first problem.
//
// encoding/json's DisallowUnknownFields names an unknown field but not where
// it is, matches keys case-insensitively, keeps the last of duplicate keys
// and drops array indices from type errors. Command data and request bodies
// are instructions to an authority, so each of those is refused here
// ("data.acceptance_checks[2].argv: unknown field; known fields are …").
// Check walks the value alongside the type before the caller decodes it
// with encoding/json, which then cannot fail.
//
// The walk runs on JSON that json.Valid accepted, so it scans bytes
// directly (see valueEnd) rather than tokenizing again, and builds a path
// string only when it reports an error.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/greffe/greffe/events"
)

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
)

// Error is the first problem found: the JSON path of the value and what is
// wrong with it.
type Error struct {
	Path   string
	Reason string
	// Err is the error of a type that decodes itself (its UnmarshalJSON or
	// UnmarshalText), when that is the problem, so that a caller can
	// match it (errors.As on the *Error reaches it); Reason is its text.
	Err error
}

// Error returns "path: reason".
func (e *Error) Error() string { return e.Path + ": " + e.Reason }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Check checks raw (one JSON value that json.Valid accepts) against t. Paths
// start with root ("data", or "" for a request body). With nullOK, null is
// accepted for any field, as encoding/json accepts it (leaving the field
// as it was); without, only for pointers, slices, maps and interfaces.
// Errors are *Error.
func Check(raw []byte, t reflect.Type, root string, nullOK bool) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return &Error{Path: root, Reason: "is empty"}
	}
	return (&walker{root: root, nullOK: nullOK, path: make([]pathSegment, 0, 8)}).walk(t, raw)
}

// CheckText finds the first string of raw (one JSON value that json.Valid
// accepts) that is not Unicode text, which events.ValidJSON then refuses:
// bytes that are not UTF-8, or an unpaired surrogate escape such as
// "\ud800". It reports the string's path under root, or for a key the path
// of its object (a key that is not text cannot be written in a path), as
// an *Error; nil when every string is text. Check does not look at text,
// and the inside of a json.RawMessage is walked here like any other value.
// Callers run it only after events.ValidJSON refused a body json.Valid
// accepted, so its cost is a refusal's.
func CheckText(raw []byte, root string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	return (&walker{root: root, path: make([]pathSegment, 0, 8)}).text(raw)
}

// textReason is CheckText's sentence.
const textReason = "is not UTF-8 text (a byte that is not UTF-8, or an unpaired surrogate escape such as \\ud800); JSON is UTF-8 (RFC 8259 §8.1)"

// text walks raw for CheckText.
func (w *walker) text(raw []byte) error {
	switch raw[0] {
	case '"':
		// A string is itself a JSON document: events.ValidJSON is the one
		// definition of text, shared with the check of stored data.
		if !events.ValidJSON(raw) {
			return w.walkErr("%s", textReason)
		}
	case '{':
		for it := (objectIter{raw: raw}); it.next(); {
			if !events.ValidJSON(it.rawKey) {
				return w.walkErr("holds a key that %s", textReason)
			}
			w.push(it.key, -1)
			if err := w.text(it.val); err != nil {
				return err
			}
			w.pop()
		}
	case '[':
		i := skipSpace(raw, 1)
		if raw[i] == ']' {
			return nil
		}
		for n := 0; ; n++ {
			end := valueEnd(raw, i)
			w.push(nil, n)
			if err := w.text(raw[i:end]); err != nil {
				return err
			}
			w.pop()
			i = skipSpace(raw, end) // ',' or ']'
			if raw[i] == ']' {
				return nil
			}
			i = skipSpace(raw, i+1)
		}
	}
	return nil
}

// walker walks one value; path is the JSON path below root of the value
// being walked, rendered only for an error.
type walker struct {
	root   string
	nullOK bool
	path   []pathSegment
}

// pathSegment is an object member (its unescaped key, index -1) or an array
// element (its index).
type pathSegment struct {
	key   []byte
	index int
}

func (w *walker) push(key []byte, index int) {
	w.path = append(w.path, pathSegment{key: key, index: index})
}

func (w *walker) pop() { w.path = w.path[:len(w.path)-1] }

// pathString renders the path: "data.acceptance_checks[2].argv", or
// "events[0].type" under an empty root.
func (w *walker) pathString() string {
	b := []byte(w.root)
	for _, s := range w.path {
		if s.index >= 0 {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(s.index), 10)
			b = append(b, ']')
		} else {
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, s.key...)
		}
	}
	return string(b)
}

// walkErr reports the value being walked.
func (w *walker) walkErr(format string, args ...any) error {
	return &Error{Path: w.pathString(), Reason: fmt.Sprintf(format, args...)}
}

// unmarshalErr reports the error of a type that decodes itself.
func (w *walker) unmarshalErr(err error) error {
	return &Error{Path: w.pathString(), Reason: err.Error(), Err: err}
}

// jsonKind names the kind of a raw JSON value for messages.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// walkType is what the walk needs to know of a Go type, computed once per
// type (walkTypeOf).
type walkType struct {
	jsonUnmarshaler bool // *T implements json.Unmarshaler
	textUnmarshaler bool // *T implements encoding.TextUnmarshaler
	// For a struct walked field by field: its fields by exact JSON name,
	// and those names sorted and joined for the unknown-field message.
	fields map[string]reflect.Type
	known  string
}

// walkTypes memoises walkTypeOf, a pure function of the type (as
// encoding/json caches its field lists): no state a caller can observe.
var walkTypes sync.Map // reflect.Type → *walkType

func walkTypeOf(t reflect.Type) *walkType {
	if wt, ok := walkTypes.Load(t); ok {
		return wt.(*walkType)
	}
	pt := reflect.PointerTo(t)
	wt := &walkType{
		jsonUnmarshaler: pt.Implements(jsonUnmarshalerType),
		textUnmarshaler: pt.Implements(textUnmarshalerType),
	}
	if t.Kind() == reflect.Struct && !wt.jsonUnmarshaler && !wt.textUnmarshaler {
		fields := jsonFields(t)
		wt.fields = make(map[string]reflect.Type, len(fields))
		for name, f := range fields {
			wt.fields[name] = f.Type
		}
		wt.known = strings.Join(slices.Sorted(maps.Keys(fields)), ", ")
	}
	got, _ := walkTypes.LoadOrStore(t, wt)
	return got.(*walkType)
}

// walk checks raw (one valid JSON value, without surrounding space)
// against t.
func (w *walker) walk(t reflect.Type, raw []byte) error {
	if raw[0] == 'n' { // null
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			return nil
		}
		if !w.nullOK {
			return w.walkErr("must not be null")
		}
		// encoding/json leaves the field as it is, except that a value
		// whose pointer decodes itself gets UnmarshalJSON("null") (a
		// RawMessage takes it as its bytes).
		if walkTypeOf(t).jsonUnmarshaler && t != rawMessageType {
			if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
				return w.unmarshalErr(err)
			}
		}
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wt := walkTypeOf(t)
	// Types that decode themselves (time.Time, Duration, uuid.UUID, …).
	if wt.jsonUnmarshaler {
		if t == rawMessageType {
			return nil
		}
		if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			return w.unmarshalErr(err)
		}
		return nil
	}
	if wt.textUnmarshaler {
		if raw[0] != '"' {
			return w.walkErr("must be a string, got %s", jsonKind(raw))
		}
		s := unquote(raw)
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText(bytes.Clone(s)); err != nil {
			return w.unmarshalErr(err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if raw[0] != '{' {
			return w.walkErr("must be an object, got %s", jsonKind(raw))
		}
		var seen keySet
		for it := (objectIter{raw: raw}); it.next(); {
			w.push(it.key, -1)
			if !seen.add(it.key) {
				return w.walkErr("appears twice")
			}
			ft, ok := wt.fields[string(it.key)]
			if !ok {
				return w.walkErr("unknown field; known fields are %s", wt.known)
			}
			if err := w.walk(ft, it.val); err != nil {
				return err
			}
			w.pop()
		}
		return nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return w.walkErr("unsupported map key type %s", t.Key())
		}
		if raw[0] != '{' {
			return w.walkErr("must be an object, got %s", jsonKind(raw))
		}
		var seen keySet
		elem := t.Elem()
		for it := (objectIter{raw: raw}); it.next(); {
			w.push(it.key, -1)
			if !seen.add(it.key) {
				return w.walkErr("appears twice")
			}
			if err := w.walk(elem, it.val); err != nil {
				return err
			}
			w.pop()
		}
		return nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			var b []byte
			if raw[0] != '"' || json.Unmarshal(raw, &b) != nil {
				return w.walkErr("must be a base64 string, got %s", jsonKind(raw))
			}
			return nil
		}
		if raw[0] != '[' {
			return w.walkErr("must be an array, got %s", jsonKind(raw))
		}
		elem := t.Elem()
		i := skipSpace(raw, 1)
		if raw[i] == ']' {
			return nil
		}
		for n := 0; ; n++ {
			end := valueEnd(raw, i)
			w.push(nil, n)
			if err := w.walk(elem, raw[i:end]); err != nil {
				return err
			}
			w.pop()
			if t.Kind() == reflect.Array && n >= t.Len() {
				return w.walkErr("has more than %d elements", t.Len())
			}
			i = skipSpace(raw, end) // ',' or ']'
			if raw[i] == ']' {
				return nil
			}
			i = skipSpace(raw, i+1)
		}
	case reflect.String:
		if raw[0] != '"' {
			return w.walkErr("must be a string, got %s", jsonKind(raw))
		}
		return nil
	case reflect.Bool:
		if raw[0] != 't' && raw[0] != 'f' {
			return w.walkErr("must be a boolean, got %s", jsonKind(raw))
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return w.walkErr("must be a number, got %s", jsonKind(raw))
		}
		if !numberFits(raw, t) {
			return w.walkErr("%s does not fit %s", raw, t.Kind())
		}
		return nil
	case reflect.Interface:
		return nil
	}
	return w.walkErr("unsupported type %s", t)
}

// numberFits reports whether the JSON number raw decodes into t, a numeric
// kind, as encoding/json decides it (literalStore): an integer kind takes
// only integers in its range, a float kind what parses at its size.
func numberFits(raw []byte, t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		return err == nil && !t.OverflowInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(string(raw), 10, 64)
		return err == nil && !t.OverflowUint(n)
	default: // Float32, Float64
		n, err := strconv.ParseFloat(string(raw), t.Bits())
		return err == nil && !t.OverflowFloat(n)
	}
}

// The scanner below reads JSON that json.Valid accepted: it does not check
// syntax, only finds where values end.

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// valueEnd returns the index just past the JSON value that starts at
// raw[i].
func valueEnd(raw []byte, i int) int {
	switch raw[i] {
	case '"':
		return stringEnd(raw, i)
	case '{', '[':
		depth := 0
		for i < len(raw) {
			switch raw[i] {
			case '"':
				i = stringEnd(raw, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	// A number, true, false or null: it ends at a delimiter.
	for i < len(raw) {
		switch raw[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// stringEnd returns the index just past the string whose opening quote is
// raw[i]: the first quote after it not escaped by an odd run of
// backslashes.
func stringEnd(raw []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(raw[i:], '"')
		if j < 0 {
			return len(raw) // unreachable on valid JSON
		}
		i += j
		n := 0
		for k := i - 1; raw[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// unquote returns the contents of the JSON string raw (quotes included) as
// encoding/json decodes it: the bytes themselves when they hold no escape
// and are valid UTF-8 (a slice of raw, not a copy), else the unescaped
// string, with invalid UTF-8 and lone surrogates replaced by U+FFFD.
func unquote(raw []byte) []byte {
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return s
	}
	var out string
	_ = json.Unmarshal(raw, &out) // cannot fail: raw is a valid JSON string
	return []byte(out)
}

// objectIter walks the members of a JSON object: for it := (objectIter{raw:
// raw}); it.next(); { it.key, it.val }. key is unescaped (see unquote),
// rawKey the key as written (quotes included), val is the member's value
// without surrounding space.
type objectIter struct {
	raw              []byte
	i                int // where the next member (or '}') starts; 0 before the first
	key, rawKey, val []byte
}

func (it *objectIter) next() bool {
	raw := it.raw
	i := it.i
	if i == 0 {
		i = skipSpace(raw, 1) // past '{'
	} else {
		i = skipSpace(raw, i) // ',' or '}'
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	if raw[i] == '}' {
		it.i = i
		return false
	}
	ke := stringEnd(raw, i)
	it.rawKey = raw[i:ke]
	it.key = unquote(it.rawKey)
	i = skipSpace(raw, ke)  // ':'
	i = skipSpace(raw, i+1) // the value
	ve := valueEnd(raw, i)
	it.val = raw[i:ve]
	it.i = ve
	return true
}

// keySet holds the keys of one object seen so far, to refuse duplicates.
// Objects in commands are small: a linear scan over an inline array, then a
// map past it.
type keySet struct {
	small [16][]byte
	n     int
	big   map[string]struct{}
}

// add reports whether key is new, and records it.
func (s *keySet) add(key []byte) bool {
	if s.big != nil {
		if _, ok := s.big[string(key)]; ok {
			return false
		}
		s.big[string(key)] = struct{}{}
		return true
	}
	for _, k := range s.small[:s.n] {
		if bytes.Equal(k, key) {
			return false
		}
	}
	if s.n < len(s.small) {
		s.small[s.n] = key
		s.n++
		return true
	}
	s.big = make(map[string]struct{}, 2*len(s.small))
	for _, k := range s.small {
		s.big[string(k)] = struct{}{}
	}
	s.big[string(key)] = struct{}{}
	return true
}

// jsonFields maps the exact JSON names of t's exported fields to them.
// Fields tagged "-" are left out; embedded structs are not used by commands.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		out[name] = f
	}
	return out
}
