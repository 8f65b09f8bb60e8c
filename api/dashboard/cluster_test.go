package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// clusterMember starts an in-process member with raft timeouts short
// enough for a test; stop stops it (idempotent; cleanup calls it too).
func clusterMember(t *testing.T, id string, cc node.ClusterConfig) (*node.Node, func()) {
	t.Helper()
	cc.RaftAddr = "127.0.0.1:0"
	cc.Raft.HeartbeatTimeout, cc.Raft.ElectionTimeout = 300*time.Millisecond, 300*time.Millisecond
	cc.Raft.LeaderLeaseTimeout, cc.Raft.MaintainInterval = 150*time.Millisecond, 100*time.Millisecond
	n, err := node.Open(node.Config{DataDir: t.TempDir(), NodeID: id, API: api.Config{Addr: "127.0.0.1:0"}, Cluster: cc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", id, err)
			}
		})
	}
	t.Cleanup(stop)
	return n, stop
}

// clusterStatus reads GET /v1/cluster/status.
func clusterStatus(ctx context.Context, url string) (wire.Status, error) {
	var st wire.Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/cluster/status", nil)
	if err != nil {
		return st, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return st, fmt.Errorf("cluster status: %s", res.Status)
	}
	return st, json.NewDecoder(res.Body).Decode(&st)
}

// memberRow is one row of the cluster panel.
type memberRow struct {
	ID, Role, State, Term, Lag string
	Reachable, Leader          bool
}

// TestDashboard_Cluster opens the page on the leader of a two-member
// cluster: the cluster panel lists both members with the leader, the
// term and the applied index the API states and each member's lag behind
// the leader; once the follower is stopped, the panel shows it
// unreachable, its lag unknown.
func TestDashboard_Cluster(t *testing.T) {
	chromium := requireChromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	n1, _ := clusterMember(t, "n1", node.ClusterConfig{Bootstrap: true})
	// Raft exposes no leadership event a test could wait on: poll the
	// node's own view, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for n1.Replicator().ReadBarrier(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatal("n1 did not become leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, stop2 := clusterMember(t, "n2", node.ClusterConfig{Join: n1.URL()})

	b := startBrowser(t, chromium)
	p, err := b.open(ctx, n1.URL()+"/")
	if err != nil {
		t.Fatal(err)
	}
	rows := func() []memberRow {
		t.Helper()
		var rs []memberRow
		if err := p.eval(ctx, `Array.from(document.querySelectorAll('#cluster-members tbody tr')).map((tr) => ({
			id: tr.dataset.member, role: tr.cells[1].textContent, state: tr.cells[2].textContent, term: tr.cells[3].textContent,
			lag: tr.cells[5].dataset.lag, reachable: tr.dataset.reachable === 'true', leader: tr.dataset.leader === 'true' }))`, &rs); err != nil {
			t.Fatal(err)
		}
		return rs
	}
	both := `document.querySelector('#cluster').dataset.mode === 'cluster' && document.querySelectorAll('#cluster-members tr[data-reachable="true"]').length === 2`
	if err := p.waitFor(ctx, "both members in the cluster panel", both, 20*time.Second); err != nil {
		t.Fatalf("%v: %+v", err, rows())
	}
	st, err := clusterStatus(ctx, n1.URL())
	if err != nil {
		t.Fatal(err)
	}
	var facts struct{ Leader, Term, Applied string }
	if err := p.eval(ctx, `({leader: document.querySelector('#cluster-leader').textContent, term: document.querySelector('#cluster-term').textContent,
		applied: document.querySelector('#cluster-applied').textContent})`, &facts); err != nil {
		t.Fatal(err)
	}
	if facts.Leader != "n1 at "+n1.URL() || facts.Term != fmt.Sprint(st.Term) {
		t.Errorf("cluster facts %+v; want leader n1 at %s, term %d", facts, n1.URL(), st.Term)
	}
	// The applied index moves with raft's own entries: the page's is one
	// the node stated, no later than now.
	if a, err := strconv.ParseUint(facts.Applied, 10, 64); err != nil || a == 0 || a > st.AppliedIndex {
		t.Errorf("applied index %q, the API now says %d", facts.Applied, st.AppliedIndex)
	}
	got := rows()
	slices.SortFunc(got, func(a, b memberRow) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	for i := range got {
		// n2's suffrage and lag move as it catches up: keep whether the
		// page knew its lag. The leader never lags behind itself.
		got[i].Role = ""
		if !got[i].Leader && got[i].Lag != "" {
			got[i].Lag = "known"
		}
	}
	want := []memberRow{
		{ID: "n1", State: "Leader", Term: fmt.Sprint(st.Term), Lag: "0", Reachable: true, Leader: true},
		{ID: "n2", State: "Follower", Term: fmt.Sprint(st.Term), Lag: "known", Reachable: true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("cluster members (-want +got):\n%s", d)
	}

	// The follower stops: after a refresh (the token form's "use"), the
	// panel shows it unreachable and its lag unknown.
	stop2()
	if err := p.eval(ctx, `document.querySelector('#token-form').requestSubmit()`, nil); err != nil {
		t.Fatal(err)
	}
	down := `document.querySelector('#cluster-members tr[data-member="n2"][data-reachable="false"]') !== null`
	if err := p.waitFor(ctx, "n2 unreachable in the cluster panel", down, 10*time.Second); err != nil {
		t.Fatalf("%v: %+v", err, rows())
	}
	for _, r := range rows() {
		if r.ID == "n2" && (r.Lag != "" || r.State != "unreachable") {
			t.Errorf("stopped member n2: %+v; want unreachable, lag unknown", r)
		}
	}
}
