package replicator

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
)

// How a member learns that it was removed, from committed configurations
// only (issue #20, finding 2).
//
// Raft's latest configuration includes entries not yet committed: one
// AppendEntries holding a configuration without this node made it look
// removed, and it stopped for good. A configuration that is not committed
// may still be replaced (a new leader truncates it), so a removal is acted
// on only once committed: when this node applies a committed configuration
// entry (the FSM receives them in batching mode), stores a snapshot (whose
// configuration is the committed one at its index), or hears from the
// leader that the leader's own committed configuration lacks it. The last
// is how a removed follower usually learns it: the leader stops
// replicating to a member as soon as it appends the entry that removes it,
// so the member receives that entry but never the commit index that covers
// it.
//
// Only a node that has seen itself in a committed configuration can be
// removed, and only by a newer one: a joiner's first configuration (the
// leader's snapshot, taken before the entry that added it) lacks it, and
// is no removal. The index of the newest committed configuration that
// lists this node is kept in the raft stable store, so that a member that
// restarts still knows it was one.

// memberSinceKey holds, in the raft stable store, removalWatch.selfIndex
// (8 bytes, big-endian).
var memberSinceKey = []byte("greffe_member_config_index")

// removalWatch follows the committed configurations this node learns of.
// Safe for concurrent use: the FSM goroutine, raft's snapshot goroutine and
// the maintain loop call it.
type removalWatch struct {
	self string
	// persist stores selfIndex; called outside mu, under persistMu, with
	// growing values only.
	persist   func(index uint64) error
	persistMu sync.Mutex
	persisted uint64 // guarded by persistMu

	mu struct {
		sync.Mutex
		// selfIndex is the index of the newest committed configuration
		// that lists this node; 0 while it has seen none.
		selfIndex uint64
		// index and members are the newest committed configuration this
		// node knows; index 0 while it knows none.
		index   uint64
		members []string
		// removedAt is the index of the committed configuration that
		// removed this node; 0 while it was not removed.
		removedAt uint64
	}
}

func newRemovalWatch(self string, since uint64, persist func(uint64) error) *removalWatch {
	w := &removalWatch{self: self, persist: persist, persisted: since}
	w.mu.selfIndex = since
	return w
}

// loadMemberSince reads memberSinceKey (0 when absent).
func loadMemberSince(logs *LogStore) (uint64, error) {
	raw, err := logs.Get(memberSinceKey)
	if err != nil || len(raw) == 0 {
		return 0, err
	}
	if len(raw) != 8 {
		return 0, fmt.Errorf("raft stable %s: %d bytes, want 8", memberSinceKey, len(raw))
	}
	return binary.BigEndian.Uint64(raw), nil
}

func storeMemberSince(logs *LogStore, index uint64) error {
	return logs.Set(memberSinceKey, binary.BigEndian.AppendUint64(nil, index))
}

// committed takes in the committed configuration c at index. Older ones
// than the newest known are ignored (the FSM replays entries after a
// restart).
func (w *removalWatch) committed(index uint64, c raft.Configuration) {
	members := make([]string, 0, len(c.Servers))
	for _, s := range c.Servers {
		members = append(members, string(s.ID))
	}
	w.mu.Lock()
	if index <= w.mu.index {
		w.mu.Unlock()
		return
	}
	w.mu.index, w.mu.members = index, members
	grown := uint64(0)
	switch {
	case slices.Contains(members, w.self):
		w.mu.selfIndex, w.mu.removedAt, grown = index, 0, index
	case w.mu.selfIndex != 0 && index > w.mu.selfIndex && w.mu.removedAt == 0:
		w.mu.removedAt = index
	}
	w.mu.Unlock()
	if grown != 0 {
		w.store(grown)
	}
}

// store persists selfIndex when it grew. A failed write only means that a
// restart right now would not know this node was a member, which delays
// nothing but the detection of a removal; it is retried at the next
// configuration.
func (w *removalWatch) store(index uint64) {
	w.persistMu.Lock()
	defer w.persistMu.Unlock()
	if index <= w.persisted || w.persist == nil {
		return
	}
	if err := w.persist(index); err == nil {
		w.persisted = index
	}
}

// leaderSays takes in the committed configuration the leader announced
// (its info): index and members. It reports whether that removes this
// node: the leader's configuration is newer than the newest that lists
// this node, and lacks it. REQUIRES: the caller checked that the answer
// comes from a member that leads in a term at least this node's.
func (w *removalWatch) leaderSays(index uint64, members []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.selfIndex == 0 || index <= w.mu.selfIndex || slices.Contains(members, w.self) {
		return false
	}
	if w.mu.removedAt == 0 {
		w.mu.removedAt = index
	}
	return true
}

// removed reports whether a committed configuration removed this node.
func (w *removalWatch) removed() bool { return w.removedAt() != 0 }

// removedAt returns the index of the committed configuration that removed
// this node, 0 when none did.
func (w *removalWatch) removedAt() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.removedAt
}

// view returns the newest committed configuration known: its index and
// members (index 0: none yet).
func (w *removalWatch) view() (index uint64, members []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.index, slices.Clone(w.mu.members)
}
