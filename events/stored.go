package events

import (
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// storedOptions decode stored event data as encoding/json would (names
// matched case-insensitively, unknown names ignored, embedded structs
// inlined: what the writers of the data, the aggregates, marshal), on the
// one JSON decoder of the module (json/v2's engine).
var storedOptions = jsonv1.DefaultOptionsV1()

// DecodeStored decodes data that the log stored (an event's data, which
// Check accepted and a decider wrote) into v, a non-nil pointer: the one
// decoder of domain event data, which every aggregate's Evolve reads
// through. It is not for input: input is decoded strictly (DecodeJSON).
func DecodeStored(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, storedOptions)
}
