package quota

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestQuota_CapsPerPrincipalAndInTotal walks one quota of 2 per principal
// and 3 in total through acquisitions and releases.
func TestQuota_CapsPerPrincipalAndInTotal(t *testing.T) {
	q := New("things", 2, 3)
	held := map[string][]func(){}
	steps := []struct {
		op, who string
		want    Scope // "" : taken (or released)
	}{
		{"take", "a", ""},
		{"take", "a", ""},
		{"take", "a", ScopePrincipal}, // a holds its 2
		{"take", "b", ""},
		{"take", "b", ScopeTotal}, // the node holds its 3
		{"take", "c", ScopeTotal},
		{"give", "a", ""},
		{"take", "c", ""}, // a's slot is free for anyone
		{"take", "a", ScopeTotal},
		{"give", "b", ""},
		{"give", "b", ""}, // a release runs once, whatever its calls
		{"take", "a", ""},
	}
	for i, st := range steps {
		switch st.op {
		case "take":
			release, refused := q.Acquire(st.who)
			if refused != st.want || (release == nil) != (st.want != "") {
				t.Fatalf("step %d: %s takes: refused %q (release %v), want %q", i, st.who, refused, release != nil, st.want)
			}
			if release != nil {
				held[st.who] = append(held[st.who], release)
			}
		case "give":
			held[st.who][0]()
		}
	}
	want := Stats{Name: "things", Held: 3, PerPrincipal: 2, Total: 3, RefusedPrincipal: 1, RefusedTotal: 3}
	if diff := cmp.Diff(want, q.Stats()); diff != "" {
		t.Fatalf("stats (-want +got):\n%s", diff)
	}
	q.Dropped()
	if got := q.Stats().Dropped; got != 1 {
		t.Fatalf("dropped %d", got)
	}
	if q.Limit(ScopePrincipal) != 2 || q.Limit(ScopeTotal) != 3 {
		t.Fatalf("limits %d %d", q.Limit(ScopePrincipal), q.Limit(ScopeTotal))
	}
}
