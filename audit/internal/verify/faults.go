package verify

import (
	"slices"
	"sync"
	"time"

	"github.com/greffe/greffe/audit"
)

// compare orders faults by position, then kind (audit.Kinds: the most
// fundamental first), then end and detail.
func (c *faults) compare(a, b audit.Fault) int {
	if a.Position != b.Position {
		if a.Position < b.Position {
			return -1
		}
		return 1
	}
	if ra, rb := c.rank(a.Kind), c.rank(b.Kind); ra != rb {
		return ra - rb
	}
	if a.End != b.End {
		if a.End < b.End {
			return -1
		}
		return 1
	}
	if a.Detail < b.Detail {
		return -1
	}
	if a.Detail > b.Detail {
		return 1
	}
	return 0
}

// faults collects faults from every goroutine of a verification. It keeps
// the lowest max faults by position (the count stays exact), so that a
// log damaged everywhere costs bounded memory. Safe for concurrent use.
type faults struct {
	mu    sync.Mutex
	max   int
	ranks map[string]int // kind -> place in audit.Kinds()
	list  []audit.Fault  // guarded by mu
	count int            // guarded by mu
}

func newFaults(max int) *faults {
	c := &faults{max: max, ranks: map[string]int{}}
	for i, k := range audit.Kinds() {
		c.ranks[k] = i
	}
	return c
}

// rank returns a kind's place in audit.Kinds (unknown kinds last).
func (c *faults) rank(kind string) int {
	if r, ok := c.ranks[kind]; ok {
		return r
	}
	return len(c.ranks)
}

func (c *faults) add(f audit.Fault) {
	if f.End <= f.Position+1 {
		f.End, f.Approximate = 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count++
	c.list = append(c.list, f)
	if len(c.list) >= 4*c.max {
		c.trimLocked()
	}
}

// trimLocked sorts and keeps the first max. REQUIRES: c.mu held.
func (c *faults) trimLocked() {
	slices.SortFunc(c.list, c.compare)
	c.list = slices.CompactFunc(c.list, func(a, b audit.Fault) bool { return c.compare(a, b) == 0 })
	if len(c.list) > c.max {
		c.list = c.list[:c.max]
	}
}

func (c *faults) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// sorted returns the kept faults, sorted, and the total count.
func (c *faults) sorted() ([]audit.Fault, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trimLocked()
	return slices.Clone(c.list), c.count
}

// finish completes r with the faults c kept, in order, and the time since
// start.
func finish(r *audit.Report, c *faults, start time.Time) {
	r.Faults, r.FaultCount = c.sorted()
	r.Verified = r.FaultCount == 0
	r.First = pickFirst(r.Faults)
	r.Elapsed = time.Since(start)
	if s := r.Elapsed.Seconds(); s > 0 {
		r.EventsPerSec = float64(r.Events) / s
	}
}

// isRange reports whether f is located to a range of positions only.
func isRange(f audit.Fault) bool { return f.Approximate && f.End > f.Position+1 }

// pickFirst chooses the fault to report first among sorted faults. A range
// fault (a subtree or checkpoint root that differs) only bounds where the
// first bad position is; when it comes first, the ranges that overlap it
// are intersected, and an exactly located fault inside the intersection is
// preferred: it is the first bad position the evidence can name.
func pickFirst(sorted []audit.Fault) *audit.Fault {
	if len(sorted) == 0 {
		return nil
	}
	first := sorted[0]
	if !isRange(first) {
		return &first
	}
	lo, hi := first.Position, first.End
	tightest := first
	for _, f := range sorted[1:] {
		if !isRange(f) || f.Position >= hi || f.End <= lo {
			continue
		}
		if f.End-f.Position < tightest.End-tightest.Position {
			tightest = f
		}
		lo, hi = max(lo, f.Position), min(hi, f.End)
	}
	for _, f := range sorted {
		if !isRange(f) && f.Position >= lo && f.Position < hi {
			return &f
		}
	}
	tightest.Position, tightest.End = lo, hi
	if hi == lo+1 {
		tightest.End, tightest.Approximate = 0, false
	}
	return &tightest
}
