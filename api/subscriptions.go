package api

import (
	"sync"
	"sync/atomic"
)

// subscriptions tracks the SSE subscriptions being served, so that the
// metrics endpoint can say how many there are and how far behind the head
// the slowest one is. The zero value is ready. Safe for concurrent use.
type subscriptions struct {
	mu sync.Mutex
	// active maps a subscription to the next position it will read. The
	// position is an atomic so that the subscription advances it without
	// the lock; the lock guards only the map. Guarded by mu.
	active map[*atomic.Uint64]struct{}
}

// add registers a subscription starting at from. The caller advances the
// returned position as it reads and calls done when it ends.
func (t *subscriptions) add(from uint64) (pos *atomic.Uint64, done func()) {
	pos = new(atomic.Uint64)
	pos.Store(from)
	t.mu.Lock()
	if t.active == nil {
		t.active = make(map[*atomic.Uint64]struct{})
	}
	t.active[pos] = struct{}{}
	t.mu.Unlock()
	return pos, func() {
		t.mu.Lock()
		delete(t.active, pos)
		t.mu.Unlock()
	}
}

// SubscriptionPositions returns, for every SSE subscription being served,
// the next log position it will read (events it skipped because of its
// filter count as read): the head minus that is how far behind it is. The
// order is unspecified; an empty slice means none.
func (s *Server) SubscriptionPositions() []uint64 {
	t := &s.subs
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]uint64, 0, len(t.active))
	for p := range t.active {
		out = append(out, p.Load())
	}
	return out
}
