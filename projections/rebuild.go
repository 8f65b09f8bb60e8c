package projections

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/greffe/greffe/events"
)

// Reader is what a rebuild needs from the log: pages of events in position
// order (events.Reader.ReadAll). A remote node's client can implement it.
type Reader interface {
	ReadAll(ctx context.Context, o events.ReadOptions) ([]events.Event, error)
}

// Target is one model to rebuild: the prefix [0, Upto) of the log.
type Target struct {
	Name string
	Upto uint64
}

// Snapshot is a model rebuilt in memory.
type Snapshot struct {
	Spec     Spec
	Model    Model
	Position uint64
}

// Render renders the snapshot for q (q.Time must be set for a timed
// model).
func (s *Snapshot) Render(q Query) ([]byte, error) { return render(s.Spec, s.Model, s.Position, q) }

// pageQueue bounds the pages read ahead of the slowest model: each page is
// up to events.MaxReadLimit events, so two keep the reader busy while the
// models fold without holding much of the log in memory.
const pageQueue = 2

// Rebuild folds the log from position 0 into fresh models, in memory: one
// reader feeds every model, each folding on its own goroutine (they share
// nothing), each stopping at its own Upto. It is what verify compares the
// live models with, and what an as-of render replays.
func Rebuild(ctx context.Context, src Reader, env Env, targets []Target) ([]*Snapshot, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]*Snapshot, len(targets))
	chans := make([]chan []events.Event, len(targets))
	errs := make([]error, len(targets)+1)
	var maxUpto uint64
	for i, t := range targets {
		spec, ok := SpecByName(t.Name)
		if !ok {
			return nil, &UnknownError{Name: t.Name}
		}
		out[i] = &Snapshot{Spec: spec, Model: spec.New(env)}
		chans[i] = make(chan []events.Event, pageQueue)
		maxUpto = max(maxUpto, t.Upto)
	}
	var wg sync.WaitGroup
	for i := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snap, upto := out[i], targets[i].Upto
			for page := range chans[i] {
				if errs[i] != nil {
					continue // drain
				}
				for j := range page {
					e := &page[j]
					if e.Position >= upto {
						break
					}
					if e.Position != snap.Position {
						errs[i] = fmt.Errorf("rebuild %s: event at position %d after %d events: %w", snap.Spec.Name, e.Position, snap.Position, events.ErrCorrupt)
						cancel()
						break
					}
					if err := snap.Model.Apply(e); err != nil {
						errs[i] = fmt.Errorf("rebuild %s: %w", snap.Spec.Name, err)
						cancel()
						break
					}
					snap.Position++
				}
			}
		}()
	}
	// The reader: one pass over the log, each page handed to every model
	// that still needs it.
	var from uint64
	for from < maxUpto && ctx.Err() == nil {
		page, err := src.ReadAll(ctx, events.ReadOptions{From: from, Limit: events.MaxReadLimit})
		if err != nil {
			errs[len(targets)] = fmt.Errorf("rebuild: read from %d: %w", from, err)
			break
		}
		if len(page) == 0 {
			errs[len(targets)] = fmt.Errorf("rebuild: the log ends at %d, before %d", from, maxUpto)
			break
		}
		for i, t := range targets {
			if t.Upto > from {
				select {
				case chans[i] <- page:
				case <-ctx.Done():
				}
			}
		}
		from += uint64(len(page))
	}
	for _, c := range chans {
		close(c)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, t := range targets {
		if out[i].Position != t.Upto {
			return nil, fmt.Errorf("rebuild %s: folded %d events, want %d", t.Name, out[i].Position, t.Upto)
		}
	}
	return out, nil
}

// PositionError is an as-of position above the log's head.
type PositionError struct {
	Position, Head uint64
}

// Error says where the log ends.
func (e *PositionError) Error() string {
	return fmt.Sprintf("position %d is beyond the log's head %d", e.Position, e.Head)
}

// CodedError describes the error: position_beyond_head, a refusal.
func (e *PositionError) CodedError() *events.Error {
	return &events.Error{Code: CodePositionBeyondHead, Kind: events.KindRefused, Message: e.Error(), Err: e}
}

// RenderAt renders projection name as of position upto (the log prefix
// [0, upto)), replayed in memory from src, judged at q.Time. A zero q.Time
// is the recorded time of the event at position upto (TimeAt): the
// auditor's question is "what did the matrix say then", so asking at the
// position a RouteDecided read its grounds at judges freshness at the time
// the route did, not at today's clock.
func (s *Set) RenderAt(ctx context.Context, name string, upto uint64, q Query) ([]byte, error) {
	if _, ok := SpecByName(name); !ok {
		return nil, &UnknownError{Name: name}
	}
	if head := s.cfg.Source.Head().Size; upto > head {
		return nil, &PositionError{Position: upto, Head: head}
	}
	if q.Time.IsZero() {
		t, err := s.TimeAt(ctx, upto)
		if err != nil {
			return nil, err
		}
		q.Time = t
	}
	snaps, err := Rebuild(ctx, s.cfg.Source, s.cfg.Env, []Target{{Name: name, Upto: upto}})
	if err != nil {
		return nil, err
	}
	return snaps[0].Render(q)
}

// TimeAt is the time an as-of render at position pos is judged at: the
// time recorded by the event at pos, the first one after the prefix
// [0, pos) (the data's "at", the decision's own time, when it has one, as
// every domain event does; otherwise its recorded_at), or the Set's clock
// when pos is the head (no event there yet: the prefix is the present).
func (s *Set) TimeAt(ctx context.Context, pos uint64) (time.Time, error) {
	if pos >= s.cfg.Source.Head().Size {
		return s.cfg.Clock(), nil
	}
	evs, err := s.cfg.Source.ReadAll(ctx, events.ReadOptions{From: pos, Limit: 1})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the event at %d: %w", pos, err)
	}
	if len(evs) == 0 || evs[0].Position != pos {
		return s.cfg.Clock(), nil
	}
	var d struct {
		At time.Time `json:"at"`
	}
	if events.DecodeStored(evs[0].Data, &d) == nil && !d.At.IsZero() {
		return d.At.UTC(), nil
	}
	return evs[0].RecordedAt.UTC(), nil
}
