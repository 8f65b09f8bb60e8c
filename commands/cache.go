package commands

import (
	"sync"

	"github.com/greffe/greffe/aggregates"
)

// stateCache keeps folded stream states between commands, so that a command
// on a long stream (a mission with many checks) folds only the events
// appended since the last command read it. Entries are immutable values:
// the aggregates' Evolve never modifies the state it is given (maps and
// slices are copied before they change), so a cached state may be shared
// by concurrent commands. A nil *stateCache caches nothing. Safe for
// concurrent use.
type stateCache struct {
	max int
	mu  sync.Mutex
	m   map[string]cachedState // guarded by mu
}

type cachedState struct {
	st      aggregates.State
	version int64
}

func newStateCache(max int) *stateCache {
	return &stateCache{max: max, m: make(map[string]cachedState)}
}

func (c *stateCache) get(stream string) (aggregates.State, int64, bool) {
	if c == nil {
		return nil, 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[stream]
	return e.st, e.version, ok
}

// put keeps st unless a newer version is cached. A full cache drops an
// arbitrary entry (map order): any entry is only a head start.
func (c *stateCache) put(stream string, st aggregates.State, version int64) {
	if c == nil || version < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[stream]; ok && e.version >= version {
		return
	}
	if _, ok := c.m[stream]; !ok && len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[stream] = cachedState{st: st, version: version}
}
