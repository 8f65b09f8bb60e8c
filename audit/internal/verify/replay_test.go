package verify

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/events"
)

// rawEvent encodes an event as a tamperer could write it: whatever the
// store would never produce (a version gap, time going backwards, an id
// twice) is representable.
func rawEvent(t *testing.T, pos uint64, stream string, version uint64, id uuid.UUID, at time.Time) []byte {
	t.Helper()
	b, err := events.Encode(&events.Event{Position: pos, Stream: stream, Version: version, ID: id, Type: "T",
		Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`), RecordedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func replayRaw(t *testing.T, raws [][]byte) (*Replayed, *Run) {
	t.Helper()
	run := New(audit.Config{MaxFaults: 100}, "raws")
	r, err := run.Replay(context.Background(), ReplayConfig{Head: uint64(len(raws)), MaxSlots: 1 << 20}, func(_ context.Context, f *Feeder) error {
		for i, raw := range raws {
			if err := f.Event(uint64(i), raw); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, run
}

type kindAt struct {
	Kind     string
	Position int64
}

func kindsAt(run *Run) []kindAt {
	list := run.Finish().Faults
	out := []kindAt{}
	for _, f := range list {
		out = append(out, kindAt{f.Kind, f.Position})
	}
	return out
}

// TestReplay_EventFaults covers the faults only a hand-crafted log can
// show, since the store never writes them: recorded_at going backwards, a
// stream version skipped, an event id used twice.
func TestReplay_EventFaults(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	tests := []struct {
		name string
		raws func(t *testing.T) [][]byte
		ids  []IDEntry // the event-id index, when the test checks it
		want []kindAt
	}{
		{
			name: "recorded_at goes backwards",
			raws: func(t *testing.T) [][]byte {
				return [][]byte{rawEvent(t, 0, "s", 0, a, t0), rawEvent(t, 1, "s", 1, b, t0.Add(time.Second)), rawEvent(t, 2, "s", 2, c, t0)}
			},
			want: []kindAt{{audit.KindRecordedAtBackwards, 2}},
		},
		{
			name: "a stream version skipped",
			raws: func(t *testing.T) [][]byte {
				return [][]byte{rawEvent(t, 0, "s", 0, a, t0), rawEvent(t, 1, "s", 1, b, t0), rawEvent(t, 2, "s", 3, c, t0)}
			},
			want: []kindAt{{audit.KindStreamVersion, 2}},
		},
		{
			name: "an event id used twice",
			raws: func(t *testing.T) [][]byte {
				return [][]byte{rawEvent(t, 0, "s", 0, a, t0), rawEvent(t, 1, "s", 1, b, t0), rawEvent(t, 2, "t", 0, a, t0)}
			},
			ids:  []IDEntry{{a, 0}, {b, 1}},
			want: []kindAt{{audit.KindDuplicateEventID, 2}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, run := replayRaw(t, tc.raws(t))
			if tc.ids != nil {
				run.CheckIDIndex(r, tc.ids)
			}
			if diff := cmp.Diff(tc.want, kindsAt(run)); diff != "" {
				t.Errorf("faults (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPickFirst: a range fault only bounds the first bad position; the
// ranges that overlap it narrow it, and an exact fault inside wins.
func TestPickFirst(t *testing.T) {
	tests := []struct {
		name   string
		faults []audit.Fault
		want   audit.Fault
	}{
		{
			name:   "exact first",
			faults: []audit.Fault{{Kind: audit.KindLeafHashMismatch, Position: 3}, {Kind: audit.KindCheckpointRoot, Position: 5, End: 9, Approximate: true}},
			want:   audit.Fault{Kind: audit.KindLeafHashMismatch, Position: 3},
		},
		{
			name: "ranges narrowed",
			faults: []audit.Fault{{Kind: audit.KindCheckpointRoot, Position: 0, End: 100, Approximate: true, Detail: "wide"},
				{Kind: audit.KindStateMismatch, Position: 64, End: 96, Approximate: true, Detail: "narrow"}},
			want: audit.Fault{Kind: audit.KindStateMismatch, Position: 64, End: 96, Approximate: true, Detail: "narrow"},
		},
		{
			name: "an exact fault inside the range",
			faults: []audit.Fault{{Kind: audit.KindCheckpointRoot, Position: 0, End: 100, Approximate: true},
				{Kind: audit.KindPositionMismatch, Position: 70}},
			want: audit.Fault{Kind: audit.KindPositionMismatch, Position: 70},
		},
		{
			name: "narrowed to one position",
			faults: []audit.Fault{{Kind: audit.KindCheckpointRoot, Position: 10, End: 12, Approximate: true, Detail: "a"},
				{Kind: audit.KindCheckpointRoot, Position: 11, End: 20, Approximate: true, Detail: "b"}},
			want: audit.Fault{Kind: audit.KindCheckpointRoot, Position: 11, Detail: "a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFaults(10)
			for _, f := range tc.faults {
				fs.add(f)
			}
			list, _ := fs.sorted()
			if diff := cmp.Diff(tc.want, *pickFirst(list)); diff != "" {
				t.Errorf("first (-want +got):\n%s", diff)
			}
		})
	}
}
