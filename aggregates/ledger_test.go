package aggregates

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/greffe/greffe/events"
)

// ledger is a test log: it does what the commands layer does (load the
// streams a command names, fold them, resolve evidence, decide, append),
// with positions, versions and ids fixed deterministically, and data stored
// as the JSON bytes Evolve later decodes.
type ledger struct {
	t      testing.TB
	at     time.Time
	policy Policy
	log    []events.Event
	// principal sends the commands: Anonymous (a node without tokens)
	// unless a step says otherwise (as).
	principal Principal
}

// t0 is the time every test history starts at.
var t0 = time.Date(2026, 9, 6, 10, 0, 0, 0, time.UTC)

func newLedger(t testing.TB) *ledger {
	return &ledger{t: t, at: t0, policy: DefaultPolicy(), principal: Anonymous}
}

var eventNamespace = uuid.MustParse("6ba7b811-9dad-11d1-80b4-00c04fd430c8")

func (l *ledger) read(stream string) ([]events.Event, error) {
	var out []events.Event
	for _, e := range l.log {
		if e.Stream == stream {
			out = append(out, e)
		}
	}
	return out, nil
}

func (l *ledger) byID(id uuid.UUID) (events.Event, bool) {
	for _, e := range l.log {
		if e.ID == id {
			return e, true
		}
	}
	return events.Event{}, false
}

// inputs loads everything cmd reads.
func (l *ledger) inputs(cmd Command) Inputs {
	l.t.Helper()
	states, err := LoadStates(cmd, Folding(l.read))
	if err != nil {
		l.t.Fatalf("load %s: %v", cmd.CommandName(), err)
	}
	in := Inputs{At: l.at, Position: uint64(len(l.log)), Policy: l.policy, States: states, Principal: l.principal}
	if ec, ok := cmd.(EvidenceCommand); ok {
		in.Evidence = map[uuid.UUID]Evidence{}
		for _, id := range ec.EvidenceRefs(states) {
			e, ok := l.byID(id)
			if !ok {
				continue
			}
			var keys events.KeyLookup
			if x, ok := EvidenceExecutor(&e); ok {
				st, err := Fold(ExecutorStream(x), must(l.read(ExecutorStream(x))))
				if err != nil {
					l.t.Fatal(err)
				}
				keys = st.(Executor).Lookup
			}
			in.Evidence[id] = ResolveEvidence(&e, keys)
		}
	}
	return in
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// decide runs cmd's gates without appending, after the shape checks that
// DecodeCommand runs where a command enters.
func (l *ledger) decide(cmd Command) ([]NewEvent, error) {
	l.t.Helper()
	if err := Validate(cmd); err != nil {
		return nil, withCommand(cmd.CommandName(), err)
	}
	return Decide(cmd, l.inputs(cmd))
}

// exec decides and appends what was decided.
func (l *ledger) exec(cmd Command) ([]NewEvent, error) {
	l.t.Helper()
	out, err := l.decide(cmd)
	if err != nil {
		return nil, err
	}
	l.append(out)
	return out, nil
}

// append stores evs as one atomic append.
func (l *ledger) append(evs []NewEvent) []events.Event {
	l.t.Helper()
	var stored []events.Event
	for _, n := range evs {
		data, err := n.EncodeData()
		if err != nil {
			l.t.Fatal(err)
		}
		version := uint64(0)
		for _, e := range l.log {
			if e.Stream == n.Stream {
				version++
			}
		}
		pos := uint64(len(l.log))
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], pos)
		e := events.Event{Position: pos, Stream: n.Stream, Version: version, ID: uuid.NewSHA1(eventNamespace, b[:]),
			Type: n.Type, Data: data, RecordedAt: l.at, Envelope: n.Envelope}
		l.log = append(l.log, e)
		stored = append(stored, e)
	}
	return stored
}

// step is one step of a given history: a Command (which must succeed), a
// NewEvent appended as is, an advance of the clock, or a policy change.
type step any

type advance time.Duration

type setPolicy func(*Policy)

// as makes p the principal of the commands that follow.
type as Principal

// ledgerStep is a step computed from the ledger as it stands when it is
// reached (a signed probe needs the provider's endpoint; a key is
// registered once).
type ledgerStep func(l *ledger) []step

func (l *ledger) given(steps ...step) {
	l.t.Helper()
	for i, s := range steps {
		switch v := s.(type) {
		case Command:
			if _, err := l.exec(v); err != nil {
				l.t.Fatalf("given step %d (%s): %v", i, v.CommandName(), err)
			}
		case NewEvent:
			l.append([]NewEvent{v})
		case []step:
			l.given(v...)
		case advance:
			l.at = l.at.Add(time.Duration(v))
		case setPolicy:
			v(&l.policy)
		case as:
			l.principal = Principal(v)
		case ledgerStep:
			l.given(v(l)...)
		default:
			l.t.Fatalf("given step %d: unknown step %T", i, s)
		}
	}
}

// state folds one stream.
func (l *ledger) state(stream string) State {
	l.t.Helper()
	st, err := Fold(stream, must(l.read(stream)))
	if err != nil {
		l.t.Fatal(err)
	}
	return st
}

// ref returns the reference of the event at position pos.
func (l *ledger) ref(pos int) EventRef { return RefOf(&l.log[pos]) }

// last returns the reference of the newest event of type typ.
func (l *ledger) last(typ string) EventRef {
	for i := len(l.log) - 1; i >= 0; i-- {
		if l.log[i].Type == typ {
			return RefOf(&l.log[i])
		}
	}
	l.t.Fatalf("no %s event", typ)
	return EventRef{}
}

// gwt is one given/when/then case: the given steps, the command, and
// either the expected events (want, nil for none) or the refusal code.
type gwt struct {
	name  string
	given []step
	when  Command
	want  []NewEvent
	// wantFn computes want from the ledger after the given steps, for
	// events that cite earlier events by reference.
	wantFn func(l *ledger) []NewEvent
	code   string
}

func runGWT(t *testing.T, cases []gwt) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.given(tc.given...)
			got, err := l.decide(tc.when)
			if tc.code != "" {
				assertCode(t, err, tc.code)
				if got != nil {
					t.Errorf("refused command returned events: %v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected refusal: %v", err)
			}
			want := tc.want
			if tc.wantFn != nil {
				want = tc.wantFn(l)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func assertCode(t *testing.T, err error, code string) {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("want refusal %s, got %v", code, err)
	}
	if r.Code != code {
		t.Fatalf("want refusal %s, got %s (%s)", code, r.Code, r.Message)
	}
	if events.CodeOf(err) != code {
		t.Fatalf("events.CodeOf = %q, want %q", events.CodeOf(err), code)
	}
}

// hexOf returns a deterministic hex SHA-256 for a name.
func hexOf(name string) string {
	s := sha256.Sum256([]byte(name))
	return hex.EncodeToString(s[:])
}

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// checkIDs returns "c01".."cNN".
func checkIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("c%02d", i+1)
	}
	return out
}
