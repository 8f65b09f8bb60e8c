package commands_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
)

// gatedClock is a ManualClock whose Set waits until n Sets have been made
// (or the test's context ends): n concurrent commands then all set the
// clock before any of them reads it, the interleaving that a race
// detector or luck would otherwise have to find.
type gatedClock struct {
	*commands.ManualClock
	ctx     context.Context
	mu      sync.Mutex
	pending int           // Sets still awaited; guarded by mu
	all     chan struct{} // closed when pending reaches 0
}

func (c *gatedClock) Set(t time.Time) {
	c.ManualClock.Set(t)
	c.mu.Lock()
	if c.pending--; c.pending == 0 {
		close(c.all)
	}
	c.mu.Unlock()
	select {
	case <-c.all:
	case <-c.ctx.Done():
	}
}

// TestHandler_ConcurrentCommandTimes: two commands with their own "at",
// handled at the same time, each decide and record at their own time. The
// handler set the clock to a command's "at" and then read the clock back,
// two steps under the clock's lock taken separately, so a command could
// read the time another had set in between, and decide and record at it
// (handler.go, issue #14).
func TestHandler_ConcurrentCommandTimes(t *testing.T) {
	s := openStore(t)
	const n = 2
	clock := &gatedClock{ManualClock: commands.NewManualClock(t0), ctx: t.Context(), pending: n, all: make(chan struct{})}
	h, err := commands.New(commands.Config{Log: s, Clock: clock.Now, SetClock: clock.Set})
	if err != nil {
		t.Fatal(err)
	}
	ats := []time.Time{t0.Add(time.Hour), t0.Add(2 * time.Hour)}
	results := make([]commands.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		r := grant("a"+string(rune('1'+i)), aggregates.ActionStartup, "provider-p", 1)
		r.At = &ats[i]
		wg.Go(func() { results[i], errs[i] = h.Handle(t.Context(), r) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("command %d: %v", i, errs[i])
		}
		var d aggregates.ApprovalGranted
		if err := json.Unmarshal(results[i].Events[0].Data, &d); err != nil {
			t.Fatal(err)
		}
		if !results[i].At.Equal(ats[i]) || !d.At.Equal(ats[i]) {
			t.Errorf("command %d sent at %v was decided at %v and recorded at %v", i, ats[i], results[i].At, d.At)
		}
	}
}

// TestFloorClock_NeverBeforeTheFloor: a floor ahead of the wall clock
// starts the clock at the floor and moves it with the wall; a floor behind
// it leaves the wall clock as it is.
func TestFloorClock_NeverBeforeTheFloor(t *testing.T) {
	wall := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { return wall }
	floor := wall.Add(5 * time.Hour)
	c := commands.NewFloorClock(floor, now)
	if got := c.Now(); !got.Equal(floor) {
		t.Fatalf("a floor ahead of the wall: Now = %s, want %s", got, floor)
	}
	wall = wall.Add(time.Minute)
	if got := c.Now(); !got.Equal(floor.Add(time.Minute)) {
		t.Errorf("one minute later: Now = %s, want %s", got, floor.Add(time.Minute))
	}
	if _, settable := any(c).(interface{ Set(time.Time) }); settable {
		t.Error("a FloorClock must not be settable: a command could backdate itself")
	}
	c = commands.NewFloorClock(wall.Add(-time.Hour), now)
	if got := c.Now(); !got.Equal(wall) {
		t.Errorf("a floor behind the wall: Now = %s, want the wall %s", got, wall)
	}
}
