package commands

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
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
	Command       string         `json:"command"`
	CommandID     string         `json:"command_id"`
	CommandDigest string         `json:"command_digest"`
	Code          string         `json:"code"`
	Message       string         `json:"message"`
	Details       map[string]any `json:"details,omitempty"`
	Actor         string         `json:"actor"`
	OnBehalfOf    string         `json:"on_behalf_of,omitempty"`
	CorrelationID string         `json:"correlation_id"`
	At            time.Time      `json:"at"`
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

// ExecutorCommands returns the commands an executor's token may send: it
// claims a request, renews its lease and reports the signed result; what a
// probe or a hash measured reaches the provider's and the binding's
// streams through the result itself (issue #6), never through a command
// the executor could word freely.
func ExecutorCommands() []string {
	return []string{"ClaimMeasurement", "RecordMeasurement", "RenewMeasurementLease"}
}

// Request is one command as received.
type Request struct {
	// Command is the catalogue name, e.g. "GrantApproval".
	Command string
	// ID is the command's id, a UUID: its idempotency key.
	ID string
	// Principal is the authenticated caller: the actor of every event.
	Principal string
	// Actor is the actor the body names, if any. When it differs from the
	// principal it is recorded as on_behalf_of, never as the actor.
	Actor string
	// CorrelationID groups the command with others (the audit trail); the
	// command id when empty.
	CorrelationID string
	// At, when set, is the command's time; only a node whose clock is a
	// SettableClock accepts it.
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
	// Clock gives the time of a command. Default SystemClock. A
	// SettableClock also lets commands carry their time (see SettableClock).
	Clock Clock
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
	clock      Clock
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

// New returns a handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Log == nil {
		return nil, fmt.Errorf("%w: Log is required", ErrInvalidConfig)
	}
	h := &Handler{log: cfg.Log, clock: cfg.Clock, policy: aggregates.DefaultPolicy(), maxRetries: cfg.MaxRetries,
		inflight: make(map[uuid.UUID]chan struct{})}
	if h.clock == nil {
		h.clock = SystemClock{}
	}
	if cfg.Policy != nil {
		if err := cfg.Policy.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		h.policy = *cfg.Policy
	}
	switch {
	case cfg.MaxRetries == 0:
		h.maxRetries = 5
	case cfg.MaxRetries < 0:
		h.maxRetries = 0
	}
	switch {
	case cfg.CacheStreams == 0:
		h.cache = newStateCache(16384)
	case cfg.CacheStreams > 0:
		h.cache = newStateCache(cfg.CacheStreams)
	}
	return h, nil
}

// Policy returns the node's policy.
func (h *Handler) Policy() aggregates.Policy { return h.policy }

// Clock returns the node's clock.
func (h *Handler) Clock() Clock { return h.clock }

// prepared is a validated command.
type prepared struct {
	name   string
	id     uuid.UUID
	cmd    aggregates.Command
	digest string
	actor  string
	behalf string
	corr   string
	meta   json.RawMessage
}

// Handle decides cmd and appends its events. Errors: *InvalidError (400),
// *RefusedError (422, recorded), *ConflictError (409), or a log error
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
	if req.At != nil {
		sc, ok := h.clock.(SettableClock)
		if !ok {
			return Result{}, &InvalidError{Code: CodeCommandTimeNotAllowed, Field: "at",
				Message: "this node runs on the system clock and decides the time of every command; drop \"at\""}
		}
		sc.Set(*req.At)
	}
	at := h.clock.Now().UTC()
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
	return Result{}, &ConflictError{Code: CodeConcurrencyConflict,
		Message: fmt.Sprintf("stream %s kept changing under the command through %d retries; nothing was written, re-send it", last.Stream, h.maxRetries),
		Details: map[string]any{"stream": last.Stream, "expected": last.Expected.String(), "actual": last.Actual, "retries": h.maxRetries}}
}

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

func (h *Handler) prepare(req Request) (*prepared, error) {
	if req.Command == "" {
		return nil, &InvalidError{Code: CodeUnknownCommand, Field: "command", Message: "name the command, e.g. \"GrantApproval\""}
	}
	id, err := uuid.Parse(req.ID)
	if err != nil || id == uuid.Nil {
		return nil, &InvalidError{Code: CodeInvalidCommandID, Field: "id",
			Message: fmt.Sprintf("the command id %q is not a UUID; every command carries a UUID, its idempotency key", req.ID)}
	}
	for _, f := range []struct{ name, v string }{{"actor", req.Actor}, {"correlation_id", req.CorrelationID}} {
		if !utf8.ValidString(f.v) {
			return nil, &InvalidError{Code: events.CodeInvalidUTF8, Field: f.name, Message: "is not UTF-8 text; send UTF-8"}
		}
		if !textOK(f.v) {
			return nil, &InvalidError{Code: CodeInvalidCommand, Field: f.name,
				Message: fmt.Sprintf("must be at most %d bytes of printable UTF-8", events.MaxTextFieldLen)}
		}
	}
	data := bytes.TrimSpace(req.Data)
	if len(data) == 0 || string(data) == "null" {
		data = []byte("{}")
	}
	cmd, err := aggregates.DecodeCommand(req.Command, data)
	if err != nil {
		var ue *aggregates.UnknownCommandError
		var ie *aggregates.InvalidCommandError
		switch {
		case errors.As(err, &ue):
			return nil, &InvalidError{Code: CodeUnknownCommand, Field: "command", Message: ue.Error(), Err: err}
		case errors.As(err, &ie):
			code := CodeInvalidCommand
			if ie.Code != "" {
				code = ie.Code
			}
			return nil, &InvalidError{Code: code, Field: ie.Path, Message: ie.Reason, Err: err}
		}
		return nil, &InvalidError{Code: CodeInvalidCommand, Field: "data", Message: err.Error(), Err: err}
	}
	p := &prepared{name: req.Command, id: id, cmd: cmd, actor: req.Principal, corr: req.CorrelationID}
	if p.corr == "" {
		p.corr = id.String()
	}
	if req.Actor != "" && req.Actor != req.Principal {
		p.behalf = req.Actor
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return nil, &InvalidError{Code: CodeInvalidCommand, Field: "data", Message: err.Error(), Err: err}
	}
	sum := sha256.New()
	sum.Write([]byte(p.name))
	sum.Write([]byte{0})
	sum.Write([]byte(p.corr))
	sum.Write([]byte{0})
	sum.Write(compact.Bytes())
	p.digest = "sha256:" + hex.EncodeToString(sum.Sum(nil))
	p.meta, err = json.Marshal(Metadata{Command: p.name, CommandID: id.String(), CommandDigest: p.digest, OnBehalfOf: p.behalf})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func textOK(s string) bool {
	if len(s) > events.MaxTextFieldLen || !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}

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

// maxStreamRounds bounds the Streams fixpoint (aggregates needs two).
const maxStreamRounds = 4

func (h *Handler) load(ctx context.Context, cmd aggregates.Command) (*reads, error) {
	r := &reads{states: aggregates.States{}, versions: map[string]int64{}}
	for range maxStreamRounds {
		added := false
		for _, s := range cmd.Streams(r.states) {
			if _, ok := r.states[s]; ok {
				continue
			}
			st, v, err := h.loadStream(ctx, s)
			if err != nil {
				return nil, err
			}
			r.states[s] = st
			r.versions[s] = v
			r.order = append(r.order, s)
			added = true
		}
		if !added {
			return r, nil
		}
	}
	return nil, fmt.Errorf("load streams of %s: still naming new streams after %d rounds", cmd.CommandName(), maxStreamRounds)
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

// attempt loads, decides and appends once. A *events.ConditionError means
// a stream read changed: the caller retries.
func (h *Handler) attempt(ctx context.Context, p *prepared, at time.Time) (Result, error) {
	r, err := h.load(ctx, p.cmd)
	if err != nil {
		return Result{}, err
	}
	in := aggregates.Inputs{At: at, Position: h.log.Head().Size, Policy: h.policy, States: r.states}
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
	o, err := h.log.Append(ctx, req)
	if err == nil {
		err = o.Err
	}
	switch {
	case events.CodeOf(err) == events.CodeDuplicateEventID || err == nil && o.Duplicate:
		// Re-sent: the log holds this command's events (decided earlier,
		// perhaps with another time). Answer the original outcome.
		if res, perr, found := h.prior(ctx, p); found {
			return res, perr
		}
		if err == nil {
			err = fmt.Errorf("append %s: duplicate outcome without the original events: %w", p.name, events.ErrCorrupt)
		}
		return Result{}, err
	case err != nil:
		return Result{}, err
	}
	return h.result(p, OutcomeAppended, false, o.Events, at), nil
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

// maxRefusalDetails bounds the encoded details of a recorded refusal; a
// larger set is replaced by a note (the refusal's code and sentence stay).
const maxRefusalDetails = 64 << 10

// refuse records a gate's refusal, pinned to the streams it was based on.
func (h *Handler) refuse(ctx context.Context, p *prepared, r *reads, ref *aggregates.Refusal, at time.Time) (Result, error) {
	if res, err, found := h.prior(ctx, p); found {
		return res, err
	}
	rec := CommandRefused{Command: p.name, CommandID: p.id.String(), CommandDigest: p.digest, Code: ref.Code, Message: ref.Message,
		Details: ref.Details, Actor: p.actor, OnBehalfOf: p.behalf, CorrelationID: p.corr, At: at}
	data, err := json.Marshal(rec)
	if err != nil || len(data) > maxRefusalDetails {
		rec.Details = map[string]any{"details_omitted": "the gate's details did not fit the recorded refusal"}
		if data, err = json.Marshal(rec); err != nil {
			return Result{}, fmt.Errorf("encode refusal: %w", err)
		}
	}
	req := events.AppendRequest{Streams: make([]events.StreamAppend, 0, len(r.order)+1)}
	for _, s := range r.order {
		req.Streams = append(req.Streams, events.StreamAppend{Stream: s, Expected: r.expected(s)})
	}
	req.Streams = append(req.Streams, events.StreamAppend{Stream: RefusalsStream, Expected: events.ExpectAny, Events: []events.Proposed{{
		ID: RefusalID(p.id), Type: TypeCommandRefused, Data: data, Metadata: p.meta,
		CorrelationID: p.corr, CausationID: p.id.String(), Actor: p.actor,
	}}})
	o, err := h.log.Append(ctx, req)
	if err == nil {
		err = o.Err
	}
	switch {
	case events.CodeOf(err) == events.CodeDuplicateEventID || err == nil && o.Duplicate:
		if res, perr, found := h.prior(ctx, p); found {
			return res, perr
		}
		if err == nil {
			err = fmt.Errorf("record refusal of %s: duplicate without the original: %w", p.name, events.ErrCorrupt)
		}
		return Result{}, err
	case err != nil:
		return Result{}, err
	}
	return Result{}, refusedFrom(o.Events[0], false)
}

// refusedFrom reads a recorded refusal back from its event.
func refusedFrom(e events.Event, dup bool) error {
	var d CommandRefused
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return fmt.Errorf("refusal at position %d: %w: %v", e.Position, events.ErrCorrupt, err)
	}
	return &RefusedError{Refusal: aggregates.Refusal{Code: d.Code, Message: d.Message, Details: d.Details}, Event: e, Duplicate: dup}
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
	if err := json.Unmarshal(meta, &m); err != nil || m.CommandDigest != p.digest {
		return p.reused(pos, m.Command)
	}
	return nil
}

func (p *prepared) reused(pos uint64, command string) error {
	return &ConflictError{Code: CodeCommandIDReused,
		Message: fmt.Sprintf("command id %s was already used at position %d by a command with another name, data or correlation id; use a new id for a new command", p.id, pos),
		Details: map[string]any{"command_id": p.id.String(), "position": pos, "command": command}}
}
