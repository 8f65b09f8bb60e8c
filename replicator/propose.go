package replicator

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
)

// Proposals: the store's batches handed to raft (Propose), their outcomes
// handed back in order (waitLoop), and the one way raft is stopped
// (stopRaft), which first sees every future it was handed answered.

// proposal is one batch handed to raft.
type proposal struct {
	f        raft.ApplyFuture
	done     chan struct{}
	outcomes []events.Outcome
	err      error
}

// Propose hands a batch to raft and returns at once. The wait function
// returns the batch's outcomes once it is applied on this node; after
// leadership is lost mid-commit it returns events.ErrOutcomeUnknown, on
// a node that does not lead, *NotLeaderError, and once the member is
// stopping, an error matching events.ErrClosed (nothing written in both).
func (p *Replicator) Propose(b *events.Batch) func(ctx context.Context) ([]events.Outcome, error) {
	pr := &proposal{done: make(chan struct{})}
	data := events.EncodeBatch(b)
	if !p.toRaft(func() { pr.f = p.raft.Apply(data, p.cfg.ApplyTimeout) }) {
		pr.err = fmt.Errorf("replicator: stopping, nothing was proposed: %w", events.ErrClosed)
		close(pr.done)
		return pr.wait
	}
	// The wait loop runs until stopRaft has seen every proposal answered:
	// the queue always takes this one (it holds more than the store keeps
	// in flight).
	p.pending <- pr
	return pr.wait
}

func (pr *proposal) wait(ctx context.Context) ([]events.Outcome, error) {
	select {
	case <-pr.done:
		return pr.outcomes, pr.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", events.ErrOutcomeUnknown, ctx.Err())
	}
}

// waitLoop resolves proposals in order. Raft answers every proposal before
// stopRaft stops it, so the loop always drains.
func (p *Replicator) waitLoop() {
	for {
		select {
		case pr := <-p.pending:
			p.resolve(pr)
		case <-p.ctx.Done():
			for {
				select {
				case pr := <-p.pending:
					p.resolve(pr)
				default:
					return
				}
			}
		}
	}
}

func (p *Replicator) resolve(pr *proposal) {
	defer close(pr.done)
	err := pr.f.Error()
	p.apply.inRaft.Done()
	if err != nil {
		pr.err = p.translate(err)
		return
	}
	res, ok := pr.f.Response().(*applyResult)
	if !ok || res == nil {
		pr.err = fmt.Errorf("%w: raft answered %T", events.ErrOutcomeUnknown, pr.f.Response())
		return
	}
	pr.outcomes, pr.err = res.outcomes, res.err
}

// toRaft runs submit, a raft call that queues a future, unless raft is
// stopping (false), and counts the future until the caller, once raft
// answered it, calls p.apply.inRaft.Done. The read lock is held across
// submit, which is a channel send that does not wait for raft's main loop,
// so that stopRaft cannot stop raft between the check and the hand-over.
func (p *Replicator) toRaft(submit func()) bool {
	p.apply.mu.RLock()
	defer p.apply.mu.RUnlock()
	if p.apply.stopping {
		return false
	}
	submit()
	p.apply.inRaft.Add(1)
	return true
}

// stopRaft stops raft, the only way this replicator does: it refuses new
// proposals, waits until raft has answered every proposal it holds (raft
// answers them while it runs: applied, not leader, or leadership lost once
// a leader without a quorum steps down, within LeaderLeaseTimeout), then
// shuts raft down. Safe to call more than once and concurrently.
func (p *Replicator) stopRaft() error {
	p.apply.once.Do(func() {
		p.apply.mu.Lock()
		p.apply.stopping = true
		p.apply.mu.Unlock()
		p.apply.inRaft.Wait()
	})
	return p.raft.Shutdown().Error()
}
