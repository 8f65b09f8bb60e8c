package replicator

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events/pebblelog"
)

// appliedIndexSeeder is the optional capability seedCluster needs from a
// ledger that never was a member (pebblelog.Store has it): recording the
// raft index of the seed snapshot. Called before raft starts.
type appliedIndexSeeder interface {
	SeedAppliedIndex(index uint64) error
}

var _ appliedIndexSeeder = (*pebblelog.Store)(nil)

// seedCluster makes self the only voter of a new cluster whose history is
// the ledger's: it writes a raft snapshot of the ledger, at the ledger's
// applied index, whose configuration is self alone (an offline
// BootstrapCluster, as `etcdutl snapshot restore` writes a new member's
// state).
//
// Why not BootstrapCluster: it starts the raft log at index 1, and that
// log is every replica's history. A member joining later would replay it
// from index 1 onto its empty ledger, without the events the seed held
// before (a fork), and a ledger restored from a cluster member's backup
// records the raft index of its old cluster, so that the entries of the
// new log up to it would be skipped as already applied (a loss). With a
// seed snapshot, raft starts after it: new entries follow the ledger's
// index, and a member that joins installs the snapshot (the whole ledger)
// before any entry.
//
// A ledger that never was a member (applied index 0) is first given index
// 1: a follower installs a snapshot only when its index is above its own
// ledger's (pebblelog.Store.Restore), and a new member's is 0.
//
// REQUIRES: raft has not started on this node and has no state.
func seedCluster(snaps raft.SnapshotStore, ledger Ledger, self raft.Server, trans raft.Transport, log *slog.Logger) error {
	index := ledger.AppliedIndex()
	if index == 0 {
		index = 1
		ls, ok := ledger.(appliedIndexSeeder)
		if !ok {
			return errors.New("seed the cluster: this ledger cannot record a raft index; bootstrap over an empty ledger")
		}
		if err := ls.SeedAppliedIndex(index); err != nil {
			return fmt.Errorf("seed the cluster: %w", err)
		}
	}
	sn, err := ledger.Snapshot()
	if err != nil {
		return fmt.Errorf("seed the cluster: %w", err)
	}
	defer sn.Release()
	conf := raft.Configuration{Servers: []raft.Server{self}}
	// Term 1: the first term of the new cluster; its first election
	// starts term 1 (raft's stored term is 0), which is not below the
	// snapshot's, as raft requires.
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, conf, index, trans)
	if err != nil {
		return fmt.Errorf("seed the cluster: create the snapshot: %w", err)
	}
	markLocal(sink) // the ledger's own state, not a snapshot received
	if _, err := sn.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("seed the cluster: write the snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("seed the cluster: %w", err)
	}
	log.Info("seeded a new cluster with the ledger's history", "events", sn.Info().Head.Size, "raft_index", index)
	return nil
}
