package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
)

// ErrNotRecorded is returned by VerifyRecorded for a measurement without a
// recorded result (yet).
var ErrNotRecorded = errors.New("executor: measurement has no recorded result")

// Verified is a recorded measurement whose signature was checked.
type Verified struct {
	// Event is the stored MeasurementRecorded.
	Event events.Event
	// Result is its signed payload, decoded.
	Result aggregates.MeasurementResult
	// KeyIDs are the keys whose signatures verified.
	KeyIDs []string
	// Late is true when the result was recorded beside an uncertainty.
	Late bool
}

// VerifyRecorded reads a measurement's stream and checks the stored
// result's DSSE envelope over its exact stored bytes against the keys its
// executor had registered, and not revoked, before the result's position:
// what an auditor who trusts no node would check. It returns ErrNotRecorded
// when there is no result, and an *events.SignatureError (wrapped) when
// the signature does not hold.
func VerifyRecorded(ctx context.Context, c *client.Client, measurementID string) (Verified, error) {
	stream := aggregates.MeasurementStream(measurementID)
	page, err := c.ReadStream(ctx, stream, events.ReadOptions{Limit: 1000})
	if code := client.CodeOf(err); code == events.CodeNotFound || code == events.CodeStreamNotFound {
		return Verified{}, fmt.Errorf("%s: %w", measurementID, ErrNotRecorded)
	}
	if err != nil {
		return Verified{}, fmt.Errorf("read %s: %w", stream, err)
	}
	var v Verified
	found := false
	for _, e := range page.Events {
		switch e.Type {
		case aggregates.TypeMeasurementUncertain:
			v.Late = true
		case aggregates.TypeMeasurementRecorded:
			v.Event, found = e, true
		}
	}
	if !found {
		return Verified{}, fmt.Errorf("%s: %w", measurementID, ErrNotRecorded)
	}
	if err := json.Unmarshal(v.Event.Data, &v.Result); err != nil {
		return Verified{}, fmt.Errorf("%s: the stored result does not decode: %w", measurementID, err)
	}
	ring := events.NewKeyRing()
	keys := aggregates.ExecutorStream(v.Result.ExecutorID)
	for from := uint64(0); ; {
		kp, err := c.ReadStream(ctx, keys, events.ReadOptions{From: from, Limit: 1000})
		if code := client.CodeOf(err); code == events.CodeNotFound || code == events.CodeStreamNotFound {
			break
		}
		if err != nil {
			return Verified{}, fmt.Errorf("read %s: %w", keys, err)
		}
		for i := range kp.Events {
			if kp.Events[i].Position < v.Event.Position {
				ring.Apply(&kp.Events[i])
			}
		}
		if kp.Next == nil || len(kp.Events) == 0 {
			break
		}
		from = *kp.Next
	}
	if v.Event.Envelope == nil || v.Event.Envelope.PayloadType != aggregates.MeasurementPayloadType {
		return Verified{}, fmt.Errorf("%s at position %d: %w", measurementID, v.Event.Position, &events.SignatureError{Reason: events.SigNoSignature})
	}
	ids, err := events.VerifyEnvelope(v.Event.Data, v.Event.Envelope, ring.Lookup)
	if err != nil {
		return Verified{}, fmt.Errorf("%s at position %d: %w", measurementID, v.Event.Position, err)
	}
	v.KeyIDs = ids
	return v, nil
}
