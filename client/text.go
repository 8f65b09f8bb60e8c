package client

import (
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// json.Marshal sends a Go string that is not UTF-8 with each bad byte
// replaced by U+FFFD, so a node would store "T\uFFFD" for "T\xff" (and
// the same for "T\xfe") without ever seeing the difference. The client
// therefore refuses such strings before sending, with the *Error the node
// gives for the bytes it does see (code invalid_utf8, status 400, the
// field's path in the body). Data and metadata are json.RawMessage, sent
// as they are: the node refuses those with the path inside them.

// textError returns the refusal of s at field, or nil when s is UTF-8.
func textError(field, s string) error {
	if utf8.ValidString(s) {
		return nil
	}
	return &wire.Error{Status: http.StatusBadRequest, Code: events.CodeInvalidUTF8, Field: field,
		Message: fmt.Sprintf("%s is not UTF-8 text (refused by the client: it would be sent as U+FFFD); send UTF-8", field)}
}

// eventsTextError checks the strings of events under base ("events" or
// "appends[i].events").
func eventsTextError(base string, evs []wire.EventIn) error {
	for i := range evs {
		e := &evs[i]
		for _, f := range [...]struct{ name, v string }{{"id", e.ID}, {"type", e.Type}, {"correlation_id", e.CorrelationID}, {"causation_id", e.CausationID}} {
			if !utf8.ValidString(f.v) {
				return textError(fmt.Sprintf("%s[%d].%s", base, i, f.name), f.v)
			}
		}
		if e.Envelope == nil {
			continue
		}
		if err := textError(fmt.Sprintf("%s[%d].envelope.payloadType", base, i), e.Envelope.PayloadType); err != nil {
			return err
		}
		for k, sg := range e.Envelope.Signatures {
			if err := textError(fmt.Sprintf("%s[%d].envelope.signatures[%d].keyid", base, i, k), sg.KeyID); err != nil {
				return err
			}
		}
	}
	return nil
}

// commandTextError checks the strings of a command's envelope.
func commandTextError(in *wire.CommandIn) error {
	for _, f := range [...]struct{ name, v string }{{"command", in.Command}, {"id", in.ID}, {"actor", in.Actor}, {"correlation_id", in.CorrelationID}} {
		if err := textError(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}
