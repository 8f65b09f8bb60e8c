package replicator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

// TestRemovalWatch: a node concludes it was removed only from a committed
// configuration (its own, or the leader's announced one) that is newer
// than the newest listing it, and only once it has seen itself in one. A
// joiner's first configuration, from the snapshot the leader sent it
// (taken before the entry that added it), lacks it, and is no removal; an
// older configuration replayed after a restart changes nothing.
func TestRemovalWatch(t *testing.T) {
	conf := func(ids ...string) raft.Configuration {
		var c raft.Configuration
		for _, id := range ids {
			c.Servers = append(c.Servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1")})
		}
		return c
	}
	// One step: a committed configuration at an index, or (leader true)
	// the leader's announced committed configuration; then whether the
	// node ("m2") concludes it was removed.
	type step struct {
		Index   uint64
		Members []string
		Leader  bool
		Removed bool
	}
	tests := []struct {
		name  string
		since uint64 // persisted from an earlier run
		steps []step
	}{
		{"a joiner: the snapshot's configuration, then the one that adds it", 0, []step{
			{2, []string{"m1"}, false, false}, {5, []string{"m1", "m2"}, false, false}, {6, []string{"m1", "m2"}, false, false}}},
		{"a joiner the leader's answer lacks before its addition commits", 0, []step{
			{2, []string{"m1"}, false, false}, {2, []string{"m1"}, true, false}}},
		{"a member removed by a committed entry", 0, []step{
			{5, []string{"m1", "m2"}, false, false}, {9, []string{"m1"}, false, true}}},
		{"a member the leader says is removed", 0, []step{
			{5, []string{"m1", "m2"}, false, false}, {9, []string{"m1"}, true, true}}},
		{"a stale leader's older configuration is no removal", 0, []step{
			{5, []string{"m1", "m2"}, false, false}, {3, []string{"m1"}, true, false}}},
		{"an older entry replayed after a restart changes nothing", 7, []step{
			{4, []string{"m1"}, false, false}, {7, []string{"m1", "m2"}, false, false}}},
		{"a restarted member remembers it was one", 7, []step{
			{9, []string{"m1", "m3"}, true, true}}},
		{"a joiner added, then removed", 0, []step{
			{2, []string{"m1"}, false, false}, {4, []string{"m1", "m2"}, false, false}, {8, []string{"m1", "m3"}, false, true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stored []uint64
			w := newRemovalWatch("m2", tc.since, func(i uint64) error { stored = append(stored, i); return nil })
			var got, want []bool
			for _, s := range tc.steps {
				if s.Leader {
					w.leaderSays(s.Index, s.Members)
				} else {
					w.committed(s.Index, conf(s.Members...))
				}
				got = append(got, w.removed())
				want = append(want, s.Removed)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("removed, step by step (-want +got):\n%s", diff)
			}
			for i := 1; i < len(stored); i++ {
				if stored[i] <= stored[i-1] {
					t.Errorf("stored indexes %v do not grow", stored)
				}
			}
		})
	}
}
