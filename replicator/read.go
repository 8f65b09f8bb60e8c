package replicator

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
)

// ReadBarrier returns once this node may serve a linearizable read from its
// own ledger: every write acknowledged before the call is visible. It is the
// recipe rqlite uses, without a lease shortcut:
//
//  1. this node is the leader and has applied an entry of its current term
//     (the barrier establish commits on election), so its commit index
//     covers everything earlier leaders committed;
//  2. record the commit index;
//  3. confirm leadership with a quorum (VerifyLeader), so no newer leader
//     can have committed anything this node does not know of;
//  4. check the term did not change in between;
//  5. wait until the ledger has applied the recorded index.
//
// A node that does not lead returns *NotLeaderError (the API forwards such
// reads to the leader); ctx bounds steps 1 and 5.
func (p *Replicator) ReadBarrier(ctx context.Context) error {
	term, err := p.waitReady(ctx)
	if err != nil {
		return err
	}
	index := p.raft.CommitIndex()
	var vf raft.Future
	if !p.toRaft(func() { vf = p.raft.VerifyLeader() }) {
		return fmt.Errorf("linearizable read: the replicator is stopping: %w", events.ErrClosed)
	}
	err = vf.Error()
	p.apply.inRaft.Done()
	if err != nil {
		return p.notLeader()
	}
	if p.raft.CurrentTerm() != term || p.raft.State() != raft.Leader {
		return p.notLeader()
	}
	if err := p.fsm.waitApplied(ctx, index); err != nil {
		return fmt.Errorf("linearizable read: %w", err)
	}
	return nil
}

// waitReady waits until this node leads and has established its term.
func (p *Replicator) waitReady(ctx context.Context) (uint64, error) {
	for {
		p.readyMu.Lock()
		ch := p.readyMu.ch
		p.readyMu.Unlock()
		if p.raft.State() != raft.Leader {
			return 0, p.notLeader()
		}
		term := p.raft.CurrentTerm()
		if p.ready.Load() == term {
			return term, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, fmt.Errorf("linearizable read: the leader has not yet committed an entry of term %d: %w", term, ctx.Err())
		}
	}
}
