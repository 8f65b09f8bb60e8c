package commands

import (
	"sync"
	"time"
)

// Clock is the node's clock: Now is the time a command is received
// (aggregates.Inputs.At) and the time read models are judged at. Safe for
// concurrent use.
type Clock interface {
	Now() time.Time
}

// SettableClock is a Clock that commands may set. A node whose clock is a
// SettableClock honours the "at" field of a command: the clock is set to
// it before the command is decided, so a fixture replays a history whose
// freshness windows and expiries matter, at the times it was written for.
// A node on the system clock refuses "at" (command_time_not_allowed): no
// client can backdate a decision on it.
type SettableClock interface {
	Clock
	Set(t time.Time)
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// ManualClock is a clock that moves only when told: tests, fixtures and
// `greffe demo` use it. The zero value reads the zero time; start it with
// NewManualClock. Safe for concurrent use.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

var (
	_ SettableClock = (*ManualClock)(nil)
	_ Clock         = SystemClock{}
)

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
