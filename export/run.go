package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/config"
)

// Sink is one target system, as the run loop drives it: it says where the
// target stands, builds a batch from the events offered to it, and writes
// the batch. The loop calls its methods from one goroutine at a time,
// never concurrently; a Sink needs no lock for its batch.
type Sink interface {
	// Resume reads the target and returns the first position of the
	// ledger it does not hold (0: none); the loop follows the log from
	// there, or from Config.From when that is further. It is called at the
	// start of every session: the first, and after every error. It
	// forgets the batch a failed session left.
	Resume(ctx context.Context) (uint64, error)
	// Add puts ev in the batch being built. start is the loop's position
	// when the batch began: every event below it is in the target. Add
	// reports false, and keeps nothing of ev, when ev does not fit: the
	// loop writes the batch and offers ev to the next one. It never
	// reports false to an empty batch. A refusal (an *events.Error of KindRefused) stops the run; any other
	// error ends the session. ev, and the slices it holds, are the sink's
	// to keep: the loop does not reuse them.
	Add(ev *events.Event, start uint64) (bool, error)
	// Write writes the batch and empties it, returning nil once the target
	// acknowledged every event of it. The batch may hold nothing (every
	// event offered was in the target already). ctx is the run's, not the
	// session's: a failing subscription does not cut a write short and
	// leave its outcome unknown.
	Write(ctx context.Context) error
}

// Defaults of Config.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// Config configures a Loop. Each exporter fills it from its own Config,
// whose fields of the same names document them for its system.
type Config struct {
	// From is the first position to export when the target holds nothing
	// of this ledger; a resume starts where the target stands, or at From
	// if that is further.
	From uint64
	// Until, when above 0, stops Run (with a nil error) once every event
	// below it is exported. 0: follow the log forever.
	Until uint64
	// MinBackoff and MaxBackoff bound the exponential wait after an error
	// retrying may fix. Zero: DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Buffer is how many events the subscription may read ahead of the
	// writes: beyond it the target's pace holds the subscription back
	// (backpressure), which costs the log's writers nothing. Required.
	Buffer int
	// Progress, when set, is called on Run's goroutine after each batch
	// the target acknowledged, with Position().
	Progress func(position uint64)
	// Logger receives retries and the failure that stopped the run, under
	// Name ("kafka export stopped"), with the position as PositionKey and
	// what a session resumes from as Resumes ("…; resuming from the
	// partition tails"). Default: discard.
	Logger                     *slog.Logger
	Name, PositionKey, Resumes string
}

func (c *Config) setDefaults() {
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Problems returns every problem of c's bounds, after defaults, each
// naming its field: the rules every exporter's Validate holds in common.
func (c Config) Problems() config.Problems {
	c.setDefaults()
	var p config.Problems
	if c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff {
		p.Addf("MinBackoff %s must be > 0 and <= MaxBackoff %s", c.MinBackoff, c.MaxBackoff)
	}
	if c.Until > 0 && c.Until < c.From {
		p.Addf("Until %d is below From %d", c.Until, c.From)
	}
	return p
}

// errUntilReached ends a session once Config.Until is exported.
var errUntilReached = errors.New("export: reached Until")

// Loop is the run loop every exporter shares: it follows the log from
// where the target stands, hands batches to a Sink, records the position
// the target acknowledged, backs off and resumes on errors retrying may
// fix, and stops on a refusal (an *events.Error of KindRefused), at Config.Until or when its context ends.
//
// It keeps no state of its own beyond counters: the target's own record
// (Sink.Resume) is where a run resumes, so a restart adds no duplicate.
// One batch is in flight at a time, which is what makes that record
// faithful. Position and Resyncs may be read concurrently with Run; Run
// itself runs once at a time.
type Loop struct {
	cfg     Config
	src     events.Subscriber
	pos     atomic.Uint64 // every event below it is in the target (or below From)
	resyncs atomic.Uint64
}

// NewLoop returns the loop of src after cfg's defaults. The caller
// validates cfg (Problems) first.
func NewLoop(cfg Config, src events.Subscriber) *Loop {
	cfg.setDefaults()
	l := &Loop{cfg: cfg, src: src}
	l.pos.Store(cfg.From)
	return l
}

// Position returns the first position not known to be in the target: the
// target acknowledged every event below it (or it lies below
// Config.From). Before the first resume it is Config.From.
func (l *Loop) Position() uint64 { return l.pos.Load() }

// Resyncs returns how many times the loop recovered from an error by
// resuming from the target.
func (l *Loop) Resyncs() uint64 { return l.resyncs.Load() }

// Run exports into s until ctx ends (returning ctx.Err()), until
// Config.Until is reached (returning nil), or until a failure retrying
// cannot fix (a refusal, an *events.Error of KindRefused, logged). Any other failure (the target down, a
// timeout, the log's subscription ending) is logged and retried with
// exponential backoff, each time resuming from the target; the backoff
// starts over once a session made progress.
func (l *Loop) Run(ctx context.Context, s Sink) error {
	backoff := l.cfg.MinBackoff
	for {
		before := l.pos.Load()
		err := l.session(ctx, s)
		switch {
		case errors.Is(err, errUntilReached):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if fatal(err) {
			l.cfg.Logger.Error(l.cfg.Name+" stopped", l.cfg.PositionKey, l.pos.Load(), "err", err)
			return err
		}
		if l.pos.Load() > before {
			backoff = l.cfg.MinBackoff
		}
		l.resyncs.Add(1)
		l.cfg.Logger.Warn(l.cfg.Name+" failed; resuming from "+l.cfg.Resumes, l.cfg.PositionKey, l.pos.Load(), "retry_in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, l.cfg.MaxBackoff)
	}
}

// session resumes from the target and exports until an error.
func (l *Loop) session(ctx context.Context, s Sink) error {
	from, err := s.Resume(ctx)
	if err != nil {
		return err
	}
	start := max(l.cfg.From, from)
	l.advance(start)
	if l.untilReached() {
		return errUntilReached
	}
	ch := make(chan events.Event, l.cfg.Buffer)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		err := l.src.Subscribe(gctx, start, events.Filter{}, func(ev events.Event) error {
			select {
			case ch <- ev:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		})
		if err == nil {
			err = errors.New("subscription ended")
		}
		return fmt.Errorf("read the log from %d: %w", start, err)
	})
	// Writes get ctx, not gctx: a failing subscription must not cut a
	// write short and leave its outcome unknown (kafka-go would finish it
	// in the background while the next session reads the target).
	g.Go(func() error { return l.writeLoop(gctx, ctx, s, ch) })
	return g.Wait()
}

// writeLoop batches the events the subscription reads and writes each
// batch once the previous one is acknowledged.
//
// A batch holds whatever events are ready, as many as the sink takes: a
// busy log gets full batches, a quiet one gets each event at once.
//
// ctx ends the loop; wctx bounds the writes.
func (l *Loop) writeLoop(ctx, wctx context.Context, s Sink, ch <-chan events.Event) error {
	var pending *events.Event // read but not yet batched: it did not fit
	for {
		var first events.Event
		if pending != nil {
			first, pending = *pending, nil
		} else {
			select {
			case first = <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		start := l.pos.Load()
		if _, err := s.Add(&first, start); err != nil { // an empty batch takes any event
			return err
		}
		last := first.Position
	fill:
		for {
			select {
			case ev := <-ch:
				ok, err := s.Add(&ev, start)
				if err != nil {
					return err
				}
				if !ok {
					pending = &ev
					break fill
				}
				last = ev.Position
			default:
				break fill
			}
		}
		if err := s.Write(wctx); err != nil {
			return err
		}
		l.advance(last + 1)
		if l.cfg.Progress != nil {
			l.cfg.Progress(l.pos.Load())
		}
		if l.untilReached() {
			return errUntilReached
		}
	}
}

// advance raises Position to v; it never goes back (a resume may start
// below what was already acknowledged).
func (l *Loop) advance(v uint64) {
	for {
		cur := l.pos.Load()
		if v <= cur || l.pos.CompareAndSwap(cur, v) {
			return
		}
	}
}

func (l *Loop) untilReached() bool {
	return l.cfg.Until > 0 && l.pos.Load() >= l.cfg.Until
}

// fatal reports whether err is a failure that retrying cannot fix: a
// refusal (an *events.Error of KindRefused, the one coded shape: the same
// request is refused again until it is changed), which a sink returns
// with its own code (kafka.CodeTopicNotFound, kurrent.CodeDiverged, …).
func fatal(err error) bool {
	var e *events.Error
	return errors.As(err, &e) && e.Kind == events.KindRefused
}
