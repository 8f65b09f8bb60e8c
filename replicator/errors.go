package replicator

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// The replicator's error codes are the cluster's, in package wire
// (wire/cluster.go): part of the public contract, never renamed, never
// reused. Each error says what happened to the request with an
// events.Kind; the API turns the kind and the code into an HTTP status
// (api/errors.go), nothing here knows HTTP.

// ErrNotLeader matches every *NotLeaderError with errors.Is.
var ErrNotLeader = errors.New("replicator: not the leader")

// NotLeaderError says that this node cannot serve the request because it
// does not lead. Nothing was written. LeaderID and LeaderAddr name the
// leader this node knows of; both are empty while no leader is elected.
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "not_leader: no leader is elected at the moment; retry shortly"
	}
	return fmt.Sprintf("not_leader: the leader is %s (raft %s); send the request there or retry", e.LeaderID, e.LeaderAddr)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// CodedError describes the error: not_leader, a failure (nothing written;
// the request may be sent again as it is, to the leader), with the
// leader's id and raft address in Details.
func (e *NotLeaderError) CodedError() *events.Error {
	return &events.Error{Code: wire.CodeNotLeader, Kind: events.KindFailed, Message: e.Error(), Err: e,
		Details: map[string]any{"leader_id": e.LeaderID, "leader_raft_addr": e.LeaderAddr}}
}

var _ events.Coded = (*NotLeaderError)(nil)

// translate maps a raft error of an operation that may have been written
// (an Apply, a membership change) to the replicator's vocabulary. Raft's
// errors never leave this package untranslated.
func (p *Replicator) translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return p.notLeader()
	case errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrUnsupportedProtocol):
		// Never enqueued: nothing was written.
		return events.Errorf(wire.CodeReplicationFailed, events.KindFailed, err, "raft did not take the operation; nothing was written, retry")
	case errors.Is(err, raft.ErrCantBootstrap):
		return events.Errorf(wire.CodeReplicationFailed, events.KindRefused, err, "the cluster already exists")
	}
	// ErrLeadershipLost, ErrRaftShutdown, ErrAbortedByRestore and anything
	// unforeseen: the entry may have reached a quorum.
	return fmt.Errorf("%w: %v", events.ErrOutcomeUnknown, err)
}

// notLeader returns the error naming the current leader.
func (p *Replicator) notLeader() error {
	addr, id := p.raft.LeaderWithID()
	return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
}
