package pebblelog_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/internal/faultfs"
)

// TestStore_PowerLossKeepsAcknowledged simulates power loss: writers append
// to a store on Pebble's crashable in-memory filesystem; at random moments
// the filesystem is cloned keeping only what was fsynced (plus a random part
// of what was not), and a store opened on the clone must hold every event
// acknowledged before the clone, at its acknowledged position. A kill -9 test
// cannot see a missing fsync (the page cache survives the process); this one
// does.
//
// With small log segments and a small memtable, the store flushes Pebble and
// drops log segments all along, so crashes also land in those steps. Before
// each reopen, the offline inspector reads the crashed store (its tables
// under the log's records) and must see the head the reopened store has.
func TestStore_PowerLossKeepsAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  pebblelog.Config
	}{
		{"defaults", pebblelog.Config{}},
		{"small segments", pebblelog.Config{WALSegmentSize: 16 << 10, MemTableSize: 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) { powerLoss(t, tc.cfg) })
	}
}

func powerLoss(t *testing.T, cfg pebblelog.Config) {
	fs := vfs.NewCrashableMem()
	// The power is cut while writers run: never inside a Link or a
	// ReuseForWrite of the log's segments (faultfs.Holder).
	gate := &faultfs.CloneGate{}
	cfg.Dir, cfg.FS, cfg.CheckpointInterval = "/ledger", faultfs.Wrap(fs, gate), -1
	s, err := pebblelog.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	acked := map[uuid.UUID]uint64{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				p := ev("P", fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				o, err := s.Append(ctx, one(fmt.Sprintf("p%d", w), events.ExpectAny, p))
				if err != nil {
					return
				}
				mu.Lock()
				acked[p.ID] = o.Events[0].Position
				mu.Unlock()
			}
		}()
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for crash := range 5 {
		time.Sleep(time.Duration(20+rng.IntN(100)) * time.Millisecond)
		mu.Lock()
		snapshot := make(map[uuid.UUID]uint64, len(acked))
		for k, v := range acked {
			snapshot[k] = v
		}
		clone := gate.CrashClone(fs, vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(50), RNG: rng})
		mu.Unlock()
		in, err := inspect.Open(inspect.Config{Dir: "/ledger", FS: clone})
		if err != nil {
			t.Fatalf("crash %d: inspect: %v", crash, err)
		}
		meta := in.Meta()
		seen, replayed := meta.State.Size, in.Replayed
		_ = in.Close()
		if meta.StateErr != nil {
			t.Fatalf("crash %d: the inspector reads no state: %v", crash, meta.StateErr)
		}
		cfg.FS = clone
		r, err := pebblelog.Open(cfg)
		if err != nil {
			t.Fatalf("crash %d: reopen: %v", crash, err)
		}
		if r.Head().Size != seen {
			t.Fatalf("crash %d: the inspector saw %d events (%d log records over the tables), the reopened store has %d", crash, seen, replayed, r.Head().Size)
		}
		if got := r.Stats().WALReplayed; got != uint64(replayed) {
			t.Fatalf("crash %d: the store counts %d replayed log records, the inspector overlaid %d", crash, got, replayed)
		}
		for id, pos := range snapshot {
			e, err := r.EventByID(t.Context(), id)
			if err != nil || e.Position != pos {
				t.Fatalf("crash %d: acknowledged event %s at %d: got %d, %v", crash, id, pos, e.Position, err)
			}
		}
		if r.Head().Size < uint64(len(snapshot)) {
			t.Fatalf("crash %d: head %d below %d acknowledged", crash, r.Head().Size, len(snapshot))
		}
		_ = r.Close()
		t.Logf("crash %d: %d acknowledged events survived (head %d; %d log records replayed)", crash, len(snapshot), r.Head().Size, replayed)
	}
	cancel()
	wg.Wait()
}
