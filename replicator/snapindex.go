package replicator

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events/pebblelog"
)

// The raft index a received snapshot is named at (issue #20).
//
// Raft installs a snapshot it receives at the index and term its
// InstallSnapshot RPC names (LastLogIndex, LastLogTerm), whatever the
// snapshot holds: once the FSM's Restore succeeded, installSnapshot
// (hashicorp/raft v1.8.0, raft.go) sets its applied index and its last
// snapshot to them and compacts its log up to that index, and runFSM takes
// its last index and term from the snapshot's metadata, which is the RPC's.
// A snapshot named after what it holds makes the node skip the entries in
// between as applied: it stops following the leader, and the commands it
// skips are missing from its ledger, which then forks from the others'.
// Raft cannot be told to record another index without forking raft, so
// the snapshot store asks vetReceived, when raft closes the sink of a
// snapshot it received, before anything is in place, whether the name is
// one an honest leader could give that content; when it is not, Close
// fails, raft answers the RPC with the error and records nothing, and the
// refusal is logged and counted like the ledger's (refused.go).
//
// # What an honest snapshot looks like
//
// Raft names a snapshot after the last entry it handed to the FSM
// (runFSM's lastIndex and lastTerm), of any type: with a BatchingFSM,
// no-ops and barriers are counted without reaching the FSM, and
// configuration entries reach the FSM but not the ledger (fsm.applyOne).
// The ledger's applied index, in the snapshot's header
// (pebblelog.SnapshotInfo.Applied), is the raft index of the last command
// batch it applied. So a snapshot whose content is at index a, named at
// index i, has a <= i, and the entries in (a, i] are no commands: the
// state at i is the state at a. Only the sender knows those entries; this
// node knows what it took in itself. Let A be raft's applied index here:
// every entry up to A has been handed to this node's FSM, and the ledger's
// applied index is the last command among them; committed entries are the
// same on every member, so an honest leader's batch at a <= A is one this
// node applied.
//
//   - a > i: refused, whoever sent it.
//   - a > A: the content is ahead of everything this node took in. The
//     ledger checks that it extends its history (pebblelog's restore
//     checks); the name is the sender's word, which mutual TLS makes a
//     member's (authtransport.go). Except when the ledger holds a already
//     (its applied index is at or past a, as in the window after a restart
//     before raft replayed its log): the content is then not newer than the
//     ledger, which would keep it, and its name, after A, cannot be
//     checked: refused.
//   - a <= A: the content is not newer than what this node took in. Its
//     name must be one raft already holds: i <= A, and the entry at i with
//     term t is this node's, in its raft log or as its last snapshot.
//     Recording it then changes nothing raft did not know: its applied
//     index goes back at most to an entry of its log or its last snapshot
//     (raft replays its log after it, and the ledger skips what it
//     applied), its last snapshot is an index and term it had, and no
//     entry is skipped. The FSM then requires the content to be the
//     ledger's own state (notLedgerState; pebblelog checks it is, by the
//     ledger's own tree): a state behind the ledger would be kept, and
//     served to followers, as the state at i.
//
// An honest resend passes: a leader whose InstallSnapshot answer was lost
// sends the same snapshot again (sendLatestSnapshot sends the newest it
// lists). The follower installed it the first time, so raft recorded it:
// its applied index is i and its last snapshot (i, t), and its ledger
// holds the content's state. Then a <= i = A, the name is raft's last
// snapshot, and the ledger finds its own state and keeps it.
//
// Refused, though an honest leader could send it: content at a <= A named
// at i > A, the entries in (A, i] being no-ops, barriers and configuration
// entries this node missed and its leader no longer holds in its log. A
// leader compacts its log only up to TrailingLogs entries before its last
// one, so that takes more than TrailingLogs (at least 1024) entries
// without a command after the snapshot's last batch, or that many appended
// while the leader persisted a snapshot taken right after an election. The
// follower then stays behind until its leader's next snapshot holds a
// command after a; raft sends it as soon as it is taken.

// ErrSnapshotIndex wraps the refusal of a received snapshot whose raft
// index is not one its content allows, or whose content is behind this
// node's ledger.
var ErrSnapshotIndex = errors.New("replicator: the snapshot is named at a raft index its content does not allow")

// indexView is what checkSnapshotIndex compares a received snapshot with:
// this node's raft state while raft installs it.
type indexView struct {
	raftApplied   uint64 // raft's applied index
	ledgerApplied uint64 // the ledger's applied index (it may still grow up to raftApplied)
	// holds reports whether raft holds the entry at index with term: in
	// its log, or as its last snapshot.
	holds func(index, term uint64) bool
}

// checkSnapshotIndex returns nil when a snapshot whose content is info may
// be installed at the index and term m names, and the refusal otherwise
// (the rules above).
func checkSnapshotIndex(m raft.SnapshotMeta, info pebblelog.SnapshotInfo, v indexView) error {
	a, i := info.Applied, m.Index
	switch {
	case a > i:
		return fmt.Errorf("%w: its ledger state is at raft index %d, after the index %d it is named at", ErrSnapshotIndex, a, i)
	case a > v.raftApplied && a <= v.ledgerApplied:
		return fmt.Errorf("%w: its ledger state (raft index %d) is not newer than this node's ledger (%d), and raft has applied only up to index %d here, "+
			"so the index %d it is named at cannot be checked", ErrSnapshotIndex, a, v.ledgerApplied, v.raftApplied, i)
	case a > v.raftApplied:
		return nil // ahead of this node: the ledger checks that it extends its history
	case i > v.raftApplied:
		return fmt.Errorf("%w: its ledger state (raft index %d) is one this node took in, but it is named at index %d, after this node's applied index %d: "+
			"raft would skip the entries in between", ErrSnapshotIndex, a, i, v.raftApplied)
	case !v.holds(i, m.Term):
		return fmt.Errorf("%w: it is named at raft index %d with term %d, which is not this node's entry at that index (in its raft log or its last snapshot)",
			ErrSnapshotIndex, i, m.Term)
	}
	return nil
}

// vetReceived is the snapshot store's vet: it reads the header of a
// received snapshot's state and checks its name before it is put in
// place, with raft's state as it installs it (raft's main loop, which runs
// the install, is waiting on it, so neither its applied index nor its log
// moves meanwhile), and logs and counts a refusal (a state that is not a
// ledger snapshot is one too: pebblelog.ErrBadSnapshot).
func (p *Replicator) vetReceived(m raft.SnapshotMeta, state io.Reader) error {
	info, err := pebblelog.ReadSnapshotInfo(state)
	if err == nil {
		err = checkSnapshotIndex(m, info, indexView{raftApplied: p.raft.AppliedIndex(), ledgerApplied: p.ledger.AppliedIndex(), holds: p.raftHolds})
	}
	if err != nil {
		// Nothing is in place: only the log line and the count remain.
		p.fsm.notInstalled(m, false, p.trans.takeInstallSender(), err)
	}
	return err
}

// raftHolds reports whether raft holds the entry at index with term: as its
// last snapshot, or in its log.
func (p *Replicator) raftHolds(index, term uint64) bool {
	st := p.raft.Stats()
	si, err1 := strconv.ParseUint(st["last_snapshot_index"], 10, 64)
	stt, err2 := strconv.ParseUint(st["last_snapshot_term"], 10, 64)
	if err1 == nil && err2 == nil && si == index && stt == term {
		return true
	}
	var l raft.Log
	return p.logs.GetLog(index, &l) == nil && l.Term == term
}

// notLedgerState returns the refusal of a received snapshot, named at
// index, whose content (at raft index info.Applied) is not newer than
// raft's applied index here (raftApplied) and yet is not the ledger's own
// state (the ledger's applied index is ledgerApplied, every entry raft
// applied having reached the FSM): see "What an honest snapshot looks
// like". nil when it is newer, or at the ledger's own index (the ledger
// checks that it holds that very state).
func notLedgerState(index uint64, info pebblelog.SnapshotInfo, raftApplied, ledgerApplied uint64) error {
	if info.Applied > raftApplied || info.Applied == ledgerApplied {
		return nil
	}
	return fmt.Errorf("%w: its ledger state is at raft index %d, and this node, which took in every entry up to %d, holds its ledger's at %d: "+
		"kept, that state would be taken for the one at index %d", ErrSnapshotIndex, info.Applied, raftApplied, ledgerApplied, index)
}
