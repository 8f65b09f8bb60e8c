package aggregates

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/greffe/greffe/events"
)

// NewEvent is an event a decider wants appended. The commands layer turns
// each into an events.Proposed (deterministic id derived from the command
// id and the event's index, the command's actor and correlation id) and
// appends all of a decision's events in one atomic request, with an exact
// expected version on every stream the command read.
type NewEvent struct {
	// Stream is the target stream; always one the command read.
	Stream string
	// Type is the event type, one of the Type… constants.
	Type string
	// Data is the event's data: a value of this package's data struct for
	// Type (encoded with encoding/json), or json.RawMessage whose bytes are
	// stored verbatim (a signed measurement, whose Envelope signs exactly
	// those bytes).
	Data any
	// Envelope, when set, is stored with the event and signs Data's bytes.
	Envelope *events.Envelope
}

// EncodeData returns the bytes to store as the event's data.
func (n NewEvent) EncodeData() (json.RawMessage, error) {
	switch d := n.Data.(type) {
	case json.RawMessage:
		return d, nil
	case []byte:
		return json.RawMessage(d), nil
	}
	b, err := json.Marshal(n.Data)
	if err != nil {
		return nil, fmt.Errorf("encode %s data: %w", n.Type, err)
	}
	return b, nil
}

// Proposed returns the event as an events.Proposed with the given id and
// envelope fields; the caller fills in metadata, correlation, causation and
// actor.
func (n NewEvent) Proposed(id uuid.UUID) (events.Proposed, error) {
	data, err := n.EncodeData()
	if err != nil {
		return events.Proposed{}, err
	}
	return events.Proposed{ID: id, Type: n.Type, Data: data, Envelope: n.Envelope}, nil
}

// EventRef names one stored event: what a readiness fact, a route or an
// admission cites as its proof, and what an auditor follows back.
type EventRef struct {
	// Stream is the event's stream.
	Stream string `json:"stream"`
	// Version is the event's index in its stream, from 0.
	Version uint64 `json:"version"`
	// Position is the event's index in the global log, from 0.
	Position uint64 `json:"position"`
	// ID is the event's UUID.
	ID uuid.UUID `json:"id"`
	// Type is the event's type.
	Type string `json:"type"`
}

// RefOf returns the reference of a stored event.
func RefOf(e *events.Event) EventRef {
	return EventRef{Stream: e.Stream, Version: e.Version, Position: e.Position, ID: e.ID, Type: e.Type}
}

// refPtr returns a pointer to a copy of r, or nil for the zero EventRef.
func refPtr(r EventRef) *EventRef {
	if r == (EventRef{}) {
		return nil
	}
	return &r
}

// State is the folded state of one stream: one of Provider, Binding,
// Approval, Mission, Measurement, Executor or Claim (values, not pointers).
type State interface {
	// Exists reports whether at least one event was folded.
	Exists() bool
}

// States maps a stream name to its folded state. A stream with no event is
// present with its aggregate's initial state.
type States map[string]State

// Provider returns the state of provider-<name>, or the initial state.
func (s States) Provider(name string) Provider { v, _ := s[ProviderStream(name)].(Provider); return v }

// Binding returns the state of binding-<id>, or the initial state.
func (s States) Binding(id string) Binding { v, _ := s[BindingStream(id)].(Binding); return v }

// Approval returns the state of approval-<id>, or the initial state.
func (s States) Approval(id string) Approval { v, _ := s[ApprovalStream(id)].(Approval); return v }

// Mission returns the state of mission-<id>, or the initial state.
func (s States) Mission(id string) Mission { v, _ := s[MissionStream(id)].(Mission); return v }

// Measurement returns the state of measurement-<id>, or the initial state.
func (s States) Measurement(id string) Measurement {
	v, _ := s[MeasurementStream(id)].(Measurement)
	return v
}

// Executor returns the state of executor-<id>, or the initial state.
func (s States) Executor(id string) Executor { v, _ := s[ExecutorStream(id)].(Executor); return v }

// Claim returns the state of claim-<id>, or the initial state.
func (s States) Claim(id string) Claim { v, _ := s[ClaimStream(id)].(Claim); return v }

// Inputs is everything a decision may look at. The commands layer builds it;
// nothing in it is read from a clock or the network by the decider.
type Inputs struct {
	// At is the node's time when it received the command. Deciders record
	// it in the events they emit; freshness windows and expiries are judged
	// against it. It must not be zero.
	At time.Time
	// Position is the log size (events.Head().Size) when the streams were
	// read. Decisions that carry their grounds (RouteDecided,
	// AdmissionDecided) record it, so an auditor can rebuild what was known.
	Position uint64
	// Policy is the node's policy (budgets, freshness windows, screens).
	Policy Policy
	// States holds the folded state of every stream the command named.
	States States
	// Principal is the command's authenticated sender (principal.go):
	// Decide refuses a role the catalogue does not let send the command,
	// and the gates compare it with what the command states (an approver,
	// an executor id). The zero Principal has no role and sends nothing;
	// a node without tokens passes Anonymous.
	Principal Principal
	// Evidence holds, for commands that implement EvidenceCommand, what each
	// referenced event resolved to (see ResolveEvidence). A reference absent
	// from the map is unresolved.
	Evidence map[uuid.UUID]Evidence
}

// Command is one command of the catalogue: a struct decoded from the
// command's JSON data. Its shape is its fields' types (values.go), which
// Validate checks, with a Validate method of its own for the rules between
// its fields, if it has any.
type Command interface {
	// CommandName returns the catalogue name, e.g. "GrantApproval".
	CommandName() string
	// Streams returns every stream Decide reads, given the states loaded so
	// far. The caller loads the streams it returns, then calls it again
	// with them, until it names no stream that is not loaded (at most a few
	// rounds: a route names its candidates' bindings once the candidates
	// are known). Every event Decide emits targets one of these streams.
	Streams(loaded States) []string
	// Decide applies the gates to the loaded states and returns the events
	// to append (none for an idempotent repeat) or a *Refusal.
	Decide(in Inputs) ([]NewEvent, error)
}

// EvidenceCommand is implemented by commands that cite events anywhere in
// the log by id (a claim's evidence). Once the streams are loaded, the
// caller reads each id EvidenceRefs returns with events.Reader.EventByID
// and passes ResolveEvidence's answer in Inputs.Evidence; an id not found
// is left out of the map. For a measurement, ResolveEvidence needs the keys
// of the executor EvidenceExecutor names.
type EvidenceCommand interface {
	Command
	EvidenceRefs(loaded States) []uuid.UUID
}

// ErrStreamNotLoaded is returned by Decide when the caller did not load a
// stream the command names: a bug in the caller, never a refusal.
var ErrStreamNotLoaded = errors.New("aggregates: stream not loaded")

// ErrUnreadStream is returned by Decide when a decider emits an event on a
// stream it did not name in Streams: a bug in this package, never a refusal.
var ErrUnreadStream = errors.New("aggregates: event on a stream the command did not read")

// maxStreamRounds bounds the Streams fixpoint: no command needs more than
// two dependent reads.
const maxStreamRounds = 4

// Decide checks that every stream cmd reads is loaded, that the
// principal's role may send it (role_not_allowed), runs its gates and
// checks that every event targets a stream it read. The gates refuse with
// a *Refusal; a caller bug (a stream not loaded) wraps ErrStreamNotLoaded.
//
// REQUIRES: cmd is valid: it came from DecodeCommand, or Validate(cmd)
// returned nil. Decide does not validate again: a command's shape is
// checked once, where it is decoded (ARCHITECTURE.md, "Decode once"), and
// before Streams names what to load from it.
func Decide(cmd Command, in Inputs) ([]NewEvent, error) {
	if in.At.IsZero() {
		return nil, fmt.Errorf("decide %s: Inputs.At is zero; the node must set the command's time", cmd.CommandName())
	}
	read := cmd.Streams(in.States)
	for _, s := range read {
		if _, ok := in.States[s]; !ok {
			return nil, fmt.Errorf("decide %s: %s: %w", cmd.CommandName(), s, ErrStreamNotLoaded)
		}
	}
	// Who may send it comes first: no gate tells a principal whose role
	// may not send a command anything about the state.
	if err := roleRefusal(in.Principal, cmd.CommandName()); err != nil {
		return nil, err
	}
	out, err := cmd.Decide(in)
	if err != nil {
		return nil, err
	}
	for _, e := range out {
		if !slices.Contains(read, e.Stream) {
			// A decider that writes where it did not read would let a race
			// slip between check and write: a programmer error.
			return nil, fmt.Errorf("decide %s: %s on %s: %w", cmd.CommandName(), e.Type, e.Stream, ErrUnreadStream)
		}
	}
	return out, nil
}

// LoadStates runs the Streams fixpoint: it calls load once for each stream
// cmd names, in the order named, and asks cmd again with the states loaded
// so far until it names nothing new, then returns the states. load returns
// the folded state of one stream: Folding's, or the commands layer's,
// which starts from a cached state and records the version it read. It is
// the one loading loop; its errors are load's, unwrapped.
func LoadStates(cmd Command, load func(stream string) (State, error)) (States, error) {
	states := States{}
	for range maxStreamRounds {
		added := false
		for _, s := range cmd.Streams(states) {
			if _, ok := states[s]; ok {
				continue
			}
			st, err := load(s)
			if err != nil {
				return nil, err
			}
			states[s] = st
			added = true
		}
		if !added {
			return states, nil
		}
	}
	return nil, fmt.Errorf("load streams of %s: still naming new streams after %d rounds", cmd.CommandName(), maxStreamRounds)
}

// Folding returns a load function for LoadStates that folds what read
// returns, a stream's stored events in version order (none for a stream
// without events), from the stream's initial state.
func Folding(read func(stream string) ([]events.Event, error)) func(stream string) (State, error) {
	return func(stream string) (State, error) {
		evs, err := read(stream)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", stream, err)
		}
		return Fold(stream, evs)
	}
}

// FoldError reports a stored event that a state cannot fold: a type foreign
// to its aggregate or data that does not decode. It means the stream was
// not written by these deciders; callers treat it as corruption.
type FoldError struct {
	Stream   string
	Position uint64
	Type     string
	Err      error
}

// Error says which stored event could not be folded and why.
func (e *FoldError) Error() string {
	return fmt.Sprintf("fold %s event %s at position %d: %v", e.Stream, e.Type, e.Position, e.Err)
}

// Unwrap returns the cause (ErrUnknownEventType or a decoding error).
func (e *FoldError) Unwrap() error { return e.Err }

// ErrUnknownEventType is wrapped by a FoldError for a type the aggregate
// does not know.
var ErrUnknownEventType = errors.New("unknown event type for this aggregate")

func foldError(e *events.Event, err error) error {
	return &FoldError{Stream: e.Stream, Position: e.Position, Type: e.Type, Err: err}
}

// decodeData decodes stored event data leniently (new optional fields added
// by later versions are ignored), wrapping failures in a FoldError.
func decodeData(e *events.Event, v any) error {
	if err := events.DecodeStored(e.Data, v); err != nil {
		return foldError(e, err)
	}
	return nil
}

// Initial returns the initial state of stream's aggregate, chosen by the
// stream's prefix.
func Initial(stream string) (State, error) {
	switch {
	case strings.HasPrefix(stream, ProviderPrefix):
		return Provider{}, nil
	case strings.HasPrefix(stream, BindingPrefix):
		return Binding{}, nil
	case strings.HasPrefix(stream, ApprovalPrefix):
		return Approval{}, nil
	case strings.HasPrefix(stream, MissionPrefix):
		return Mission{}, nil
	case strings.HasPrefix(stream, MeasurementPrefix):
		return Measurement{}, nil
	case strings.HasPrefix(stream, ClaimPrefix):
		return Claim{}, nil
	case strings.HasPrefix(stream, ExecutorPrefix):
		return Executor{}, nil
	}
	return nil, fmt.Errorf("stream %q belongs to no aggregate", stream)
}

// Evolve folds one event into s, dispatching on the state's type. It never
// modifies s: every aggregate's Evolve copies a map or slice before it
// changes it (and decodes event data into fresh values), so the returned
// state shares with s only what did not change, and s stays valid. The
// commands layer's state cache relies on this to hand one cached state to
// concurrent commands (TestEvolve_DoesNotMutate pins it). Holders of a
// state must not modify it either.
func Evolve(s State, e *events.Event) (State, error) {
	switch v := s.(type) {
	case Provider:
		return v.Evolve(e)
	case Binding:
		return v.Evolve(e)
	case Approval:
		return v.Evolve(e)
	case Mission:
		return v.Evolve(e)
	case Measurement:
		return v.Evolve(e)
	case Claim:
		return v.Evolve(e)
	case Executor:
		return v.Evolve(e)
	}
	return nil, fmt.Errorf("evolve: %T is not an aggregate state", s)
}

// Fold folds evs (one stream's events in version order) from the initial
// state of stream's aggregate.
func Fold(stream string, evs []events.Event) (State, error) {
	s, err := Initial(stream)
	if err != nil {
		return nil, err
	}
	for i := range evs {
		if evs[i].Stream != stream {
			return nil, fmt.Errorf("fold %s: event at position %d belongs to %s", stream, evs[i].Position, evs[i].Stream)
		}
		if s, err = Evolve(s, &evs[i]); err != nil {
			return nil, err
		}
	}
	return s, nil
}
