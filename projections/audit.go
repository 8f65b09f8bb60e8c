package projections

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// The audit trail: every event that carries a correlation id, grouped by
// it, in log order: a command's events, its refusals (with the refusal
// code) and everything else sharing the id, so an auditor follows a
// decision from the first command to the last event. Events appended
// without a correlation id are not part of any trail.
//
// This model keeps one entry per correlated event (about 1,000,000 entries
// for a million commands), so entries are small: strings that repeat
// (streams, types, actors) are shared, and each entry is stored under its
// own key so a flush writes only the new ones.

// AuditEntry is one event of a trail.
type AuditEntry struct {
	Position    uint64    `json:"position"`
	Stream      string    `json:"stream"`
	Version     uint64    `json:"version"`
	Type        string    `json:"type"`
	ID          uuid.UUID `json:"id"`
	Actor       string    `json:"actor,omitempty"`
	CausationID string    `json:"causation_id,omitempty"`
	// RefusalCode is the gate's code of a CommandRefused event.
	RefusalCode string `json:"refusal_code,omitempty"`
}

// entry is an AuditEntry as held in memory: 72 bytes, its repeated
// strings as indexes into audit.strs (a command id is a UUID, kept as
// one).
type entry struct {
	position, version uint64
	id, causation     uuid.UUID
	// stream, typ, actor and code index audit.strs; causationStr does too
	// when the causation id is not a UUID (0 is "").
	stream, typ, actor, code, causationStr uint32
}

type trail struct {
	corr    string
	entries []entry
	flushed int  // entries[:flushed] are stored
	dirty   bool // listed in audit.dirty
}

type audit struct {
	trails map[string]*trail
	dirty  []*trail // trails with entries not stored yet
	strs   []string
	index  map[string]uint32
	// lastStream is the index of the previous event's stream.
	lastStream uint32
	// last is the trail of the previous event: a command's events arrive
	// together, so most events repeat it.
	last *trail
}

func newAudit(Env) Model {
	return &audit{trails: map[string]*trail{}, strs: []string{""}, index: map[string]uint32{"": 0}}
}

// refusalsStream and typeRefused are the commands package's recorded
// refusals (projections must not import commands).
const (
	refusalsStream = "refusals"
	typeRefused    = "CommandRefused"
)

var refusalKeys = []string{"code"}

// intern returns the index of s in m.strs, adding a copy of it.
func (m *audit) intern(s string) uint32 {
	if i, ok := m.index[s]; ok {
		return i
	}
	c := strings.Clone(s)
	i := uint32(len(m.strs))
	m.strs = append(m.strs, c)
	m.index[c] = i
	return i
}

func (m *audit) entryOf(en AuditEntry) entry {
	x := entry{position: en.Position, version: en.Version, id: en.ID, stream: m.intern(en.Stream), typ: m.intern(en.Type),
		actor: m.intern(en.Actor), code: m.intern(en.RefusalCode)}
	m.setCausation(&x, en.CausationID)
	return x
}

func (m *audit) setCausation(x *entry, c string) {
	if c == "" {
		return
	}
	if u, ok := canonicalUUID(c); ok {
		x.causation = u
		return
	}
	x.causationStr = m.intern(c)
}

// canonicalUUID parses the lowercase 8-4-4-4-12 form only (the one
// String writes back), without allocating.
func canonicalUUID(s string) (uuid.UUID, bool) {
	var u uuid.UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	j := 0
	for i := 0; i < 36; {
		if s[i] == '-' {
			i++
			continue
		}
		hi, ok1 := nibble(s[i])
		lo, ok2 := nibble(s[i+1])
		if !ok1 || !ok2 {
			return uuid.UUID{}, false
		}
		u[j] = hi<<4 | lo
		j++
		i += 2
	}
	return u, true
}

func nibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func (m *audit) public(x *entry) AuditEntry {
	en := AuditEntry{Position: x.position, Stream: m.strs[x.stream], Version: x.version, Type: m.strs[x.typ], ID: x.id,
		Actor: m.strs[x.actor], RefusalCode: m.strs[x.code], CausationID: m.strs[x.causationStr]}
	if x.causation != uuid.Nil {
		en.CausationID = x.causation.String()
	}
	return en
}

func (m *audit) Apply(e *events.Event) error {
	if e.CorrelationID == "" {
		return nil
	}
	t := m.last
	if t == nil || t.corr != e.CorrelationID {
		t = m.trails[e.CorrelationID]
		if t == nil {
			c := strings.Clone(e.CorrelationID)
			t = &trail{corr: c}
			m.trails[c] = t
		}
		m.last = t
	}
	if m.strs[m.lastStream] != e.Stream {
		m.lastStream = m.intern(e.Stream)
	}
	x := entry{position: e.Position, version: e.Version, id: e.ID, stream: m.lastStream, typ: m.intern(e.Type), actor: m.intern(e.Actor)}
	m.setCausation(&x, e.CausationID)
	if e.Stream == refusalsStream && e.Type == typeRefused {
		var v [1][]byte
		fields(e.Data, refusalKeys, v[:])
		x.code = m.intern(str(v[0]))
	}
	t.entries = append(t.entries, x)
	if !t.dirty {
		t.dirty = true
		m.dirty = append(m.dirty, t)
	}
	return nil
}

// auditKey is "e/<correlation id>\x00<position, 20 digits>": the stored
// entries of a trail sort together, in log order.
func auditKey(corr string, pos uint64) string {
	return "e/" + corr + "\x00" + fmt.Sprintf("%020d", pos)
}

func (m *audit) Flush(put func(string, []byte) error) error {
	for _, t := range m.dirty {
		for i := t.flushed; i < len(t.entries); i++ {
			x := &t.entries[i]
			b, err := json.Marshal(m.public(x))
			if err != nil {
				return err
			}
			if err := put(auditKey(t.corr, x.position), b); err != nil {
				return err
			}
		}
		t.flushed, t.dirty = len(t.entries), false
	}
	m.dirty = m.dirty[:0]
	return nil
}

func (m *audit) Load(key string, value []byte) error {
	rest, ok := strings.CutPrefix(key, "e/")
	corr, pos, ok2 := strings.Cut(rest, "\x00")
	if !ok || !ok2 {
		return fmt.Errorf("stored row %q belongs to no table", key)
	}
	var en AuditEntry
	if err := json.Unmarshal(value, &en); err != nil {
		return fmt.Errorf("row %q: %w", key, err)
	}
	if p, err := strconv.ParseUint(pos, 10, 64); err != nil || p != en.Position {
		return fmt.Errorf("row %q holds position %d", key, en.Position)
	}
	t := m.trails[corr]
	if t == nil {
		t = &trail{corr: corr}
		m.trails[corr] = t
	}
	t.entries = append(t.entries, m.entryOf(en))
	t.flushed = len(t.entries)
	return nil
}

// TrailRow is the audit trail of one correlation id.
type TrailRow struct {
	Key           string       `json:"key"`
	CorrelationID string       `json:"correlation_id"`
	Events        []AuditEntry `json:"events"`
}

func (m *audit) View(q Query) any {
	rows := []TrailRow{}
	row := func(t *trail) TrailRow {
		r := TrailRow{Key: t.corr, CorrelationID: t.corr, Events: make([]AuditEntry, len(t.entries))}
		for i := range t.entries {
			r.Events[i] = m.public(&t.entries[i])
		}
		return r
	}
	if q.Key != "" {
		if t := m.trails[q.Key]; t != nil {
			rows = append(rows, row(t))
		}
		return rows
	}
	for _, corr := range sortedMapKeys(m.trails) {
		rows = append(rows, row(m.trails[corr]))
	}
	return rows
}
