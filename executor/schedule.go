package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Standing probe schedules (issue #16): the executor follows the
// schedules an operator approved for its host and asks the node for each
// due probe (RequestScheduledProbe). The node decides whether it is due
// and appends the probe's request, which the executor then claims and
// runs as any other (follow.go, measure.go). The executor's own clock
// only says when to ask; a node that disagrees answers probe_not_due with
// the time it expects, and the executor waits until then.

// scheduleRetry is how long the scheduler waits before following the
// schedules again after its subscription ended, and before asking again
// after a failure that said nothing about when the probe is due.
const scheduleRetry = time.Second

// scheduled is one schedule as the executor knows it.
type scheduled struct {
	active   bool
	host     string
	interval time.Duration
	// due is when the next probe may be asked for (node time, from the
	// events; moved forward by the executor's own requests and by
	// probe_not_due answers).
	due time.Time
}

// scheduleBook is the schedules of every provider, kept by the
// subscription and read by the loop. Safe for concurrent use.
type scheduleBook struct {
	mu sync.Mutex
	by map[string]*scheduled // provider -> schedule; guarded by mu
	// wake has room for one signal: a change while the loop sleeps wakes
	// it; more changes before it wakes need no more signals.
	wake chan struct{}
}

func (b *scheduleBook) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// apply folds one schedule event.
func (b *scheduleBook) apply(e events.Event) {
	provider := strings.TrimPrefix(e.Stream, aggregates.ProviderPrefix)
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.by[provider]
	if s == nil {
		s = &scheduled{}
		b.by[provider] = s
	}
	switch e.Type {
	case aggregates.TypeProbeScheduleApproved:
		var d aggregates.ProbeScheduleApproved
		if json.Unmarshal(e.Data, &d) != nil {
			return
		}
		s.active, s.host, s.interval = true, d.Host, d.Interval.Duration
		if s.due.Before(d.At) {
			s.due = d.At
		}
	case aggregates.TypeProbeScheduleEnded:
		s.active = false
	case aggregates.TypeScheduledProbeRequested:
		var d aggregates.ScheduledProbeRequested
		if json.Unmarshal(e.Data, &d) != nil {
			return
		}
		if next := d.At.Add(s.interval); s.due.Before(next) {
			s.due = next
		}
	}
}

// next returns the provider whose probe is due first on host, and when.
func (b *scheduleBook) next(host string) (string, time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var name string
	var due time.Time
	for p, s := range b.by {
		if s.active && s.host == host && (name == "" || s.due.Before(due) || s.due.Equal(due) && p < name) {
			name, due = p, s.due
		}
	}
	return name, due, name != ""
}

// postpone moves provider's next ask to at least t.
func (b *scheduleBook) postpone(provider string, t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.by[provider]; s != nil && s.due.Before(t) {
		s.due = t
	}
}

// schedule follows the schedules and asks for the due probes of this
// host until ctx ends. Both goroutines it starts have ended when it
// returns.
func (x *Executor) schedule(ctx context.Context) {
	book := &scheduleBook{by: map[string]*scheduled{}, wake: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		filter := events.Filter{StreamPrefix: aggregates.ProviderPrefix, Types: []string{
			aggregates.TypeProbeScheduleApproved, aggregates.TypeProbeScheduleEnded, aggregates.TypeScheduledProbeRequested}}
		// The schedules are few and their events small: following them
		// from position 0 on each start is simpler than a second resume
		// position, and never misses a schedule approved while the
		// executor was down.
		var from uint64
		for ctx.Err() == nil {
			err := x.cfg.Client.Subscribe(ctx, from, filter, func(e events.Event) error {
				book.apply(e)
				from = e.Position + 1
				book.signal()
				return nil
			})
			if ctx.Err() != nil {
				return
			}
			x.cfg.Logger.Warn("following the probe schedules", "err", err)
			if !sleep(ctx, scheduleRetry) {
				return
			}
		}
	}()
	x.askLoop(ctx, book)
	wg.Wait()
}

// askLoop sleeps until the first due probe, asks for it, and again.
func (x *Executor) askLoop(ctx context.Context, book *scheduleBook) {
	for {
		provider, due, ok := book.next(x.cfg.Host)
		var timer <-chan time.Time
		var t *time.Timer
		if ok {
			t = time.NewTimer(max(0, time.Until(due)))
			timer = t.C
		}
		fired := false
		select {
		case <-ctx.Done():
		case <-book.wake:
		case <-timer:
			fired = true
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		if !fired {
			continue
		}
		if x.revoked.Load() {
			return
		}
		x.askProbe(ctx, book, provider)
	}
}

// askProbe asks the node for provider's due probe.
func (x *Executor) askProbe(ctx context.Context, book *scheduleBook, provider string) {
	id := "probe-" + uuid.NewString()
	_, err := x.send(ctx, "RequestScheduledProbe", uuid.New(), aggregates.RequestScheduledProbe{
		Provider: aggregates.ID(provider), ExecutorID: aggregates.ID(x.cfg.ExecutorID), MeasurementID: aggregates.ID(id)})
	var ae *wire.Error
	switch {
	case err == nil:
		x.cfg.Logger.Info("scheduled probe requested", "provider", provider, "measurement_id", id)
		// The request's event moves the schedule on when it arrives; until
		// then the executor must not ask again for the same slot.
		book.postpone(provider, time.Now().Add(scheduleRetry))
	case ctx.Err() != nil:
	case errors.As(err, &ae) && ae.Code == aggregates.CodeProbeNotDue:
		next := time.Now().Add(scheduleRetry)
		if s, ok := ae.Details["next_due"].(string); ok {
			if t, perr := time.Parse(time.RFC3339Nano, s); perr == nil {
				next = t
			}
		}
		book.postpone(provider, next)
	default:
		// Refused for good (ended, another host, no key) or no answer: the
		// schedule's events will say if anything changes; ask again one
		// interval on at the earliest, never in a tight loop.
		x.cfg.Logger.Warn("scheduled probe not requested", "provider", provider, "err", err)
		book.postpone(provider, time.Now().Add(max(scheduleRetry, x.scheduleInterval(book, provider))))
	}
}

func (x *Executor) scheduleInterval(book *scheduleBook, provider string) time.Duration {
	book.mu.Lock()
	defer book.mu.Unlock()
	if s := book.by[provider]; s != nil {
		return s.interval
	}
	return 0
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
