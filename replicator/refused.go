package replicator

import (
	"errors"
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events/pebblelog"
)

// What becomes of a snapshot the ledger refuses (issue #20).
//
// Raft installs a snapshot it receives in three steps (installSnapshot in
// hashicorp/raft v1.8.0's raft.go): it writes it into the snapshot store
// and closes the sink, asks the FSM to restore it (runFSM opens it by the
// sink's id), and only if Restore succeeded sets its applied index, its
// last snapshot (index and term), its configuration, and compacts its log.
// When Restore fails, raft answers the RPC with the error and records
// nothing: its last snapshot, applied index, configuration and log are
// those from before. The snapshot, though, stays in the store, and raft
// reads the store again: as leader, it sends the newest listed snapshot to
// a follower that needs one (sendLatestSnapshot), and at a start it takes
// its applied index and configuration from the newest one
// (NoSnapshotRestoreOnStart). A forged history that the ledger refused
// (pebblelog.ErrSnapshotForks, ErrBadSnapshot, ErrIncompatible) stayed
// this node's newest snapshot (its attacker picks the term in its name):
// the node did not start again (catchUpFromSnapshot restored it, and was
// refused), and, leading, it would have sent the forged history to a new
// member, whose empty ledger takes it.
//
// So the store hides a snapshot it received until the ledger has taken it
// (snapshots.go, Received snapshots). It knows a received snapshot from the
// node's own by the sink (FSMSnapshot.Persist and the seed mark theirs
// local), and which one raft is restoring by what raft opens: a hidden
// snapshot is never listed, so only the restore of its install opens it,
// by the id raft got from the sink, just before it calls the FSM's
// Restore. Neither "the newest snapshot" nor "one above the applied
// index" would do: the attacker names the first, and the node's own snapshots
// have indexes above the ledger's (raft counts no-op and configuration
// entries). When the ledger does not install it, the FSM removes it from
// the store, logs it at error level with its id, its sender and the
// reason, and counts it (Status.RefusedSnapshots). Since raft recorded
// nothing of it, its removal leaves raft as it was before the RPC: it
// never names that snapshot as its last, and never compacts its log past
// it. A snapshot that failed for another reason (an I/O error) is removed
// too: raft did not record it either, and the leader sends it again.
//
// catchUpFromSnapshot does the same at a start, for what a crash between
// raft saving a received snapshot and the ledger answering leaves, before
// raft reads the store: such a snapshot is marked received on disk, and
// checked whether or not it is ahead of the ledger.
//
// The ledger checks what a snapshot holds; the raft index and term raft
// records for it are the RPC's, and are checked before the snapshot is
// even put in place (snapindex.go): a refusal there (ErrSnapshotIndex) is
// logged and counted the same way, with nothing to remove.
//
// The sender of an InstallSnapshot is the id its header states, which
// with mutual TLS is the member its certificate names (authtransport.go).
// A member whose snapshot the ledger refuses is faulty, or its key is in
// other hands: the log line says so.

// isRefusal reports whether err is this node refusing a snapshot, for
// what it holds (the ledger's refusals) or for the raft index it is named
// at (ErrSnapshotIndex), as opposed to failing to install one.
func isRefusal(err error) bool {
	return errors.Is(err, pebblelog.ErrSnapshotForks) || errors.Is(err, pebblelog.ErrBadSnapshot) || errors.Is(err, pebblelog.ErrIncompatible) ||
		errors.Is(err, ErrSnapshotIndex)
}

// snapshotSender is who sent an InstallSnapshot: the id its header states,
// whether the connection's certificate names that id, and the connection's
// remote address. The zero value is an unknown sender.
type snapshotSender struct {
	id            string
	authenticated bool
	remote        string
}

// notInstalled logs, counts and removes from the store the received
// snapshot m (received false: none known) that the ledger did not install
// with err.
func (f *fsm) notInstalled(m raft.SnapshotMeta, received bool, from snapshotSender, err error) {
	attrs := []any{"snapshot", m.ID, "index", m.Index, "term", m.Term,
		"sender", from.id, "sender_authenticated", from.authenticated, "remote", from.remote, "err", err}
	switch {
	case isRefusal(err) && from.authenticated:
		f.refused.Add(1)
		f.log.Error("refused a raft snapshot from a cluster member (its certificate names it): this node does not take it (err says why: its ledger, or the raft index it is named at); "+
			"that member is faulty or its key is in other hands; removed the snapshot from the snapshot store", attrs...)
	case isRefusal(err):
		f.refused.Add(1)
		f.log.Error("refused a raft snapshot: this node does not take it (err says why: its ledger, or the raft index it is named at); removed it from the snapshot store", attrs...)
	default:
		f.log.Error("could not install a raft snapshot; removed it from the snapshot store (the leader sends it again)", attrs...)
	}
	if !received {
		return
	}
	if err := f.snaps.discard(m.ID); err != nil {
		f.log.Error("could not remove a raft snapshot the ledger did not install: it stays hidden, and is checked again at the next start",
			"snapshot", m.ID, "err", err)
	}
}

// senderBody is the body of an InstallSnapshot that the transport let
// through: raft's main loop reads it into the snapshot store just before
// it restores it, so its first read records its sender for the FSM.
type senderBody struct {
	io.Reader
	from *snapshotSender
	at   *atomic.Pointer[snapshotSender]
	read bool // only raft's main loop reads the body
}

func (b *senderBody) Read(p []byte) (int, error) {
	if !b.read {
		b.read = true
		b.at.Store(b.from)
	}
	return b.Reader.Read(p)
}
