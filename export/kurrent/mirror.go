package kurrent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/export"
	"github.com/greffe/greffe/internal/config"
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
		c.MinBackoff = export.DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = export.DefaultMaxBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports every problem of c at once. New applies defaults first.
func (c *Config) Validate() error {
	var p config.Problems
	if c.MaxBatchEvents < 1 {
		p.Addf("MaxBatchEvents %d must be >= 1", c.MaxBatchEvents)
	}
	if c.MaxBatchBytes < 128<<10 {
		p.Addf("MaxBatchBytes %d must be >= %d", c.MaxBatchBytes, 128<<10)
	}
	p = append(p, c.loop().Problems()...)
	return p.Err(ErrInvalidConfig)
}

// loop is the run loop's part of c.
func (c *Config) loop() export.Config {
	return export.Config{From: c.From, Until: c.Until, MinBackoff: c.MinBackoff, MaxBackoff: c.MaxBackoff,
		Buffer: eventBuffer, Progress: c.Progress, Logger: c.Logger,
		Name: "mirror", PositionKey: "mirrored", Resumes: "the target's tail"}
}

// eventBuffer is how many events the subscription may read ahead of the
// appends: two batches, so that the next one is ready while one is in
// flight; beyond that the target's pace holds the subscription back.
const eventBuffer = 200

// tailPage is how many target events one resume read asks for.
const tailPage = 100

// Mirror copies a ledger into a KurrentDB: the run loop of package export
// with a sink that appends to the target and resumes from its $all tail.
// Mirrored may be read concurrently with Run.
type Mirror struct {
	cfg    Config
	src    Source
	target *esdb.Client
	loop   *export.Loop
}

// New validates cfg and returns a mirror of src into target. The caller
// owns target (and closes it after Run).
func New(cfg Config, src Source, target *esdb.Client) (*Mirror, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Mirror{cfg: cfg, src: src, target: target, loop: export.NewLoop(cfg.loop(), src)}, nil
}

// Mirrored returns the first position not known to be in the target: every
// event below it was appended there (or lies below Config.From).
func (m *Mirror) Mirrored() uint64 { return m.loop.Position() }

// Run copies until ctx ends (ctx.Err()), until Config.Until is reached
// (nil), or until a failure retrying cannot fix (a refusal, an *events.Error). Transient
// failures are retried with backoff, each time resuming from the target's
// tail.
func (m *Mirror) Run(ctx context.Context) error {
	return m.loop.Run(ctx, &sink{m: m, exact: m.cfg.From == 0})
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
				return 0, events.Errorf(CodeDiverged, events.KindRefused, nil,
					"event %s is in stream %q in the target but %q in the ledger", re.EventID, re.StreamID, src.Stream)
			}
			return max(m.cfg.From, src.Position+1), nil
		}
		rs.Close()
		if n < tailPage {
			return m.cfg.From, nil
		}
	}
}

// sink is the target's side of one Run: it appends runs of consecutive
// events of one stream, one append in flight at a time, so that the
// target's $all follows position order.
type sink struct {
	m *Mirror
	// exact appends with the exact expected revision (a mirror from
	// position 0: see the package doc).
	exact bool

	batch       []esdb.EventData
	first       events.Event // the batch's first event (its stream and version)
	last, bytes uint64       // the batch's last position; its data and metadata bytes
}

// Resume finds where the target stands (Mirror.Resume).
func (k *sink) Resume(ctx context.Context) (uint64, error) {
	k.batch = k.batch[:0]
	return k.m.Resume(ctx)
}

// Add adds ev to the batch while it is of the batch's stream and the batch
// stays within MaxBatchEvents and MaxBatchBytes.
func (k *sink) Add(ev *events.Event, _ uint64) (bool, error) {
	n := uint64(len(ev.Data) + len(ev.Metadata))
	if len(k.batch) > 0 && (ev.Stream != k.first.Stream || k.bytes+n > uint64(k.m.cfg.MaxBatchBytes) || len(k.batch) == k.m.cfg.MaxBatchEvents) {
		return false, nil
	}
	if len(k.batch) == 0 {
		k.first, k.bytes = *ev, 0
	}
	k.batch, k.bytes, k.last = append(k.batch, eventData(ev)), k.bytes+n, ev.Position
	return true, nil
}

// Write appends the batch to its stream, atomically.
func (k *sink) Write(ctx context.Context) error {
	batch, first := k.batch, k.first
	k.batch = nil
	if len(batch) == 0 {
		return nil
	}
	var expected esdb.ExpectedRevision = esdb.Any{}
	if k.exact {
		if first.Version == 0 {
			expected = esdb.NoStream{}
		} else {
			expected = esdb.Revision(first.Version - 1)
		}
	}
	if _, err := k.m.target.AppendToStream(ctx, first.Stream, esdb.AppendToStreamOptions{ExpectedRevision: expected}, batch...); err != nil {
		if isCode(err, esdb.ErrorCodeWrongExpectedVersion) {
			return events.Errorf(CodeDiverged, events.KindRefused, err,
				"stream %q in the target is not at version %d, where the ledger's event %d follows; another writer or ledger wrote there", first.Stream, first.Version, first.Position)
		}
		return k.m.targetError(fmt.Sprintf("append events %d to %d to %q", first.Position, k.last, first.Stream), err)
	}
	return nil
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

// targetError wraps a client error: a refusal (*events.Error) when retrying cannot help.
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
		return events.Errorf(CodeTargetRefused, events.KindRefused, err, "%s", op)
	}
	return fmt.Errorf("%s: %w", op, err)
}
