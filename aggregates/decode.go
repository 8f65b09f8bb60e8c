package aggregates

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/strictjson"
)

// Strict decoding of command data: unknown, duplicate and wrongly cased
// keys, null for a plain field and type errors are refused with the JSON
// path of the field ("data.acceptance_checks[2].argv"), by
// internal/strictjson, before encoding/json decodes.

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
	// A string that is not text would decode to U+FFFD (two names, one
	// provider): refused with its path, as the API refuses it in a body.
	if !events.ValidJSON(data) {
		var se *strictjson.Error
		if err := strictjson.CheckText(data, "data"); errors.As(err, &se) {
			return &InvalidCommandError{Path: se.Path, Reason: se.Reason, Code: events.CodeInvalidUTF8}
		}
	}
	if err := strictjson.Check(data, reflect.TypeOf(v).Elem(), "data", false); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return &InvalidCommandError{Path: se.Path, Reason: se.Reason}
		}
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
