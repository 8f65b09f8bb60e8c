package kurrentgrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"

	"github.com/greffe/greffe/events"
)

// streamsService implements event_store.client.streams.Streams: Read and
// Append. BatchAppend is left unimplemented (the Go client never calls it
// unless GetSupportedMethods lists it, and it does not).
type streamsService struct {
	streams.UnimplementedStreamsServer
	s *Server
}

// Append reads the options, then the proposed events until the client
// closes its side, and appends them atomically with the expected revision.
// A failed condition is an AppendResp carrying WrongExpectedVersion, as
// KurrentDB answers; every other refusal is a gRPC status with its code.
func (svc *streamsService) Append(call streams.Streams_AppendServer) error {
	ctx := call.Context()
	resp, err := svc.append(ctx, call)
	if err != nil {
		drain(call)
		return svc.s.toStatus(ctx, err)
	}
	return call.SendAndClose(resp)
}

// drain reads what the client still sends of a refused append, so that it
// receives the refusal's status: the official client reports an error on
// its next send (EOF, no code) when the call already ended. Bounded by the
// largest append a client may send.
func drain(call streams.Streams_AppendServer) {
	for range events.MaxEventsPerAppend + 1 {
		if _, err := call.Recv(); err != nil {
			return
		}
	}
}

func (svc *streamsService) append(ctx context.Context, call streams.Streams_AppendServer) (*streams.AppendResp, error) {
	first, err := call.Recv()
	if err != nil {
		return nil, err
	}
	who := svc.s.principal(ctx)
	if !who.MayAppend {
		return nil, refusef(CodeForbidden, "%s may read but not append; use a token whose role is writer", who.Name)
	}
	opts := first.GetOptions()
	if opts == nil {
		return nil, refusef(CodeInvalidRequest, "an append starts with its options (stream and expected revision)")
	}
	stream := string(opts.GetStreamIdentifier().GetStreamName())
	if err := events.ValidateStreamName("stream", stream); err != nil {
		return nil, err
	}
	if events.IsSystemStream(stream) {
		return nil, refusef(events.CodeReservedStreamName, "stream names starting with \"$\" are KurrentDB's ($all, system and metadata streams); %q cannot be appended to here", stream)
	}
	if events.IsReserved(stream) {
		return nil, refusef(events.CodeReservedStream, "stream %q belongs to a domain aggregate; change it with a command, not a raw append", stream)
	}
	var expected events.Expected
	switch x := opts.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_Revision:
		expected = events.ExpectVersion(x.Revision)
	case *streams.AppendReq_Options_NoStream:
		expected = events.ExpectNoStream
	case *streams.AppendReq_Options_StreamExists:
		expected = events.ExpectExists
	default: // Any, or unset
		expected = events.ExpectAny
	}
	var proposed []events.Proposed
	size := 0
	for {
		msg, err := call.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		pm := msg.GetProposedMessage()
		if pm == nil {
			return nil, refusef(CodeInvalidRequest, "an append sends its options once, then proposed messages")
		}
		// Bounds at the edge: refuse before buffering more than one append
		// may hold, rather than after reading an unbounded stream.
		if len(proposed) == events.MaxEventsPerAppend {
			return nil, refusef(events.CodeTooManyEvents, "more than %d events in one append; split it", events.MaxEventsPerAppend)
		}
		size += len(pm.GetData()) + len(pm.GetCustomMetadata())
		if size > events.MaxAppendBytes {
			return nil, refusef(events.CodeAppendTooLarge, "the append carries more than %d bytes; split it", events.MaxAppendBytes)
		}
		p, err := svc.proposed(pm, who.Name)
		if err != nil {
			return nil, err
		}
		proposed = append(proposed, p)
	}
	if len(proposed) == 0 {
		return svc.checkOnly(ctx, stream, expected)
	}
	out, err := svc.s.log.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: stream, Expected: expected, Events: proposed}}})
	var ce *events.ConditionError
	if errors.As(err, &ce) {
		return wrongExpected(ce), nil
	}
	if err != nil {
		return nil, fmt.Errorf("append %s: %w", stream, err)
	}
	last := out.Events[len(out.Events)-1]
	return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: &streams.AppendResp_Success{
		CurrentRevisionOption: &streams.AppendResp_Success_CurrentRevision{CurrentRevision: last.Version},
		PositionOption: &streams.AppendResp_Success_Position{Position: &streams.AppendResp_Position{
			CommitPosition: last.Position, PreparePosition: last.Position,
		}},
	}}}, nil
}

// proposed converts one proposed message. Empty data or metadata become {}
// (the HTTP API does the same); anything else must be a JSON object, whatever
// content-type the client declared, because the ledger stores JSON only.
// KurrentDB's "$correlationId" and "$causationId" metadata, when they are
// strings, also fill the envelope's correlation and causation ids so that
// the audit trail groups them; the metadata bytes stay as received.
func (svc *streamsService) proposed(pm *streams.AppendReq_ProposedMessage, actor string) (events.Proposed, error) {
	id, err := fromProtoUUID(pm.GetId())
	if err != nil {
		return events.Proposed{}, err
	}
	if err := events.CheckRawEventID("id", id); err != nil {
		return events.Proposed{}, err
	}
	data, meta := pm.GetData(), pm.GetCustomMetadata()
	if len(data) == 0 {
		data = []byte("{}")
	}
	if len(meta) == 0 {
		meta = []byte("{}")
	}
	p := events.Proposed{ID: id, Type: pm.GetMetadata()[metaType], Data: data, Metadata: meta, Actor: actor}
	var ids struct {
		Correlation any `json:"$correlationId"`
		Causation   any `json:"$causationId"`
	}
	if json.Unmarshal(meta, &ids) == nil {
		p.CorrelationID, _ = ids.Correlation.(string)
		p.CausationID, _ = ids.Causation.(string)
	}
	return p, nil
}

// checkOnly answers an append without events, which KurrentDB allows as a
// way to test the expected revision. Nothing is written, so reading the
// stream's last version is enough.
func (svc *streamsService) checkOnly(ctx context.Context, stream string, expected events.Expected) (*streams.AppendResp, error) {
	actual := int64(-1)
	evs, err := svc.s.log.ReadStream(ctx, stream, events.ReadOptions{From: events.FromEnd, Limit: 1, Direction: events.Backward})
	switch {
	case errors.Is(err, events.ErrNotFound):
	case err != nil:
		return nil, err
	case len(evs) > 0:
		actual = int64(evs[0].Version)
	}
	if !expected.Holds(actual) {
		return wrongExpected(&events.ConditionError{Stream: stream, Expected: expected, Actual: actual}), nil
	}
	ok := &streams.AppendResp_Success{PositionOption: &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}}
	if actual < 0 {
		ok.CurrentRevisionOption = &streams.AppendResp_Success_NoStream{NoStream: &shared.Empty{}}
	} else {
		ok.CurrentRevisionOption = &streams.AppendResp_Success_CurrentRevision{CurrentRevision: uint64(actual)}
	}
	return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: ok}}, nil
}

// wrongExpected fills both the current fields (which the Go client reads)
// and the 20.6.0 ones (which older clients read).
func wrongExpected(ce *events.ConditionError) *streams.AppendResp {
	w := &streams.AppendResp_WrongExpectedVersion{}
	if ce.Actual < 0 {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_NoStream_20_6_0{NoStream_20_6_0: &shared.Empty{}}
	} else {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: uint64(ce.Actual)}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_CurrentRevision_20_6_0{CurrentRevision_20_6_0: uint64(ce.Actual)}
	}
	switch ce.Expected.Kind {
	case events.ExpectNoStreamKind:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
	case events.ExpectExistsKind:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_StreamExists_20_6_0{StreamExists_20_6_0: &shared.Empty{}}
	case events.ExpectVersionKind:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: ce.Expected.Version}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision_20_6_0{ExpectedRevision_20_6_0: ce.Expected.Version}
	default:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_Any_20_6_0{Any_20_6_0: &shared.Empty{}}
	}
	return &streams.AppendResp{Result: &streams.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: w}}
}

// Delete is refused: greffe never removes history.
func (svc *streamsService) Delete(ctx context.Context, _ *streams.DeleteReq) (*streams.DeleteResp, error) {
	return nil, svc.s.toStatus(ctx, refusef(CodeAppendOnly, "greffe never deletes a stream: history is append-only"))
}

// Tombstone is refused: greffe never removes history.
func (svc *streamsService) Tombstone(ctx context.Context, _ *streams.TombstoneReq) (*streams.TombstoneResp, error) {
	return nil, svc.s.toStatus(ctx, refusef(CodeAppendOnly, "greffe never tombstones a stream: history is append-only"))
}
