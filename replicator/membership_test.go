package replicator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

// TestSelfRemoved: a node's own view of the configuration says it was
// removed only once it has seen itself in it. A joiner's first view, from
// the snapshot the leader sent it (taken before the entry that added it),
// lacks it, and is not a removal.
func TestSelfRemoved(t *testing.T) {
	only := func(ids ...string) []raft.Server {
		var out []raft.Server
		for _, id := range ids {
			out = append(out, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1")})
		}
		return out
	}
	// The views of one node ("m2") over time, each with what it concludes.
	type step struct {
		View    []raft.Server
		Removed bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a joiner: the snapshot's configuration, then the one that adds it", []step{
			{only("m1"), false}, {only("m1", "m2"), false}, {only("m1", "m2"), false}}},
		{"a member removed", []step{
			{only("m1", "m2"), false}, {only("m1"), true}}},
		{"a joiner added, then removed", []step{
			{only("m1"), false}, {only("m1", "m2"), false}, {only("m1", "m3"), true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var was bool
			var got []bool
			want := make([]bool, len(tc.steps))
			for i, s := range tc.steps {
				got = append(got, selfRemoved(s.View, "m2", &was))
				want[i] = s.Removed
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("removed, step by step (-want +got):\n%s", diff)
			}
		})
	}
}
