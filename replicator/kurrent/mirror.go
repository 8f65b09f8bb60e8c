package kurrent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/fatal"
)

// Error codes of the mirror. Never renamed, never reused.
const (
	// CodeDiverged: the target holds, where the mirror would write, an
	// event that is not the source's (another writer, or a mirror of
	// another ledger); or an event of ours sits in another stream.
	CodeDiverged = "mirror_diverged"
	// CodeTargetRefused: the target refused an append or a read for good
	// (access denied, a rule of its own such as greffe's read-only domain
	// streams, an unsupported call, or a client that gave up connecting).
	CodeTargetRefused = "mirror_target_refused"
)

// Error is a mirror failure that retrying cannot fix. Run stops with it.
type Error = fatal.Error

// Source is the ledger being mirrored: a subscription to copy from, and a
// lookup by id to find where a previous run stopped. *pebblelog.Store
// implements it; so does an HTTP client with a small adapter.
type Source interface {
	events.Subscriber
	// EventByID returns the event with id, or an error wrapping
	// events.ErrNotFound.
	EventByID(ctx context.Context, id uuid.UUID) (events.Event, error)
}

// Config configures a Mirror. Zero values mean defaults.
type Config struct {
	// From is the first position to copy when the target holds nothing of
	// this ledger; a resume starts after the target's tail, or at From if
	// that is further. Default 0, which also selects exact expected
	// revisions (see the package doc). A mirror started with From > 0
	// must keep a From > 0 when it is resumed.
	From uint64
	// Until, when above 0, stops Run (with a nil error) once every event
	// below it is copied. Default 0: follow the log forever.
	Until uint64
	// MaxBatchEvents bounds the events of one append (consecutive events of
	// one stream). Default 100.
	MaxBatchEvents int
	// MaxBatchBytes bounds the data and metadata bytes of one append; it
	// must stay below the target's maximum append size (KurrentDB's
	// default is 1 MiB). Default 512 KiB; at least 128 KiB, so the largest
	// event (64 KiB encoded) fits.
	MaxBatchBytes int
	// MinBackoff and MaxBackoff bound the exponential wait after a
	// transient error. Defaults 100 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// Progress, when set, is called on Run's goroutine after each append
	// the target acknowledged, with Mirrored().
	Progress func(mirrored uint64)
	// Logger receives retries and errors. Default: discard.
	Logger *slog.Logger
}

// ErrInvalidConfig wraps every configuration problem.
var ErrInvalidConfig = errors.New("kurrent: invalid config")

func (c *Config) setDefaults() {
	if c.MaxBatchEvents == 0 {
		c.MaxBatchEvents = 100
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = 512 << 10
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports every problem of c at once. New applies defaults first.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxBatchEvents < 1 {
		errs = append(errs, fmt.Errorf("MaxBatchEvents %d must be >= 1", c.MaxBatchEvents))
	}
	if c.MaxBatchBytes < 128<<10 {
		errs = append(errs, fmt.Errorf("MaxBatchBytes %d must be >= %d", c.MaxBatchBytes, 128<<10))
	}
	if c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff {
		errs = append(errs, fmt.Errorf("MinBackoff %s must be > 0 and <= MaxBackoff %s", c.MinBackoff, c.MaxBackoff))
	}
	if c.Until > 0 && c.Until < c.From {
		errs = append(errs, fmt.Errorf("Until %d is below From %d", c.Until, c.From))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

// eventBuffer is how many events the subscription may read ahead of the
// appends: two batches, so that the next one is ready while one is in
// flight; beyond that the target's pace holds the subscription back.
const eventBuffer = 200

// tailPage is how many target events one resume read asks for.
const tailPage = 100

// errUntilReached ends a session once Config.Until is copied.
var errUntilReached = errors.New("kurrent: mirror reached Until")

// Mirror copies a ledger into a KurrentDB. Mirrored may be read concurrently
// with Run.
type Mirror struct {
	cfg      Config
	src      Source
	target   *esdb.Client
	mirrored atomic.Uint64
}

// New validates cfg and returns a mirror of src into target. The caller
// owns target (and closes it after Run).
func New(cfg Config, src Source, target *esdb.Client) (*Mirror, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Mirror{cfg: cfg, src: src, target: target}
	m.mirrored.Store(cfg.From)
	return m, nil
}

// Mirrored returns the first position not known to be in the target: every
// event below it was appended there (or lies below Config.From).
func (m *Mirror) Mirrored() uint64 { return m.mirrored.Load() }

// Run copies until ctx ends (ctx.Err()), until Config.Until is reached
// (nil), or until a failure retrying cannot fix (an *Error). Transient
// failures are retried with backoff, each time resuming from the target's
// tail.
func (m *Mirror) Run(ctx context.Context) error {
	backoff := m.cfg.MinBackoff
	for {
		before := m.mirrored.Load()
		err := m.session(ctx)
		switch {
		case errors.Is(err, errUntilReached):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		var fatal *Error
		if errors.As(err, &fatal) {
			m.cfg.Logger.Error("mirror stopped", "mirrored", m.mirrored.Load(), "err", err)
			return err
		}
		if m.mirrored.Load() > before {
			backoff = m.cfg.MinBackoff
		}
		m.cfg.Logger.Warn("mirror failed; resuming from the target's tail", "mirrored", m.mirrored.Load(), "retry_in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, m.cfg.MaxBackoff)
	}
}

// Resume returns the position a run would start from: just after the last
// event of this ledger in the target's $all, or Config.From if that is
// further (or if the target holds nothing of ours).
func (m *Mirror) Resume(ctx context.Context) (uint64, error) {
	var from esdb.AllPosition = esdb.End{}
	for {
		rs, err := m.target.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: from}, tailPage)
		if err != nil {
			return 0, m.targetError("read the target's $all", err)
		}
		n := 0
		for {
			ev, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rs.Close()
				return 0, m.targetError("read the target's $all", err)
			}
			n++
			re := ev.OriginalEvent()
			from = re.Position
			if strings.HasPrefix(re.StreamID, "$") {
				continue // KurrentDB's own streams
			}
			src, err := m.src.EventByID(ctx, re.EventID)
			if errors.Is(err, events.ErrNotFound) {
				continue // written by someone else
			}
			if err != nil {
				rs.Close()
				return 0, fmt.Errorf("look up %s in the source: %w", re.EventID, err)
			}
			rs.Close()
			if src.Stream != re.StreamID {
				return 0, &Error{Code: CodeDiverged, Message: fmt.Sprintf(
					"event %s is in stream %q in the target but %q in the ledger", re.EventID, re.StreamID, src.Stream)}
			}
			return max(m.cfg.From, src.Position+1), nil
		}
		rs.Close()
		if n < tailPage {
			return m.cfg.From, nil
		}
	}
}

// session resumes and copies until an error.
func (m *Mirror) session(ctx context.Context) error {
	start, err := m.Resume(ctx)
	if err != nil {
		return err
	}
	m.advance(start)
	if m.untilReached() {
		return errUntilReached
	}
	ch := make(chan events.Event, eventBuffer)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		err := m.src.Subscribe(gctx, start, events.Filter{}, func(ev events.Event) error {
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
		return fmt.Errorf("read the ledger from %d: %w", start, err)
	})
	// Appends get ctx, not gctx: a failing subscription must not cut an
	// append short and leave its outcome unknown.
	g.Go(func() error { return m.appendLoop(gctx, ctx, ch) })
	return g.Wait()
}

// appendLoop appends runs of consecutive events of one stream, one append
// in flight at a time, so that the target's $all follows position order.
// ctx ends the loop; actx bounds the appends.
func (m *Mirror) appendLoop(ctx, actx context.Context, ch <-chan events.Event) error {
	exact := m.cfg.From == 0
	var pending *events.Event
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
		batch := []esdb.EventData{eventData(&first)}
		size, last := len(first.Data)+len(first.Metadata), first.Position
	fill:
		for len(batch) < m.cfg.MaxBatchEvents {
			select {
			case ev := <-ch:
				n := len(ev.Data) + len(ev.Metadata)
				if ev.Stream != first.Stream || size+n > m.cfg.MaxBatchBytes {
					pending = &ev
					break fill
				}
				batch, size, last = append(batch, eventData(&ev)), size+n, ev.Position
			default:
				break fill
			}
		}
		var expected esdb.ExpectedRevision = esdb.Any{}
		if exact {
			if first.Version == 0 {
				expected = esdb.NoStream{}
			} else {
				expected = esdb.Revision(first.Version - 1)
			}
		}
		if _, err := m.target.AppendToStream(actx, first.Stream, esdb.AppendToStreamOptions{ExpectedRevision: expected}, batch...); err != nil {
			if isCode(err, esdb.ErrorCodeWrongExpectedVersion) {
				return &Error{Code: CodeDiverged, Err: err, Message: fmt.Sprintf(
					"stream %q in the target is not at version %d, where the ledger's event %d follows; another writer or ledger wrote there", first.Stream, first.Version, first.Position)}
			}
			return m.targetError(fmt.Sprintf("append events %d to %d to %q", first.Position, last, first.Stream), err)
		}
		m.advance(last + 1)
		if m.cfg.Progress != nil {
			m.cfg.Progress(m.mirrored.Load())
		}
		if m.untilReached() {
			return errUntilReached
		}
	}
}

// eventData converts a ledger event for the target: same id (the
// idempotency key on both sides), type, data and metadata bytes.
func eventData(e *events.Event) esdb.EventData {
	return esdb.EventData{EventID: e.ID, EventType: e.Type, ContentType: esdb.ContentTypeJson, Data: e.Data, Metadata: e.Metadata}
}

func isCode(err error, code esdb.ErrorCode) bool {
	var e *esdb.Error
	return errors.As(err, &e) && e.Code() == code
}

// targetError wraps a client error: an *Error when retrying cannot help.
func (m *Mirror) targetError(op string, err error) error {
	permanent := false
	var e *esdb.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case esdb.ErrorCodeAccessDenied, esdb.ErrorCodeUnauthenticated, esdb.ErrorCodeUnsupportedFeature,
			esdb.ErrorCodeStreamDeleted, esdb.ErrorCodeResourceAlreadyExists,
			// The client closes itself for good once discovery fails.
			esdb.ErrorCodeConnectionClosed:
			permanent = true
		}
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		switch se.GRPCStatus().Code() {
		case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented,
			codes.FailedPrecondition, codes.ResourceExhausted, codes.AlreadyExists, codes.OutOfRange:
			permanent = true
		}
	}
	if permanent {
		return &Error{Code: CodeTargetRefused, Message: op, Err: err}
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (m *Mirror) advance(v uint64) {
	for {
		cur := m.mirrored.Load()
		if v <= cur || m.mirrored.CompareAndSwap(cur, v) {
			return
		}
	}
}

func (m *Mirror) untilReached() bool {
	return m.cfg.Until > 0 && m.mirrored.Load() >= m.cfg.Until
}
