package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/export/kafka"
	"github.com/greffe/greffe/internal/faultfs"
	"github.com/greffe/greffe/replicator"
	"github.com/greffe/greffe/wire"
)

// serveNode opens a node with cfg (a new data folder and a loopback
// address filled in) and serves it until the test ends (serveAt).
func serveNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	return serveAt(t, t.TempDir(), cfg)
}

// scrape reads GET /metrics and parses it as Prometheus would.
func scrape(t *testing.T, ctx context.Context, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", res.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample returns the value of the series of a family with the given
// labels (name=value pairs): a gauge's or counter's value, a histogram's
// count; -1 when there is no such series.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// readyz reads GET /readyz.
func readyz(t *testing.T, ctx context.Context, url string) (int, Readiness) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r Readiness
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatalf("decode /readyz: %v", err)
	}
	return res.StatusCode, r
}

// TestNode_Metrics scrapes a real node before and after appends, commands
// and refusals, with an SSE subscription open: the counters, histograms
// and gauges move by what was done.
func TestNode_Metrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n := serveNode(t, Config{})
	c := client.New(n.URL(), "")

	before := scrape(t, ctx, n.URL())
	if got := sample(before, "greffe_node_info", "node_id", "n1", "ledger_id", n.Store.LedgerID(), "version", Version); got != 1 {
		t.Errorf("greffe_node_info: %v", got)
	}
	if _, ok := before["greffe_raft_state"]; ok {
		t.Error("a single node exports raft metrics")
	}

	// Three appends of two events, one command that appends, four
	// refusals of three codes.
	for i := range 3 {
		if _, err := c.Append(ctx, fmt.Sprintf("orders-%d", i), events.ExpectAny, []wire.EventIn{
			{Type: "OrderPlaced", Data: json.RawMessage(`{"qty":1}`)}, {Type: "OrderPaid", Data: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	commands := []struct {
		cmd, data, refused string
	}{
		{"DeclareProvider", `{"name":"m-local","kind":"local","profile":"local_ollama","endpoint":"http://127.0.0.1:11434/v1","model_tag":"glm-4.7-flash:q4_K_M","capabilities":["chat"],"task_classes":["code"],"scope":"","binding_required":false}`, ""},
		{"RevokeApproval", `{"approval_id":"never-granted","reason":"cleanup"}`, "approval_missing"},
		{"ActivateProvider", `{"name":"m-local","approval_id":"","binding_id":""}`, "limits_unknown"},
		{"RevokeApproval", `{"approval_id":"never-granted-either","reason":"cleanup"}`, "approval_missing"},
		{"GrantApproval", `{"approval_id":"old","approver":"owner","action":"activation","subject":"provider-m-local","uses":1,"expires_at":"2000-01-01T00:00:00Z"}`, "approval_expiry_past"},
	}
	for i, cmd := range commands {
		_, err := c.Command(ctx, wire.CommandIn{Command: cmd.cmd, ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1), Actor: "owner", Data: json.RawMessage(cmd.data)})
		var ae *wire.Error
		switch {
		case cmd.refused == "" && err != nil:
			t.Fatalf("%s: %v", cmd.cmd, err)
		case cmd.refused != "" && (!errors.As(err, &ae) || ae.Code != cmd.refused):
			t.Fatalf("%s: %v, want refused %s", cmd.cmd, err, cmd.refused)
		}
	}
	head := n.Store.Head().Size
	// The read models have folded everything; the latest checkpoint
	// covers the head.
	if _, err := c.Projection(ctx, "readiness", client.ProjectionQuery{MinPosition: head}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"approvals", "audit", "bindings", "measurements", "missions"} {
		if err := n.Projections.WaitFor(ctx, name, head); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Checkpoint(ctx, 0); err != nil {
		t.Fatal(err)
	}

	// An SSE subscription of the refusals: it counts, and once it was sent
	// the last event of the log (the last refusal) it is not
	// behind (it skipped the other streams' events).
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/subscribe?from=0&stream_prefix=refusals", n.URL()), nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && sc.Text() != fmt.Sprintf("id: %d", head-1) {
	}

	after := scrape(t, ctx, n.URL())
	got := map[string]float64{}
	for _, s := range []struct {
		key, name string
		labels    []string
	}{
		{"log events", "greffe_log_events", nil},
		{"appended events", "greffe_appended_events_total", nil},
		{"append requests", "greffe_append_requests_total", nil},
		{"append latencies", "greffe_append_duration_seconds", nil},
		{"refused approval_missing", "greffe_commands_refused_total", []string{"code", "approval_missing"}},
		{"refused limits_unknown", "greffe_commands_refused_total", []string{"code", "limits_unknown"}},
		{"refused approval_expiry_past", "greffe_commands_refused_total", []string{"code", "approval_expiry_past"}},
		{"sse subscriptions", "greffe_sse_subscriptions", nil},
		{"sse max lag", "greffe_sse_subscription_max_lag_events", nil},
		{"readiness lag", "greffe_projection_lag_events", []string{"projection", "readiness"}},
		{"readiness position", "greffe_projection_position", []string{"projection", "readiness"}},
		{"readiness failed", "greffe_projection_failed", []string{"projection", "readiness"}},
		{"checkpoint size", "greffe_checkpoint_size_events", nil},
		{"wal replayed", "greffe_wal_replayed_records", nil},
	} {
		got[s.key] = sample(after, s.name, s.labels...)
	}
	// Appends: 3 raw, 1 command, 4 refusals (each appends its
	// CommandRefused event): 8 calls, 6 + 1 + 4 events.
	want := map[string]float64{
		"log events": float64(head), "appended events": 11, "append requests": 8, "append latencies": 8,
		"refused approval_missing": 2, "refused limits_unknown": 1, "refused approval_expiry_past": 1,
		"sse subscriptions": 1, "sse max lag": 0,
		"readiness lag": 0, "readiness position": float64(head), "readiness failed": 0,
		"checkpoint size": float64(head),
		"wal replayed":    0, // a new node: nothing to replay (sample gives -1 for a missing metric)
	}
	if head != 11 {
		t.Errorf("head %d, want 11", head)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("metrics after the writes (-want +got):\n%s", d)
	}
	// Values that only have to have moved.
	for _, name := range []string{"greffe_commit_batch_events", "greffe_fsync_duration_seconds", "greffe_log_last_append_timestamp_seconds"} {
		if b, a := sample(before, name), sample(after, name); a <= b {
			t.Errorf("%s: %v after the writes, %v before", name, a, b)
		}
	}
	if v := sample(after, "greffe_log_bytes"); v <= 0 {
		t.Errorf("greffe_log_bytes: %v", v)
	}
	if v := sample(after, "greffe_checkpoint_age_seconds"); v < 0 {
		t.Errorf("greffe_checkpoint_age_seconds: %v (-1: absent)", v)
	}
	if got := sample(before, "greffe_commands_refused_total", "code", "approval_missing"); got != -1 {
		t.Errorf("refusals before any command: %v", got)
	}

	code, r := readyz(t, ctx, n.URL())
	if d := cmp.Diff(Readiness{Ready: true, Head: head}, r); code != http.StatusOK || d != "" {
		t.Errorf("/readyz: %d (-want +got):\n%s", code, d)
	}
}

// TestNode_ReadyCluster: a cluster member that knows no leader is not
// ready (503, no_leader); a member that leads is ready, and its raft
// metrics say so.
func TestNode_ReadyCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	fast := replicator.Config{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond, MaintainInterval: 100 * time.Millisecond}

	// Neither bootstrapped nor joined: a member waiting to be added.
	lone := serveNode(t, Config{NodeID: "n9", Cluster: ClusterConfig{RaftAddr: "127.0.0.1:0", Raft: fast}})
	code, r := readyz(t, ctx, lone.URL())
	if code != http.StatusServiceUnavailable || r.Ready || len(r.Reasons) != 1 || r.Reasons[0].Code != CodeNoLeader {
		t.Errorf("/readyz of a member without a leader: %d %+v", code, r)
	}
	if v := sample(scrape(t, ctx, lone.URL()), "greffe_raft_has_leader"); v != 0 {
		t.Errorf("greffe_raft_has_leader without a leader: %v", v)
	}

	n := serveNode(t, Config{NodeID: "n1", Cluster: ClusterConfig{RaftAddr: "127.0.0.1:0", Bootstrap: true, Raft: fast}})
	// Raft exposes no leadership event a test could wait on without
	// taking it from the replicator: poll the node's own view, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for n.Ready().Leader != "n1" {
		if time.Now().After(deadline) {
			t.Fatalf("n1 did not become leader: %+v", n.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := client.New(n.URL(), "").Append(ctx, "orders-1", events.ExpectAny, []wire.EventIn{{Type: "OrderPlaced"}}); err != nil {
		t.Fatal(err)
	}
	code, r = readyz(t, ctx, n.URL())
	if code != http.StatusOK || !r.Ready || r.Leader != "n1" {
		t.Errorf("/readyz of the leader: %d %+v", code, r)
	}
	fams := scrape(t, ctx, n.URL())
	got := map[string]bool{
		"leader":         sample(fams, "greffe_raft_state", "state", "Leader") == 1,
		"not follower":   sample(fams, "greffe_raft_state", "state", "Follower") == 0,
		"has leader":     sample(fams, "greffe_raft_has_leader") == 1,
		"commit index":   sample(fams, "greffe_raft_commit_index") >= 2,
		"applied index":  sample(fams, "greffe_raft_applied_index") >= 1,
		"one member":     sample(fams, "greffe_raft_members") == 1,
		"no refused RPC": sample(fams, "greffe_raft_refused_rpcs_total") == 0,
		"appended event": sample(fams, "greffe_appended_events_total") == 1,
	}
	for what, ok := range got {
		if !ok {
			t.Errorf("cluster metrics: %s is wrong", what)
		}
	}
	if t.Failed() {
		var b strings.Builder
		for name, f := range fams {
			if strings.HasPrefix(name, "greffe_raft") || strings.HasPrefix(name, "greffe_append") {
				fmt.Fprintf(&b, "%s %v\n", name, f.GetMetric())
			}
		}
		t.Log(b.String())
	}
}

// TestNode_MetricsKafkaExport: with the Kafka export on, the exporter's
// position and lag are metrics; once it has exported the head, the lag is
// 0.
func TestNode_MetricsKafkaExport(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "ledger"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	exported := make(chan uint64, 16)
	n := serveNode(t, Config{Ecosystem: EcosystemConfig{Kafka: kafka.Config{Brokers: kc.ListenAddrs(), Topic: "ledger",
		Progress: func(ex uint64) {
			select {
			case exported <- ex:
			default: // a later call says more
			}
		}}}})
	if _, err := client.New(n.URL(), "").Append(ctx, "orders-1", events.ExpectAny, []wire.EventIn{{Type: "A"}, {Type: "B"}, {Type: "C"}}); err != nil {
		t.Fatal(err)
	}
	for ex := uint64(0); ex < 3; {
		select {
		case ex = <-exported:
		case <-ctx.Done():
			t.Fatalf("the exporter did not export 3 events: %v", ctx.Err())
		}
	}
	fams := scrape(t, ctx, n.URL())
	got := map[string]float64{
		"exported": sample(fams, "greffe_kafka_exported_position"),
		"lag":      sample(fams, "greffe_kafka_export_lag_events"),
		"resyncs":  sample(fams, "greffe_kafka_export_resyncs_total"),
	}
	if d := cmp.Diff(map[string]float64{"exported": 3, "lag": 0, "resyncs": 0}, got); d != "" {
		t.Errorf("export metrics (-want +got):\n%s", d)
	}
}

// TestNode_FailedStoreIsVisible: a store that met an fsync error refuses
// writes until the node is restarted (pebblelog.Store.Failure). The node
// used to go on answering /readyz 200, with nothing in its metrics: only
// appends said so. Now, through the real HTTP server on a store whose
// write-ahead log fails one fsync (internal/faultfs over the real disk):
// the append caught by the failed fsync is outcome_unknown (503), every
// later append and command is refused with store_failed (503); reads
// still serve every acknowledged event; /readyz answers 503 with reason
// store_failed, greffe_store_failed is 1, and /healthz stays 200 with
// status store_failed. A restart replays the log: the node is ready again
// and takes writes, and the uncertain append re-sent keeps its position.
func TestNode_FailedStoreIsVisible(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var armed atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSyncData && strings.Contains(op.Path, "greffe-wal") && armed.CompareAndSwap(true, false) {
			return errors.New("injected: fsync of the write-ahead log failed (EIO)")
		}
		return nil
	})
	cfg := Config{}
	cfg.Store.FS = faultfs.Wrap(vfs.Default, inj)
	cfg.Store.CheckpointInterval = -1
	n := openNode(t, cfg)
	c := client.New(n.URL(), "")

	for i := range 3 {
		if _, err := c.Append(ctx, "orders-1", events.ExpectAny, []wire.EventIn{{Type: "OrderPlaced", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if code, r := readyz(t, ctx, n.URL()); code != http.StatusOK || !r.Ready {
		t.Fatalf("/readyz before the failure: %d %+v", code, r)
	}
	if v := sample(scrape(t, ctx, n.URL()), "greffe_store_failed"); v != 0 {
		t.Fatalf("greffe_store_failed before the failure: %v", v)
	}

	armed.Store(true)
	appendErr := func(what string, err error, status int, code string) {
		t.Helper()
		var ae *wire.Error
		if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
			t.Errorf("%s: %v, want %d %s", what, err, status, code)
		}
	}
	uncertain := wire.EventIn{ID: "00000000-0000-4000-8000-0000000000aa", Type: "OrderPlaced", Data: json.RawMessage(`{"i":3}`)}
	_, err := c.Append(ctx, "orders-1", events.ExpectAny, []wire.EventIn{uncertain})
	appendErr("the append whose fsync failed", err, http.StatusServiceUnavailable, events.CodeOutcomeUnknown)
	if n.Store.Failure() == nil {
		t.Fatal("the store did not fail on the fsync error")
	}
	_, err = c.Append(ctx, "orders-2", events.ExpectAny, []wire.EventIn{{Type: "OrderPlaced"}})
	appendErr("an append after the failure", err, http.StatusServiceUnavailable, events.CodeStoreFailed)
	_, err = c.AppendMulti(ctx, wire.AppendIn{Appends: []wire.StreamAppendIn{{Stream: "orders-3", ExpectedVersion: events.ExpectAny, Events: []wire.EventIn{{Type: "OrderPlaced"}}}}})
	appendErr("a multi-stream append after the failure", err, http.StatusServiceUnavailable, events.CodeStoreFailed)
	_, err = c.Command(ctx, wire.CommandIn{Command: "RevokeApproval", ID: "00000000-0000-4000-8000-000000000001", Actor: "owner",
		Data: json.RawMessage(`{"approval_id":"never-granted","reason":"cleanup"}`)})
	appendErr("a command after the failure", err, http.StatusServiceUnavailable, events.CodeStoreFailed)

	// Reads go on: what was acknowledged is served, nothing else.
	ro, err := c.ReadStream(ctx, "orders-1", events.ReadOptions{})
	if err != nil || len(ro.Events) != 3 {
		t.Fatalf("read after the failure: %v, %d events, want the 3 acknowledged", err, len(ro.Events))
	}
	if info, err := c.Info(ctx); err != nil || info.Head.Size != 3 {
		t.Fatalf("info after the failure: %v %+v", err, info.Head)
	}

	code, r := readyz(t, ctx, n.URL())
	if code != http.StatusServiceUnavailable || r.Ready || len(r.Reasons) == 0 || r.Reasons[0].Code != CodeStoreFailed ||
		!strings.Contains(r.Reasons[0].Message, "injected: fsync") {
		t.Errorf("/readyz after the failure: %d %+v, want 503 with reason %s and its cause", code, r, CodeStoreFailed)
	}
	if v := sample(scrape(t, ctx, n.URL()), "greffe_store_failed"); v != 1 {
		t.Errorf("greffe_store_failed after the failure: %v, want 1", v)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/healthz", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var health struct {
		Status string `json:"status"`
		Head   uint64 `json:"head"`
		Error  string `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&health); err != nil || res.StatusCode != http.StatusOK ||
		health.Status != events.CodeStoreFailed || health.Head != 3 || !strings.Contains(health.Error, "injected: fsync") {
		t.Errorf("/healthz after the failure: %d %+v %v", res.StatusCode, health, err)
	}

	// The restart: the log is replayed, the node is ready and takes
	// writes; the uncertain append, re-sent with the same id, is given
	// position 3: its record reached the log file before the fsync failed
	// (faultfs fails the sync, not the write), so the replay holds it and
	// the re-send is answered as a duplicate.
	if err := n.Close(); err != nil {
		t.Logf("close of the failed node: %v", err)
	}
	cfg.DataDir, cfg.Store.FS = n.cfg.DataDir, nil
	n = openNode(t, cfg)
	c = client.New(n.URL(), "")
	if code, r := readyz(t, ctx, n.URL()); code != http.StatusOK || !r.Ready {
		t.Errorf("/readyz after the restart: %d %+v", code, r)
	}
	fams := scrape(t, ctx, n.URL())
	if v := sample(fams, "greffe_store_failed"); v != 0 {
		t.Errorf("greffe_store_failed after the restart: %v", v)
	}
	if v := sample(fams, "greffe_wal_replayed_records"); v <= 0 {
		t.Errorf("greffe_wal_replayed_records after the restart: %v, want the log replayed", v)
	}
	out, err := c.Append(ctx, "orders-1", events.ExpectAny, []wire.EventIn{uncertain})
	if err != nil || out.Events[0].Position != 3 || !out.Duplicate {
		t.Fatalf("the uncertain append re-sent after the restart: %v %+v, want the duplicate at position 3", err, out)
	}
	if _, err := c.Append(ctx, "orders-2", events.ExpectAny, []wire.EventIn{{Type: "OrderPlaced"}}); err != nil {
		t.Fatalf("an append after the restart: %v", err)
	}
}

// openNode opens a node with cfg (a new data folder unless cfg names one,
// the address filled in) and serves it until the test ends; unlike
// serveNode, an error of its close (a failed store may report one) does
// not fail the test.
func openNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.API.Addr = "127.0.0.1:0"
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Logf("serve: %v", err)
		}
	})
	return n
}
