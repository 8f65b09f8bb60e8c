package aggregates

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Strict decoding of command data.
//
// encoding/json's DisallowUnknownFields names an unknown field but not where
// it is, matches keys case-insensitively, keeps the last of duplicate keys
// and drops array indices from type errors. A command is an instruction to
// an authority, so each of those is refused here with the JSON path of the
// field ("data.acceptance_checks[2].argv"): the value is walked alongside
// the target Go type before it is decoded.

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodeStrict decodes data (a JSON object) into v, a pointer to a struct.
// Errors are *InvalidCommandError with paths under "data".
func decodeStrict(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		data = []byte("{}")
	}
	if !json.Valid(data) {
		var probe any
		err := json.Unmarshal(data, &probe)
		return invalid("", "is not valid JSON: %v", err)
	}
	if data[0] != '{' {
		return invalid("", "must be a JSON object")
	}
	if err := walkJSON("data", reflect.TypeOf(v).Elem(), data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// The walk accepts only what decodes; reaching here is a gap in it.
		return &InvalidCommandError{Path: "data", Reason: err.Error()}
	}
	return nil
}

func walkErr(path, format string, args ...any) error {
	return &InvalidCommandError{Path: path, Reason: fmt.Sprintf(format, args...)}
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

// walkJSON checks raw (one valid JSON value) against t.
func walkJSON(path string, t reflect.Type, raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if raw[0] == 'n' { // null
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			return nil
		}
		return walkErr(path, "must not be null")
	}
	if t.Kind() == reflect.Pointer {
		return walkJSON(path, t.Elem(), raw)
	}
	// Types that decode themselves (time.Time, Duration, uuid.UUID, …).
	if reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		if t == reflect.TypeFor[json.RawMessage]() {
			return nil
		}
		if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			return walkErr(path, "%v", err)
		}
		return nil
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return walkErr(path, "must be a string, got %s", jsonKind(raw))
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return walkErr(path, "%v", err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if raw[0] != '{' {
			return walkErr(path, "must be an object, got %s", jsonKind(raw))
		}
		fields := jsonFields(t)
		return walkObject(path, raw, func(key string, val []byte) error {
			f, ok := fields[key]
			if !ok {
				return walkErr(path+"."+key, "unknown field; known fields are %s", strings.Join(sortedKeys(fields), ", "))
			}
			return walkJSON(path+"."+key, f.Type, val)
		})
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return walkErr(path, "unsupported map key type %s", t.Key())
		}
		if raw[0] != '{' {
			return walkErr(path, "must be an object, got %s", jsonKind(raw))
		}
		return walkObject(path, raw, func(key string, val []byte) error {
			return walkJSON(path+"."+key, t.Elem(), val)
		})
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			var b []byte
			if raw[0] != '"' || json.Unmarshal(raw, &b) != nil {
				return walkErr(path, "must be a base64 string, got %s", jsonKind(raw))
			}
			return nil
		}
		if raw[0] != '[' {
			return walkErr(path, "must be an array, got %s", jsonKind(raw))
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, err := dec.Token(); err != nil {
			return walkErr(path, "%v", err)
		}
		for i := 0; dec.More(); i++ {
			var el json.RawMessage
			if err := dec.Decode(&el); err != nil {
				return walkErr(path, "%v", err)
			}
			if err := walkJSON(path+"["+strconv.Itoa(i)+"]", t.Elem(), el); err != nil {
				return err
			}
			if t.Kind() == reflect.Array && i >= t.Len() {
				return walkErr(path, "has more than %d elements", t.Len())
			}
		}
		return nil
	case reflect.String:
		if raw[0] != '"' {
			return walkErr(path, "must be a string, got %s", jsonKind(raw))
		}
		return nil
	case reflect.Bool:
		if raw[0] != 't' && raw[0] != 'f' {
			return walkErr(path, "must be a boolean, got %s", jsonKind(raw))
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return walkErr(path, "must be a number, got %s", jsonKind(raw))
		}
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			return walkErr(path, "%s does not fit %s", raw, t.Kind())
		}
		return nil
	case reflect.Interface:
		return nil
	}
	return walkErr(path, "unsupported type %s", t)
}

// walkObject calls fn for each key of the object raw, refusing duplicates.
func walkObject(path string, raw []byte, fn func(key string, val []byte) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return walkErr(path, "%v", err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return walkErr(path, "%v", err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return walkErr(path+"."+key, "appears twice")
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return walkErr(path+"."+key, "%v", err)
		}
		if err := fn(key, val); err != nil {
			return err
		}
	}
	return nil
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
