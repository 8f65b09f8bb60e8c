package commands

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/config"
)

// Log is what the handler needs from the ledger. *pebblelog.Store
// implements it, and so must a replicated log. Every method is called
// concurrently by concurrent commands.
type Log interface {
	// Append appends atomically (events.Appender): every condition holds and
	// every event is written, or nothing is. A *events.ConditionError or an
	// *events.Error means nothing was written; events.ErrOutcomeUnknown that
	// the append may have been written.
	Append(ctx context.Context, r events.AppendRequest) (events.Outcome, error)
	// ReadStream reads a stream's acknowledged events from o.From by version;
	// a stream without events returns events.ErrNotFound, a page past its
	// end no events and no error.
	ReadStream(ctx context.Context, stream string, o events.ReadOptions) ([]events.Event, error)
	// EventByID returns an acknowledged event, or events.ErrNotFound.
	EventByID(ctx context.Context, id uuid.UUID) (events.Event, error)
	// Head returns the acknowledged end of the log.
	Head() events.Head
}

// Stream and event type of recorded refusals.
const (
	// RefusalsStream holds one CommandRefused event per refused command.
	RefusalsStream = "refusals"
	// TypeCommandRefused is the type of a recorded refusal.
	TypeCommandRefused = "CommandRefused"
)

// Outcomes of a command that was not refused.
const (
	// OutcomeAppended: the decision's events were appended (or, for a
	// re-sent command, had been).
	OutcomeAppended = "appended"
	// OutcomeUnchanged: the decision appended nothing (an idempotent
	// repeat, such as a second delivery of the same candidate).
	OutcomeUnchanged = "unchanged"
)

// CommandRefused is the data of a TypeCommandRefused event: who tried what,
// and which gate refused it with what facts.
type CommandRefused struct {
	// Command is the refused command's name.
	Command string `json:"command"`
	// CommandID is the refused command's id.
	CommandID string `json:"command_id"`
	// CommandDigest is the digest of what was sent: "sha256:" and the hex
	// SHA-256 of the command's canonical JSON (RFC 8785).
	CommandDigest string `json:"command_digest"`
	// Code is the gate's refusal code (docs/GATES.md).
	Code string `json:"code"`
	// Message says what was refused and what to do, in words.
	Message string `json:"message"`
	// Details are the facts the gate judged, by name.
	Details map[string]any `json:"details,omitempty"`
	// Actor is the authenticated principal that sent the command.
	Actor string `json:"actor"`
	// OnBehalfOf is the actor the command named, when it differs from the
	// principal.
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
	// CorrelationID groups the command with others (the command id when none
	// was sent).
	CorrelationID string `json:"correlation_id"`
	// At is when the node refused it.
	At time.Time `json:"at"`
}

// Metadata is the metadata of every event a command appends.
type Metadata struct {
	Command       string `json:"command"`
	CommandID     string `json:"command_id"`
	CommandDigest string `json:"command_digest"`
	OnBehalfOf    string `json:"on_behalf_of,omitempty"`
}

// EventID returns the id of the i-th event a command appends: the UUIDv5 of
// "event/<i>" in the command id's namespace. A re-sent command therefore
// proposes the same ids, which the log recognises.
func EventID(command uuid.UUID, i int) uuid.UUID {
	return uuid.NewSHA1(command, []byte("event/"+strconv.Itoa(i)))
}

// RefusalID returns the id of a command's CommandRefused event.
func RefusalID(command uuid.UUID) uuid.UUID { return uuid.NewSHA1(command, []byte("refused")) }

// Request is one command as received.
type Request struct {
	// Command is the catalogue name, e.g. "GrantApproval".
	Command string
	// ID is the command's id, a UUID: its idempotency key.
	ID string
	// Principal is the authenticated caller: its name is the actor of every
	// event, and the deciders judge its role (who may send the command:
	// aggregates.MaySend) and its name (an approval's approver, an
	// executor's id). A node without tokens passes aggregates.Anonymous.
	// Required: a request without a principal's name is a caller bug.
	Principal aggregates.Principal
	// Actor is the actor the body names, if any. When it differs from the
	// principal it is recorded as on_behalf_of, never as the actor.
	Actor string
	// CorrelationID groups the command with others (the audit trail); the
	// command id when empty.
	CorrelationID string
	// At, when set, is the command's time; only a node whose clock can be
	// set (Config.SetClock) accepts it.
	At *time.Time
	// Data is the command's JSON data (absent or empty means {}).
	Data json.RawMessage
}

// Result is the outcome of a command that was not refused.
type Result struct {
	Command   string
	CommandID uuid.UUID
	// Outcome is OutcomeAppended or OutcomeUnchanged.
	Outcome string
	// Duplicate is true when the command had been applied before: Events
	// are the original events and nothing was written now.
	Duplicate bool
	// Events are the stored events, in position order.
	Events []events.Event
	// Position is the log size at which the outcome is visible: the last
	// event's position + 1, or the size the decision read when it appended
	// nothing. A read model at or past it includes the outcome.
	Position uint64
	// At is the command's time.
	At time.Time
	// Retries counts the reloads after a concurrent change.
	Retries int
}

// Config configures a Handler.
type Config struct {
	// Log is the ledger. Required.
	Log Log
	// Clock gives the time of a command. Default: the wall clock, in UTC.
	Clock func() time.Time
	// SetClock, when set, sets Clock: commands may then carry their own
	// time ("at"; clock.go). Nil: "at" is refused.
	SetClock func(time.Time)
	// Policy is the node's policy. Nil means aggregates.DefaultPolicy().
	Policy *aggregates.Policy
	// MaxRetries is how many times a command is reloaded and decided again
	// after a concurrent change to a stream it read. Default 5; negative
	// means none.
	MaxRetries int
	// CacheStreams bounds the folded states kept between commands, in
	// streams. Default 16,384; negative disables the cache. A cached state
	// is only a starting point: every command reads the events appended
	// since, so the cache never changes a decision.
	CacheStreams int
}

// Handler decides and appends commands. Safe for concurrent use.
type Handler struct {
	log        Log
	clock      func() time.Time
	setClock   func(time.Time)
	policy     aggregates.Policy
	maxRetries int
	cache      *stateCache

	mu sync.Mutex
	// inflight holds the ids of the commands being handled; a second
	// request with the same id waits for the first to finish, so that one
	// command id never gets both a refusal and a success from two
	// concurrent sends. Guarded by mu.
	inflight map[uuid.UUID]chan struct{}
}

// ErrInvalidConfig wraps configuration problems.
var ErrInvalidConfig = errors.New("commands: invalid config")

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = systemNow
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 5
	}
	if c.CacheStreams == 0 {
		c.CacheStreams = 16384
	}
}

// Validate reports every problem of c at once: the log is required, and a
// policy given must be valid.
func (c *Config) Validate() error {
	var p config.Problems
	if c.Log == nil {
		p.Addf("Log is required")
	}
	if c.Policy != nil {
		if err := c.Policy.Validate(); err != nil {
			p.Addf("%v", err)
		}
	}
	return p.Err(ErrInvalidConfig)
}

// New returns a handler.
func New(cfg Config) (*Handler, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{log: cfg.Log, clock: cfg.Clock, setClock: cfg.SetClock, policy: aggregates.DefaultPolicy(), maxRetries: max(cfg.MaxRetries, 0),
		inflight: make(map[uuid.UUID]chan struct{})}
	if cfg.Policy != nil {
		h.policy = *cfg.Policy
	}
	if cfg.CacheStreams > 0 {
		h.cache = newStateCache(cfg.CacheStreams)
	}
	return h, nil
}

// Policy returns the node's policy.
func (h *Handler) Policy() aggregates.Policy { return h.policy }

// Clock returns the node's clock.
func (h *Handler) Clock() func() time.Time { return h.clock }

// Settable reports whether commands may carry their own time (Config.SetClock).
func (h *Handler) Settable() bool { return h.setClock != nil }

// Handle decides a command and appends its events: decode it (prepare,
// decode.go), hold its id against concurrent sends of it (lockID,
// idempotency.go), fix its time, then load, decide and append, retrying on
// a concurrent change (decide, retry.go). The errors are listed in
// errors.go: a malformed command, a recorded *RefusedError,
// command_id_reused or concurrency_conflict, or the log's own
// (events.ErrOutcomeUnknown: re-send the same command).
func (h *Handler) Handle(ctx context.Context, req Request) (Result, error) {
	p, err := h.prepare(req)
	if err != nil {
		return Result{}, err
	}
	unlock, err := h.lockID(ctx, p.id)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	at, err := h.commandTime(req.At)
	if err != nil {
		return Result{}, err
	}
	return h.decide(ctx, p, at)
}

// commandTime is the time a command is decided and recorded at: its own
// "at" on a settable clock (which then follows it), or the clock's now.
//
// The command's time is its "at" itself, never the clock read back after
// setting it: Set and Now each take the clock's lock, so between them a
// concurrent command could set another time, and this one would decide
// and record at that time (TestHandler_ConcurrentCommandTimes).
func (h *Handler) commandTime(at *time.Time) (time.Time, error) {
	if at == nil {
		return h.clock().UTC(), nil
	}
	if h.setClock == nil {
		return time.Time{}, invalid(CodeCommandTimeNotAllowed, "at",
			"this node runs on the system clock and decides the time of every command; drop \"at\"")
	}
	t := at.UTC()
	h.setClock(t)
	return t, nil
}

func (h *Handler) result(p *prepared, outcome string, dup bool, evs []events.Event, at time.Time) Result {
	evs = slices.Clone(evs)
	slices.SortFunc(evs, func(a, b events.Event) int { return cmpU64(a.Position, b.Position) })
	res := Result{Command: p.name, CommandID: p.id, Outcome: outcome, Duplicate: dup, Events: evs, At: at}
	if n := len(evs); n > 0 {
		res.Position = evs[n-1].Position + 1
	}
	return res
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
