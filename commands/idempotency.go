package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// Idempotency by command id (doc.go): one command id is handled by one
// request at a time (lockID), and a command whose id is already in the log
// answers its recorded outcome (prior), if it is the same command.

// lockID waits until no other request with the same command id is being
// handled, and returns the function that releases the id.
func (h *Handler) lockID(ctx context.Context, id uuid.UUID) (func(), error) {
	for {
		h.mu.Lock()
		busy, ok := h.inflight[id]
		if !ok {
			done := make(chan struct{})
			h.inflight[id] = done
			h.mu.Unlock()
			return func() {
				h.mu.Lock()
				delete(h.inflight, id)
				h.mu.Unlock()
				close(done)
			}, nil
		}
		h.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// prior returns the recorded outcome of a command whose id is already in
// the log (found), checking that it is the same command.
func (h *Handler) prior(ctx context.Context, p *prepared) (Result, error, bool) {
	e0, err := h.log.EventByID(ctx, EventID(p.id, 0))
	switch {
	case err == nil:
		// Only commands write the domain streams; an event that merely has
		// the derived id elsewhere (a raw append) is not this command's.
		if !events.IsReserved(e0.Stream) {
			return Result{}, p.reused(e0.Position, ""), true
		}
		if err := p.sameCommand(e0.Metadata, e0.Position); err != nil {
			return Result{}, err, true
		}
		evs := []events.Event{e0}
		for i := 1; i < events.MaxEventsPerAppend; i++ {
			e, err := h.log.EventByID(ctx, EventID(p.id, i))
			if errors.Is(err, events.ErrNotFound) {
				break
			}
			if err != nil {
				return Result{}, err, true
			}
			evs = append(evs, e)
		}
		var d struct {
			At time.Time `json:"at"`
		}
		_ = json.Unmarshal(e0.Data, &d) // the original time, when the event records one
		return h.result(p, OutcomeAppended, true, evs, d.At), nil, true
	case !errors.Is(err, events.ErrNotFound):
		return Result{}, err, true
	}
	e, err := h.log.EventByID(ctx, RefusalID(p.id))
	switch {
	case errors.Is(err, events.ErrNotFound):
		return Result{}, nil, false
	case err != nil:
		return Result{}, err, true
	}
	if e.Stream != RefusalsStream || e.Type != TypeCommandRefused {
		return Result{}, p.reused(e.Position, ""), true
	}
	if err := p.sameCommand(e.Metadata, e.Position); err != nil {
		return Result{}, err, true
	}
	return Result{}, refusedFrom(e, true), true
}

// sameCommand checks that stored metadata records this command.
func (p *prepared) sameCommand(meta json.RawMessage, pos uint64) error {
	var m Metadata
	// The digest recorded before issue #15 (over the compacted bytes) is
	// honoured too: a command recorded by the older node and re-sent with
	// the same bytes after the upgrade is the same command (decode.go).
	if err := json.Unmarshal(meta, &m); err != nil || m.CommandDigest != p.digest && m.CommandDigest != digestLegacy(p.name, p.corr, p.data) {
		return p.reused(pos, m.Command)
	}
	return nil
}

func (p *prepared) reused(pos uint64, command string) error {
	return &events.Error{Code: CodeCommandIDReused, Kind: events.KindRefused,
		Message: fmt.Sprintf("command id %s was already used at position %d by a command with another name, data or correlation id; use a new id for a new command", p.id, pos),
		Details: map[string]any{"command_id": p.id.String(), "position": pos, "command": command}}
}
