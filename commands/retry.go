package commands

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// decide runs attempts until one is not undone by a concurrent change to a
// stream it read, at most h.maxRetries times after the first, then answers
// concurrency_conflict.
func (h *Handler) decide(ctx context.Context, p *prepared, at time.Time) (Result, error) {
	var last *events.ConditionError
	for attempt := 0; ; attempt++ {
		res, err := h.attempt(ctx, p, at)
		var ce *events.ConditionError
		if !errors.As(err, &ce) {
			res.Retries = attempt
			return res, err
		}
		last = ce
		if attempt >= h.maxRetries {
			break
		}
		if err := backoff(ctx, attempt); err != nil {
			return Result{}, err
		}
	}
	return Result{}, &events.Error{Code: CodeConcurrencyConflict, Kind: events.KindFailed,
		Message: fmt.Sprintf("stream %s kept changing under the command through %d retries; nothing was written, re-send it", last.Stream, h.maxRetries),
		Details: map[string]any{"stream": last.Stream, "expected": last.Expected.String(), "actual": last.Actual, "retries": h.maxRetries}}
}

// backoff waits 2^attempt ms, jittered to half-to-full, so that commands
// that collided do not collide again in step.
func backoff(ctx context.Context, attempt int) error {
	d := time.Millisecond << min(attempt, 6)
	t := time.NewTimer(d/2 + rand.N(d/2+1))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attempt loads, decides and appends once. A *events.ConditionError means
// a stream read changed: the caller retries.
func (h *Handler) attempt(ctx context.Context, p *prepared, at time.Time) (Result, error) {
	r, err := h.load(ctx, p.cmd)
	if err != nil {
		return Result{}, err
	}
	in := aggregates.Inputs{At: at, Position: h.log.Head().Size, Policy: h.policy, States: r.states, Principal: p.principal}
	if ec, ok := p.cmd.(aggregates.EvidenceCommand); ok {
		if in.Evidence, err = h.evidence(ctx, ec, r); err != nil {
			return Result{}, err
		}
	}
	evs, err := aggregates.Decide(p.cmd, in)
	var ref *aggregates.Refusal
	switch {
	case errors.As(err, &ref):
		return h.refuse(ctx, p, r, ref, at)
	case err != nil:
		return Result{}, fmt.Errorf("decide %s: %w", p.name, err)
	case len(evs) == 0:
		// Nothing to write; unless this is a re-sent command, whose
		// original outcome stands.
		if res, err, found := h.prior(ctx, p); found {
			return res, err
		}
		return Result{Command: p.name, CommandID: p.id, Outcome: OutcomeUnchanged, Position: in.Position, At: at}, nil
	}
	req := events.AppendRequest{Streams: make([]events.StreamAppend, len(r.order))}
	idx := make(map[string]int, len(r.order))
	for i, s := range r.order {
		idx[s] = i
		req.Streams[i] = events.StreamAppend{Stream: s, Expected: r.expected(s)}
	}
	for i, ne := range evs {
		pr, err := ne.Proposed(EventID(p.id, i))
		if err != nil {
			return Result{}, err
		}
		pr.Metadata, pr.CorrelationID, pr.CausationID, pr.Actor = p.meta, p.corr, p.id.String(), p.actor
		j, ok := idx[ne.Stream]
		if !ok {
			return Result{}, fmt.Errorf("decide %s: %s on %s: %w", p.name, ne.Type, ne.Stream, aggregates.ErrUnreadStream)
		}
		req.Streams[j].Events = append(req.Streams[j].Events, pr)
	}
	// A command refused before keeps its refusal, even if the state moved
	// since: its outcome was recorded.
	if _, err := h.log.EventByID(ctx, RefusalID(p.id)); err == nil {
		if res, perr, found := h.prior(ctx, p); found {
			return res, perr
		}
	} else if !errors.Is(err, events.ErrNotFound) {
		return Result{}, err
	}
	o, res, done, err := h.appendOutcome(ctx, p, req, "append %s: duplicate outcome without the original events")
	if done {
		return res, err
	}
	return h.result(p, OutcomeAppended, false, o.Events, at), nil
}

// appendOutcome appends req, the outcome of command p (its events, or its
// recorded refusal). done reports that the answer is (res, err): the append
// failed, or it was a duplicate, the command re-sent (decided earlier,
// perhaps with another time), whose original outcome res is. A duplicate
// without an original is corrupt; missing names it (a format with %s, the
// command's name).
func (h *Handler) appendOutcome(ctx context.Context, p *prepared, req events.AppendRequest, missing string) (o events.Outcome, res Result, done bool, err error) {
	o, err = h.log.Append(ctx, req)
	if err == nil {
		err = o.Err
	}
	switch {
	case events.CodeOf(err) == events.CodeDuplicateEventID || err == nil && o.Duplicate:
		if res, perr, found := h.prior(ctx, p); found {
			return o, res, true, perr
		}
		if err == nil {
			err = fmt.Errorf(missing+": %w", p.name, events.ErrCorrupt)
		}
		return o, Result{}, true, err
	case err != nil:
		return o, Result{}, true, err
	}
	return o, Result{}, false, nil
}
