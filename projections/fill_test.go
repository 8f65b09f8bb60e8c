package projections_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/fixtures"
)

func openStore(t testing.TB) *pebblelog.Store {
	t.Helper()
	s, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fill applies every fixture history to log through the commands layer
// (in process, each under its own policy) and returns the last command's
// time. Every history's outcomes are the ones its fixture expects; the
// fixtures tests check them, this only needs the events.
func fill(t testing.TB, log commands.Log) time.Time {
	t.Helper()
	all, err := fixtures.All()
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, h := range all {
		pol, err := h.Policy()
		if err != nil {
			t.Fatal(err)
		}
		clock := commands.NewManualClock(time.Unix(0, 0))
		hd, err := commands.New(commands.Config{Log: log, Clock: clock.Now, SetClock: clock.Set, Policy: &pol})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range h.Lines {
			if l.Command == "" {
				continue
			}
			_, err := hd.Handle(context.Background(), commands.Request{Command: l.Command, ID: l.ID, Principal: aggregates.Anonymous, Actor: l.Actor,
				CorrelationID: l.CorrelationID, At: l.At, Data: l.Data})
			// Refusals (recorded or not) and conflicts are part of the
			// histories; anything else is not.
			if c, ok := events.AsCoded(err); err != nil && (!ok || c.Kind != events.KindRefused && c.Code != commands.CodeConcurrencyConflict) {
				t.Fatalf("%s %s: %v", h.Name, l.Command, err)
			}
			last = *l.At
		}
	}
	return last
}

// policy is the node policy the histories share (the stagnation history
// allows two corrections).
func policy() aggregates.Policy {
	p := aggregates.DefaultPolicy()
	p.Budgets.Corrections = 2
	return p
}

// stutter is the real log, except that its subscriptions stop delivering
// after position stop and then wait for the end: a node stopped while its
// projections are catching up.
type stutter struct {
	*pebblelog.Store
	stop uint64
}

func (s stutter) Subscribe(ctx context.Context, from uint64, f events.Filter, fn func(events.Event) error) error {
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	err := s.Store.Subscribe(ctx2, from, f, func(e events.Event) error {
		if e.Position >= s.stop {
			cancel()
			return nil
		}
		return fn(e)
	})
	if ctx.Err() == nil && errors.Is(err, context.Canceled) {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}
