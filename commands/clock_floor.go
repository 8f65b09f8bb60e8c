package commands

import "time"

// FloorClock is the wall clock shifted so that it never reads before a
// floor: `greffe demo` runs its live part on one whose floor is the
// ledger's last recorded time, so that a second run on the same folder
// never stamps a command earlier than events already stored, even when
// the histories it replayed were dated ahead of the wall clock. It is not
// settable (it has no Set): a node on it refuses "at" as on the system
// clock.
// Safe for concurrent use (it is never modified after NewFloorClock).
type FloorClock struct {
	wall   func() time.Time
	offset time.Duration // >= 0; added to every wall reading
}

// NewFloorClock returns a clock that reads max(floor, wall()) now and
// moves with wall from there. wall nil is time.Now.
func NewFloorClock(floor time.Time, wall func() time.Time) *FloorClock {
	if wall == nil {
		wall = time.Now
	}
	return &FloorClock{wall: wall, offset: max(0, floor.Sub(wall()))}
}

// Now returns the wall clock plus the offset fixed at construction, in UTC.
func (c *FloorClock) Now() time.Time { return c.wall().Add(c.offset).UTC() }
