// Package quota caps what the callers of a surface hold at once: the
// subscriptions, streams and proven reads a reader keeps open, each a
// goroutine and its buffers on the node (issue #20). A Quota counts one
// kind of resource against two caps, one per principal (who called, as the
// surface authenticated it) and one in total, and counts its refusals and
// the holders dropped for not reading, for the metrics. The HTTP API and
// the KurrentDB gRPC surface share it, so that both refuse by the same
// rule. It imports the standard library only.
package quota

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Scope names the cap a refusal hit.
type Scope string

// The two caps of a Quota.
const (
	// ScopePrincipal: the caller already holds its cap.
	ScopePrincipal Scope = "principal"
	// ScopeTotal: the node holds its cap, for every caller together.
	ScopeTotal Scope = "total"
)

// Quota caps how many of one kind of resource are held at once, by one
// principal and by all of them. Create it with New. Safe for concurrent
// use.
type Quota struct {
	name                string
	perPrincipal, total int

	mu sync.Mutex
	// held counts what each principal holds (no entry: none), n their
	// sum. Guarded by mu.
	held map[string]int
	n    int

	refusedPrincipal, refusedTotal, dropped atomic.Uint64
}

// New returns a quota named name (the metrics' label) that lets one
// principal hold perPrincipal and all of them total. REQUIRES: 0 <
// perPrincipal <= total (the surfaces' configurations check it).
func New(name string, perPrincipal, total int) *Quota {
	if perPrincipal <= 0 || total < perPrincipal {
		panic(fmt.Sprintf("quota %s: caps %d per principal, %d in total", name, perPrincipal, total))
	}
	return &Quota{name: name, perPrincipal: perPrincipal, total: total, held: map[string]int{}}
}

// Acquire takes one for principal. It returns the function that gives it
// back (call it once, when the resource ends), or, when a cap is reached,
// nil and the scope of that cap. The total is checked first: a node that
// is full refuses everyone alike.
func (q *Quota) Acquire(principal string) (release func(), refused Scope) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.n >= q.total:
		q.refusedTotal.Add(1)
		return nil, ScopeTotal
	case q.held[principal] >= q.perPrincipal:
		q.refusedPrincipal.Add(1)
		return nil, ScopePrincipal
	}
	q.n++
	q.held[principal]++
	var once sync.Once
	return func() { once.Do(func() { q.release(principal) }) }, ""
}

func (q *Quota) release(principal string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.n--
	if q.held[principal]--; q.held[principal] == 0 {
		delete(q.held, principal)
	}
}

// Limit returns the cap of scope.
func (q *Quota) Limit(scope Scope) int {
	if scope == ScopePrincipal {
		return q.perPrincipal
	}
	return q.total
}

// Dropped counts a holder the surface ended because it stopped reading
// (a write or a send that made no progress within its timeout).
func (q *Quota) Dropped() { q.dropped.Add(1) }

// Stats is what a Quota has counted, for the metrics.
type Stats struct {
	// Name is the quota's name: what it counts ("sse_subscriptions").
	Name string
	// Held is how many are held now; PerPrincipal and Total the caps.
	Held, PerPrincipal, Total int
	// RefusedPrincipal and RefusedTotal count the refusals by cap since
	// the node started; Dropped the holders ended for not reading.
	RefusedPrincipal, RefusedTotal, Dropped uint64
}

// Stats returns the quota's counts.
func (q *Quota) Stats() Stats {
	q.mu.Lock()
	held := q.n
	q.mu.Unlock()
	return Stats{Name: q.name, Held: held, PerPrincipal: q.perPrincipal, Total: q.total,
		RefusedPrincipal: q.refusedPrincipal.Load(), RefusedTotal: q.refusedTotal.Load(), Dropped: q.dropped.Load()}
}
