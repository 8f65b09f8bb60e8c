package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// Recording a gate's refusal (doc.go, "Refusals").

// maxRefusalDetails bounds the encoded details of a recorded refusal; a
// larger set is replaced by a note (the refusal's code and sentence stay).
const maxRefusalDetails = 64 << 10

// refuse records a gate's refusal, pinned to the streams it was based on.
func (h *Handler) refuse(ctx context.Context, p *prepared, r *reads, ref *aggregates.Refusal, at time.Time) (Result, error) {
	if res, err, found := h.prior(ctx, p); found {
		return res, err
	}
	rec := CommandRefused{Command: p.name, CommandID: p.id.String(), CommandDigest: p.digest, Code: ref.Code, Message: ref.Message,
		Details: ref.Details, Actor: p.actor, OnBehalfOf: p.behalf, CorrelationID: p.corr, At: at}
	data, err := json.Marshal(rec)
	if err != nil || len(data) > maxRefusalDetails {
		rec.Details = map[string]any{"details_omitted": "the gate's details did not fit the recorded refusal"}
		if data, err = json.Marshal(rec); err != nil {
			return Result{}, fmt.Errorf("encode refusal: %w", err)
		}
	}
	req := events.AppendRequest{Streams: make([]events.StreamAppend, 0, len(r.order)+1)}
	for _, s := range r.order {
		req.Streams = append(req.Streams, events.StreamAppend{Stream: s, Expected: r.expected(s)})
	}
	req.Streams = append(req.Streams, events.StreamAppend{Stream: RefusalsStream, Expected: events.ExpectAny, Events: []events.Proposed{{
		ID: RefusalID(p.id), Type: TypeCommandRefused, Data: data, Metadata: p.meta,
		CorrelationID: p.corr, CausationID: p.id.String(), Actor: p.actor,
	}}})
	o, res, done, err := h.appendOutcome(ctx, p, req, "record refusal of %s: duplicate without the original")
	if done {
		return res, err
	}
	return Result{}, refusedFrom(o.Events[0], false)
}

// refusedFrom reads a recorded refusal back from its event.
func refusedFrom(e events.Event, dup bool) error {
	var d CommandRefused
	if err := events.DecodeStored(e.Data, &d); err != nil {
		return fmt.Errorf("refusal at position %d: %w: %v", e.Position, events.ErrCorrupt, err)
	}
	return &RefusedError{Refusal: aggregates.Refusal{Code: d.Code, Message: d.Message, Details: d.Details}, Event: e, Duplicate: dup}
}
