package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// Loading what a command reads: its streams, folded from the handler's
// cache, and the events its evidence cites.

// reads is what one attempt loaded: the folded states of the streams the
// command named, and the version of every stream read (those and the
// executor streams that verified evidence), in the order first read.
type reads struct {
	states   aggregates.States
	order    []string
	versions map[string]int64
}

// expected returns the exact condition for a stream read at version v.
func (r *reads) expected(stream string) events.Expected {
	v := r.versions[stream]
	if v < 0 {
		return events.ExpectNoStream
	}
	return events.ExpectVersion(uint64(v))
}

// load loads every stream cmd reads, with aggregates.LoadStates (the one
// loading loop), recording the version of each stream read, in order.
func (h *Handler) load(ctx context.Context, cmd aggregates.Command) (*reads, error) {
	r := &reads{versions: map[string]int64{}}
	states, err := aggregates.LoadStates(cmd, func(stream string) (aggregates.State, error) {
		st, v, err := h.loadStream(ctx, stream)
		if err != nil {
			return nil, err
		}
		r.versions[stream] = v
		r.order = append(r.order, stream)
		return st, nil
	})
	if err != nil {
		return nil, err
	}
	r.states = states
	return r, nil
}

// loadStream folds a stream from its cached state (or its initial one),
// reading every event appended since. It returns the state and the
// stream's version (-1 for a stream without events).
func (h *Handler) loadStream(ctx context.Context, stream string) (aggregates.State, int64, error) {
	st, v, ok := h.cache.get(stream)
	if !ok {
		init, err := aggregates.Initial(stream)
		if err != nil {
			return nil, 0, err
		}
		st, v = init, -1
	}
	for {
		evs, err := h.log.ReadStream(ctx, stream, events.ReadOptions{From: uint64(v + 1), Limit: events.MaxReadLimit})
		if errors.Is(err, events.ErrNotFound) && v < 0 {
			return st, -1, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", stream, err)
		}
		for i := range evs {
			if int64(evs[i].Version) != v+1 {
				return nil, 0, fmt.Errorf("read %s: version %d after %d: %w", stream, evs[i].Version, v, events.ErrCorrupt)
			}
			if st, err = aggregates.Evolve(st, &evs[i]); err != nil {
				return nil, 0, fmt.Errorf("%w: %w", events.ErrCorrupt, err)
			}
			v++
		}
		if len(evs) < events.MaxReadLimit {
			break
		}
	}
	h.cache.put(stream, st, v)
	return st, v, nil
}

// evidence resolves a claim's evidence references. The executor streams
// whose keys verify a measurement are read too, and pinned by the append.
func (h *Handler) evidence(ctx context.Context, ec aggregates.EvidenceCommand, r *reads) (map[uuid.UUID]aggregates.Evidence, error) {
	out := map[uuid.UUID]aggregates.Evidence{}
	for _, id := range ec.EvidenceRefs(r.states) {
		e, err := h.log.EventByID(ctx, id)
		if errors.Is(err, events.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("evidence %s: %w", id, err)
		}
		var keys events.KeyLookup
		if x, ok := aggregates.EvidenceExecutor(&e); ok && events.ValidateStreamName("", aggregates.ExecutorStream(x)) == nil {
			s := aggregates.ExecutorStream(x)
			st, v, err := h.loadStream(ctx, s)
			if err != nil {
				return nil, err
			}
			if _, seen := r.versions[s]; !seen {
				r.versions[s] = v
				r.order = append(r.order, s)
			}
			if ex, ok := st.(aggregates.Executor); ok {
				keys = ex.Lookup
			}
		}
		out[id] = aggregates.ResolveEvidence(&e, keys)
	}
	return out, nil
}
