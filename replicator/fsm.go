package replicator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// Ledger is what the replicator needs from the store (pebblelog.Store
// implements it). ApplyReplicated, Snapshot and Restore are called by the
// FSM goroutine only, one at a time; the others are safe for concurrent use.
type Ledger interface {
	// ApplyReplicated applies a committed batch; it returns
	// pebblelog.ErrAlreadyApplied for an index at or below the applied one.
	ApplyReplicated(b *events.Batch, index uint64) ([]events.Outcome, error)
	// AppliedIndex is the raft index of the last applied batch.
	AppliedIndex() uint64
	// Snapshot captures the applied state; Restore replaces it.
	Snapshot() (*pebblelog.Snapshot, error)
	Restore(r io.Reader) error
	// SetProposer switches the store to replicated mode.
	SetProposer(p pebblelog.Proposer)
	// LedgerID and Head identify the ledger and its acknowledged end.
	LedgerID() string
	Head() events.Head
}

var _ Ledger = (*pebblelog.Store)(nil)

// fsm applies committed entries to the ledger. Raft calls Apply,
// ApplyBatch, Snapshot and Restore from one goroutine; Persist runs
// concurrently with them (it reads a checkpoint, never the live store).
//
// It implements raft.BatchingFSM, not for throughput (each batch is already
// a whole group commit) but because in batching mode raft hands configuration
// entries to the FSM too: the FSM's applied index then follows every entry
// but no-ops and barriers, which the read barrier relies on (read.go).
type fsm struct {
	ledger Ledger
	log    *slog.Logger
	// fatal is called once when the ledger fails to apply a committed entry:
	// the node can no longer follow the log and must stop (replicator.go).
	fatal func(error)
	// configs is given every committed configuration entry (removal.go).
	configs func(index uint64, c raft.Configuration)

	// applied is the highest raft index the FSM has taken in (applied,
	// skipped as already applied, or a configuration entry), or the index
	// a read barrier established. It only grows.
	applied  atomic.Uint64
	restores atomic.Uint64 // snapshots installed (status)
	// refused counts the snapshots the ledger refused, here and at the
	// start (catchUpFromSnapshot) (status).
	refused atomic.Uint64
	// snaps is the store raft puts the snapshots it receives in, and
	// sender tells who sent the one being restored (refused.go); either
	// may be nil. Set before raft starts.
	snaps  *SnapshotStore
	sender func() snapshotSender
	// raftApplied, when set, is raft's applied index (snapindex.go). Set
	// before raft starts.
	raftApplied func() uint64
	// entries and entryBytes count the command entries taken in and their
	// bytes, from which TrailingLogs is derived.
	entries, entryBytes atomic.Uint64
	failed              atomic.Bool // set after a fatal apply error: no more snapshots

	mu struct {
		sync.Mutex
		advanced chan struct{} // closed and replaced whenever applied grows
	}
}

var _ raft.BatchingFSM = (*fsm)(nil)

func newFSM(l Ledger, log *slog.Logger, fatal func(error), configs func(uint64, raft.Configuration)) *fsm {
	f := &fsm{ledger: l, log: log, fatal: fatal, configs: configs}
	f.mu.advanced = make(chan struct{})
	f.applied.Store(l.AppliedIndex())
	return f
}

// applyResult is the FSM's response to one entry, read by the proposer
// through the future's Response().
type applyResult struct {
	outcomes []events.Outcome
	err      error
}

// Apply applies one committed entry.
func (f *fsm) Apply(l *raft.Log) any {
	r := f.applyOne(l)
	f.advance(l.Index)
	return r
}

// ApplyBatch applies committed entries in order.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i, l := range logs {
		out[i] = f.applyOne(l)
	}
	if len(logs) > 0 {
		f.advance(logs[len(logs)-1].Index)
	}
	return out
}

func (f *fsm) applyOne(l *raft.Log) *applyResult {
	if l.Type == raft.LogConfiguration {
		// Raft keeps it and the ledger has nothing to do, but it is the
		// one place a follower sees a configuration committed. Raft
		// decoded the same bytes when it stored the entry.
		f.configs(l.Index, raft.DecodeConfiguration(l.Data))
		return nil
	}
	if l.Type != raft.LogCommand {
		return nil
	}
	f.entries.Add(1)
	f.entryBytes.Add(uint64(len(l.Data)))
	if f.failed.Load() {
		return &applyResult{err: fmt.Errorf("%w: this node's store failed; it stops", events.ErrOutcomeUnknown)}
	}
	b, err := events.DecodeBatch(l.Data)
	if err != nil {
		// Every replica decodes the same bytes the same way, so they all
		// skip this entry alike; it can only come from a bug in the leader.
		f.log.Error("undecodable raft entry skipped", "index", l.Index, "err", err)
		return &applyResult{err: fmt.Errorf("raft entry %d: %w", l.Index, err)}
	}
	outcomes, err := f.ledger.ApplyReplicated(b, l.Index)
	switch {
	case err == nil:
		return &applyResult{outcomes: outcomes}
	case errors.Is(err, pebblelog.ErrAlreadyApplied):
		// Replayed after a restart: the ledger holds it already.
		return &applyResult{err: fmt.Errorf("%w: entry %d was applied before a restart", events.ErrOutcomeUnknown, l.Index)}
	}
	// The store could not write a committed entry. Skipping it would fork
	// this replica from the others; the only safe move is to stop.
	f.failed.Store(true)
	f.fatal(fmt.Errorf("apply raft entry %d: %w", l.Index, err))
	return &applyResult{err: fmt.Errorf("%w: apply failed on the leader: %v", events.ErrOutcomeUnknown, err)}
}

// advance raises applied to index and wakes waiters.
func (f *fsm) advance(index uint64) {
	for {
		cur := f.applied.Load()
		if index <= cur {
			return
		}
		if f.applied.CompareAndSwap(cur, index) {
			break
		}
	}
	f.mu.Lock()
	close(f.mu.advanced)
	f.mu.advanced = make(chan struct{})
	f.mu.Unlock()
}

// waitApplied blocks until applied >= index or ctx ends.
func (f *fsm) waitApplied(ctx context.Context, index uint64) error {
	for {
		f.mu.Lock()
		ch := f.mu.advanced
		f.mu.Unlock()
		if f.applied.Load() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for raft index %d (applied %d): %w", index, f.applied.Load(), ctx.Err())
		}
	}
}

// Snapshot returns a Pebble checkpoint of the ledger: fast, and independent
// of the live store while it is persisted.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if f.failed.Load() {
		return nil, errors.New("the store failed: no snapshot of a state that stopped following the log")
	}
	sn, err := f.ledger.Snapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{sn: sn}, nil
}

// Restore installs a snapshot sent by the leader (raft closes rc): the one
// raft just put in the snapshot store. The store keeps it only if the
// ledger took it; otherwise it is removed (refused.go), and raft, which
// records a received snapshot only once Restore succeeded, answers the
// InstallSnapshot with the error. A received snapshot whose content is not
// newer than what this node took in must be the ledger's own state
// (snapindex.go); the ledger checks that it is.
func (f *fsm) Restore(rc io.ReadCloser) error {
	var m raft.SnapshotMeta
	received := false
	if f.snaps != nil {
		m, received = f.snaps.takeReceived()
	}
	var from snapshotSender
	if f.sender != nil {
		from = f.sender()
	}
	var r io.Reader = rc
	if received && f.raftApplied != nil {
		info, whole, err := pebblelog.PeekSnapshotInfo(rc)
		if err == nil {
			err = notLedgerState(m.Index, info, f.raftApplied(), f.ledger.AppliedIndex())
		}
		if err != nil {
			f.notInstalled(m, received, from, err)
			return err
		}
		r = whole
	}
	if err := f.ledger.Restore(r); err != nil {
		f.notInstalled(m, received, from, err)
		return err
	}
	f.restores.Add(1)
	f.advance(f.ledger.AppliedIndex())
	if received {
		if err := f.snaps.accept(m); err != nil {
			// Installed and listed; only reaping older ones failed, which
			// the next snapshot retries.
			f.log.Warn("installed raft snapshot: reaping older snapshots failed", "snapshot", m.ID, "err", err)
		}
	}
	return nil
}

// fsmSnapshot streams a checkpoint into raft's snapshot sink.
type fsmSnapshot struct{ sn *pebblelog.Snapshot }

// Persist writes this node's own state: the sink is marked local, so that
// the store does not take it for a snapshot received from a leader.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	markLocal(sink)
	if _, err := s.sn.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.sn.Release() }
