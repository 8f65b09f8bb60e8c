package aggregates

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"

	"github.com/greffe/greffe/events"
)

// The shape of a signed command (RecordMeasurement, RecordSignedCheck): the
// exact signed bytes, base64 in the command's JSON, and a DSSE envelope.
// Both commands hold their payload and envelope to the same rules, said
// here once.

// maxEnvelopeSignatures bounds an envelope's signatures: a bound of the
// edge. No signature at all is a gate of Decide (measurement_unsigned,
// signature_invalid), so that the refusal is recorded.
const maxEnvelopeSignatures = 16

// decodeSignedPayload decodes payload, which must be a JSON object,
// strictly into v (a pointer to the payload's struct) and holds its
// fields to their types' rules, with paths under data.payload.
func decodeSignedPayload(payload []byte, v any) error {
	p := bytes.TrimSpace(payload)
	if len(p) == 0 || p[0] != '{' || !json.Valid(p) {
		return invalid("payload", "must be the base64 of the signed JSON object")
	}
	if err := decodeStrict(payload, v); err != nil {
		var ie *InvalidCommandError
		if errors.As(err, &ie) {
			ie.Path = "data.payload" + ie.Path[len("data"):]
		}
		return err
	}
	return checkFields("payload", reflect.ValueOf(v))
}

// checkEnvelopeBound refuses an envelope of more than
// maxEnvelopeSignatures signatures.
func checkEnvelopeBound(env *events.Envelope) error {
	if len(env.Signatures) > maxEnvelopeSignatures {
		return invalid("envelope.signatures", "has %d signatures; an envelope carries 1 to %d", len(env.Signatures), maxEnvelopeSignatures)
	}
	return nil
}
