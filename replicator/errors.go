package replicator

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events"
)

// Error codes of the replicator (docs/API.md, docs/CLUSTER.md). They are
// part of the public contract: never renamed, never reused.
const (
	// CodeNotLeader: this node does not lead, so it cannot order the write
	// or serve the verified read; nothing was written. Details carry the
	// leader's id and raft address when one is known.
	CodeNotLeader = "not_leader"
	// CodeLeaderUnreachable: a leader is elected but does not answer; the
	// request was not sent to it (nothing written); retry.
	CodeLeaderUnreachable = "leader_unreachable"
	// CodeLedgerMismatch: a node of another ledger asked to join.
	CodeLedgerMismatch = "ledger_mismatch"
	// CodeUnknownNode: the node id is not a member of the cluster.
	CodeUnknownNode = "unknown_node"
	// CodeMemberConflict: the node id is a member with another raft address.
	CodeMemberConflict = "member_conflict"
	// CodeReplicationFailed: raft refused the operation before writing it
	// (enqueue timeout, a configuration change already in flight); retry.
	CodeReplicationFailed = "replication_failed"
)

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

// ErrorCode returns not_leader.
func (e *NotLeaderError) ErrorCode() string { return CodeNotLeader }

// HTTPStatus is 503: the request may be retried as it is.
func (e *NotLeaderError) HTTPStatus() int { return http.StatusServiceUnavailable }

// ErrorDetails returns the leader's id and raft address.
func (e *NotLeaderError) ErrorDetails() map[string]any {
	return map[string]any{"leader_id": e.LeaderID, "leader_raft_addr": e.LeaderAddr}
}

// Error is a refusal or failure of the replicator with a stable code.
type Error struct {
	Code    string
	Status  int // HTTP status the API answers with
	Message string
	Err     error // the cause, when there is one
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

// HTTPStatus returns the status the API answers with.
func (e *Error) HTTPStatus() int { return e.Status }

// errorf builds an *Error.
func errorf(code string, status int, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Status: status, Message: fmt.Sprintf(format, args...), Err: cause}
}

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
		return errorf(CodeReplicationFailed, http.StatusServiceUnavailable, err, "raft did not take the operation; nothing was written, retry")
	case errors.Is(err, raft.ErrCantBootstrap):
		return errorf(CodeReplicationFailed, http.StatusConflict, err, "the cluster already exists")
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
