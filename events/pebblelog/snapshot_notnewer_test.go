package pebblelog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// TestStore_RestoreNotNewer is issue #20, finding 3, for a snapshot whose
// raft index is not after the store's: Restore used to keep the store and
// return nil without reading the snapshot, and the replicator then kept
// the snapshot as a raft snapshot of this node, served it to followers,
// and let raft record the index its sender named (far ahead, in the
// attack: replicator's TestReplicator_KeptSnapshotBehindTheLedger). Now
// such a snapshot is kept only when it is a prefix of the store's
// history, checked against the store's own tree, and the store's very
// state when it names the store's own raft index; its tree must be the
// tree of its events. Anything else is refused like a fork. Either way the
// store is unchanged, the staged folder removed, and the store applies on.
func TestStore_RestoreNotNewer(t *testing.T) {
	stores := func(t *testing.T) (*pebblelog.Store, string) {
		dir := filepath.Join(t.TempDir(), "ledger")
		s, _ := openStore(t, dir)
		return s, dir
	}
	// The victim: 199 batches (398 events, past a full leaf tile) at raft
	// indexes 1 to 199, with checkpoints signed at 100 and at its head.
	victim := func(t *testing.T) (*pebblelog.Store, string) {
		s, dir := stores(t)
		applyN(t, s, 1, 200)
		for _, size := range []uint64{100, 398} {
			if _, err := s.CheckpointAt(t.Context(), size); err != nil {
				t.Fatal(err)
			}
		}
		return s, dir
	}
	cases := []struct {
		name string
		// snapshot builds the stream sent to the victim v.
		snapshot func(t *testing.T, v *pebblelog.Store) []byte
		want     error // nil: kept, the store unchanged
	}{
		{
			// What a leader sends again when the answer to its install
			// was lost: the follower holds exactly that state.
			name:     "its own state, at its own raft index",
			snapshot: func(t *testing.T, v *pebblelog.Store) []byte { return snapshotBytes(t, v) },
		},
		{
			name: "an earlier state of its history",
			snapshot: func(t *testing.T, _ *pebblelog.Store) []byte {
				h, _ := stores(t)
				applyN(t, h, 1, 150) // 298 events, past the checkpoint at 100
				return snapshotBytes(t, h)
			},
		},
		{
			// The attack's content: three forged batches, behind the
			// victim (the RPC names it far ahead).
			name: "a forged history behind it",
			snapshot: func(t *testing.T, _ *pebblelog.Store) []byte {
				f, _ := stores(t)
				applyForged(t, f, 1, 4)
				return snapshotBytes(t, f)
			},
			want: pebblelog.ErrSnapshotForks,
		},
		{
			name: "another state at its own raft index",
			snapshot: func(t *testing.T, _ *pebblelog.Store) []byte {
				f, _ := stores(t)
				applyForged(t, f, 1, 200)
				return snapshotBytes(t, f)
			},
			want: pebblelog.ErrSnapshotForks,
		},
		{
			// Its history as a prefix, with one event more at its own
			// raft index: one index, one state.
			name: "its history and one event more, at its own raft index",
			snapshot: func(t *testing.T, _ *pebblelog.Store) []byte {
				h, _ := stores(t)
				applyN(t, h, 1, 199)
				b := &events.Batch{RecordedAt: time.Unix(1_700_000_000+199, 0).UTC(), Appends: []events.AppendRequest{
					one("snap-1", events.ExpectAny, ev("Snap", `{"i":199}`), ev("Snap", `{}`), ev("Snap", `{}`)),
				}}
				if _, err := h.ApplyReplicated(b, 199); err != nil {
					t.Fatal(err)
				}
				return snapshotBytes(t, h)
			},
			want: pebblelog.ErrSnapshotForks,
		},
		{
			name: "more events than it, at a lower raft index",
			snapshot: func(t *testing.T, _ *pebblelog.Store) []byte {
				h, _ := stores(t)
				applyN(t, h, 1, 10)
				many := make([]events.Proposed, 400)
				for i := range many {
					many[i] = events.Proposed{ID: uuid.New(), Type: "Snap", Data: json.RawMessage(fmt.Sprintf(`{"many":%d}`, i)), Metadata: json.RawMessage(`{}`)}
				}
				b := &events.Batch{RecordedAt: time.Unix(1_700_000_010, 0).UTC(), Appends: []events.AppendRequest{one("many", events.ExpectAny, many...)}}
				if _, err := h.ApplyReplicated(b, 10); err != nil {
					t.Fatal(err)
				}
				return snapshotBytes(t, h)
			},
			want: pebblelog.ErrSnapshotForks,
		},
		{
			// The header (size and root) of an earlier honest state, over
			// a forged event: kept, it would be served as this history.
			name: "an earlier state's header over a forged event",
			snapshot: func(t *testing.T, _ *pebblelog.Store) []byte {
				f, _ := stores(t)
				applyForged(t, f, 1, 3)
				return honestTreeForgedEvent(t, stores, 150, 3, rawAll(t, f)[3])
			},
			want: pebblelog.ErrSnapshotForks,
		},
		{
			// The same beyond every checkpoint: the tree's stored leaf
			// tile is not the hashes of its events.
			name: "an earlier state's header over a forged event past the checkpoints",
			snapshot: func(t *testing.T, _ *pebblelog.Store) []byte {
				f, _ := stores(t)
				applyForged(t, f, 1, 70)
				return honestTreeForgedEvent(t, stores, 150, 120, rawAll(t, f)[120])
			},
			want: pebblelog.ErrBadSnapshot,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, dir := victim(t)
			stream := tc.snapshot(t, v)
			info, err := pebblelog.ReadSnapshotInfo(bytes.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			if info.Applied > v.AppliedIndex() {
				t.Fatalf("the snapshot is at raft index %d, after the victim's %d", info.Applied, v.AppliedIndex())
			}
			before := stateOf(t, v)

			err = v.Restore(bytes.NewReader(stream))

			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Restore: %v, want %v", err, tc.want)
			}
			if errors.Is(tc.want, pebblelog.ErrSnapshotForks) {
				for _, part := range []string{fmt.Sprint(info.Head.Size), fmt.Sprintf("%x", info.Head.Root)} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("refusal %q does not name %s", err, part)
					}
				}
			}
			if diff := cmp.Diff(before, stateOf(t, v)); diff != "" {
				t.Fatalf("the store changed (-before +after):\n%s", diff)
			}
			if _, err := os.Stat(dir + ".restore"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the staged folder %s.restore is still there (%v)", dir, err)
			}
			applyN(t, v, 200, 201)
			if got, want := v.Head().Size, before.Head.Size+2; got != want {
				t.Fatalf("head %d after one more batch, want %d", got, want)
			}
		})
	}
}
