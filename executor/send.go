package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Sending commands to the node: one command id per intent, re-sent after
// failures that leave the outcome open, so the node applies it at most
// once.

// sendAttempts bounds how many times a command is sent when no answer, a
// 5xx, an outcome_unknown or a concurrency_conflict came back. The id is
// the same each time, so the node applies it at most once.
const sendAttempts = 6

// send sends one command, re-sending it (same id) after transient
// failures. A refusal or a malformed command is returned at once.
func (x *Executor) send(ctx context.Context, name string, id uuid.UUID, data any) (wire.CommandOut, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return wire.CommandOut{}, fmt.Errorf("encode %s: %w", name, err)
	}
	in := wire.CommandIn{Command: name, ID: id.String(), Actor: "executor:" + x.cfg.ExecutorID, Data: b}
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		out, err := x.cfg.Client.Command(ctx, in)
		if err == nil || !transient(err) || attempt >= sendAttempts || ctx.Err() != nil {
			return out, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return out, err
		}
		wait = min(2*wait, 3*time.Second)
	}
}

// transient reports whether re-sending the same command may succeed.
func transient(err error) bool {
	var ae *wire.Error
	if !errors.As(err, &ae) {
		return true // no answer at all
	}
	return ae.Status >= http.StatusInternalServerError || ae.Code == events.CodeOutcomeUnknown || ae.Code == "concurrency_conflict"
}
