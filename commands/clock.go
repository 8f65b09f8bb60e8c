package commands

import (
	"sync"
	"time"
)

// The module's one clock shape (STYLE.md, "One of each") is a func() time.Time:
// Config.Clock here, as in the store, the projections, the metrics and the
// witness collector. Setting the clock is a capability of its own,
// Config.SetClock: a node given one honours the "at" field of a command
// (the clock is set to it before the command is decided), so that a
// fixture replays a history whose freshness windows and expiries matter at
// the times it was written for; a node without one (the system clock, a
// FloorClock) refuses "at" (command_time_not_allowed): no client can
// backdate a decision on it. ManualClock provides both (its Now and Set).

// systemNow is the default clock: the wall clock, in UTC.
func systemNow() time.Time { return time.Now().UTC() }

// ManualClock is a clock that moves only when told: tests, fixtures and
// `greffe demo` use it. The zero value reads the zero time; start it with
// NewManualClock. Safe for concurrent use.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

// NewManualClock returns a clock reading t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t.UTC()} }

// Now returns the time last set.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t (backwards too: a fixture decides its times).
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t.UTC()
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
