package aggregates

import (
	"bytes"
	"errors"

	"github.com/greffe/greffe/events"
)

// Strict decoding of command data (and of a policy file, and of a
// measurement's signed payload), with events.DecodeJSON, the one strict
// decoder: unknown, repeated and wrongly cased names, strings that are not
// UTF-8 text, null for a plain field and type errors are refused with the
// JSON path of the field ("data.acceptance_checks[2].argv").

// decodeStrict decodes data (a JSON object; empty means {}) into v, a
// pointer to a struct. Errors are *InvalidCommandError with paths under
// "data": invalid_command, or invalid_utf8 for a string that is not text.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	err := events.DecodeJSON(data, v, events.DecodeOptions{Root: "data", RefuseNull: true})
	if err == nil {
		return nil
	}
	ie := &InvalidCommandError{Path: "data", Reason: err.Error()}
	var ee *events.Error
	if errors.As(err, &ee) {
		ie.Path, ie.Reason = ee.Field, ee.Message
		if ee.Code == events.CodeInvalidUTF8 {
			// Whatever the field, "fix the encoding" is told apart from
			// "fix the value" (events.CodeInvalidUTF8).
			ie.Code = events.CodeInvalidUTF8
		}
	}
	return ie
}
