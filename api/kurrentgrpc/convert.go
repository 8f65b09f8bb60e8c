package kurrentgrpc

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// System metadata keys. "type", "content-type" and "created" are KurrentDB's
// (clients require "created": the Go client exits the process when it is
// missing); the greffe- keys carry what KurrentDB has no field for.
const (
	metaType          = "type"
	metaContentType   = "content-type"
	metaCreated       = "created"
	metaLeafHash      = "greffe-leaf-hash"
	metaCorrelationID = "greffe-correlation-id"
	metaCausationID   = "greffe-causation-id"
	metaActor         = "greffe-actor"

	contentTypeJSON = "application/json"
)

// ticks returns e's recorded time as KurrentDB's "created": 100 ns ticks
// since the Unix epoch.
func ticks(e *events.Event) int64 { return e.RecordedAt.UnixNano() / 100 }

// protoUUID encodes id the way the client asked: structured (two big-endian
// int64 halves, the default) or as a string.
func protoUUID(id uuid.UUID, asString bool) *shared.UUID {
	if asString {
		return &shared.UUID{Value: &shared.UUID_String_{String_: id.String()}}
	}
	return &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
		MostSignificantBits:  int64(binary.BigEndian.Uint64(id[:8])),
		LeastSignificantBits: int64(binary.BigEndian.Uint64(id[8:])),
	}}}
}

// fromProtoUUID decodes either form. A missing id is an error: the client
// always sends one, and it is the event's idempotency key.
func fromProtoUUID(u *shared.UUID) (uuid.UUID, error) {
	switch v := u.GetValue().(type) {
	case *shared.UUID_Structured_:
		var id uuid.UUID
		binary.BigEndian.PutUint64(id[:8], uint64(v.Structured.GetMostSignificantBits()))
		binary.BigEndian.PutUint64(id[8:], uint64(v.Structured.GetLeastSignificantBits()))
		return id, nil
	case *shared.UUID_String_:
		id, err := uuid.Parse(v.String_)
		if err != nil {
			return uuid.Nil, refusef(events.CodeInvalidEventID, "event id %q is not a UUID", v.String_)
		}
		return id, nil
	}
	return uuid.Nil, refusef(events.CodeInvalidEventID, "a proposed event needs an id")
}

// recorded converts a stored event to the protocol's RecordedEvent.
func recorded(e *events.Event, uuidAsString bool) *streams.ReadResp_ReadEvent_RecordedEvent {
	md := map[string]string{
		metaType:        e.Type,
		metaContentType: contentTypeJSON,
		metaCreated:     strconv.FormatInt(ticks(e), 10),
		metaLeafHash:    hex.EncodeToString(e.LeafHash[:]),
	}
	if e.CorrelationID != "" {
		md[metaCorrelationID] = e.CorrelationID
	}
	if e.CausationID != "" {
		md[metaCausationID] = e.CausationID
	}
	if e.Actor != "" {
		md[metaActor] = e.Actor
	}
	return &streams.ReadResp_ReadEvent_RecordedEvent{
		Id:               protoUUID(e.ID, uuidAsString),
		StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(e.Stream)},
		StreamRevision:   e.Version,
		PreparePosition:  e.Position,
		CommitPosition:   e.Position,
		Metadata:         md,
		CustomMetadata:   e.Metadata,
		Data:             e.Data,
	}
}

// eventResp wraps one event as a Read response.
func eventResp(e *events.Event, uuidAsString bool) *streams.ReadResp {
	return &streams.ReadResp{Content: &streams.ReadResp_Event{Event: &streams.ReadResp_ReadEvent{
		Event:    recorded(e, uuidAsString),
		Position: &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: e.Position},
	}}}
}
