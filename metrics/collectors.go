package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

// storeCollector reads the ledger: size, appends, commit distributions and
// the last signed checkpoint.
type storeCollector struct {
	store Store
	clock func() time.Time

	info, events, bytes, lastAppend          *prometheus.Desc
	appendRequests, appendedEvents           *prometheus.Desc
	appendSeconds, fsyncSeconds, batchEvents *prometheus.Desc
	checkpointSize, checkpointAge            *prometheus.Desc
	walReplayed, failed                      *prometheus.Desc
}

func newStoreCollector(cfg Config) *storeCollector {
	info := prometheus.Labels{"node_id": cfg.NodeID, "version": cfg.Version, "ledger_id": cfg.LedgerID}
	return &storeCollector{
		store: cfg.Store,
		clock: cfg.Clock,
		info: prometheus.NewDesc("greffe_node_info",
			"The node's identity: always 1, labelled with its node id, version and ledger id.", nil, info),
		events: prometheus.NewDesc("greffe_log_events",
			"Events in the log: the acknowledged head's size.", nil, nil),
		bytes: prometheus.NewDesc("greffe_log_bytes",
			"Bytes the ledger uses on disk: Pebble's tables and manifests, and the write-ahead log's segment files.", nil, nil),
		lastAppend: prometheus.NewDesc("greffe_log_last_append_timestamp_seconds",
			"Recorded time of the newest event, in seconds since the Unix epoch; absent while the log is empty.", nil, nil),
		appendRequests: prometheus.NewDesc("greffe_append_requests_total",
			"Append calls answered by this node's group commit, whatever the answer.", nil, nil),
		appendedEvents: prometheus.NewDesc("greffe_appended_events_total",
			"Events written through this node's group commit (duplicates excluded): its rate is the append rate.", nil, nil),
		appendSeconds: prometheus.NewDesc("greffe_append_duration_seconds",
			"Latency of append calls, from queueing for group commit to the answer.", nil, nil),
		fsyncSeconds: prometheus.NewDesc("greffe_fsync_duration_seconds",
			"Time each committed batch waited for its fsync (single node; in a cluster the raft log is the write-ahead log).", nil, nil),
		batchEvents: prometheus.NewDesc("greffe_commit_batch_events",
			"Events per batch committed through this node's group commit (one observation per fsync or replicated batch).", nil, nil),
		checkpointSize: prometheus.NewDesc("greffe_checkpoint_size_events",
			"Tree size (events covered) of the last signed checkpoint; 0 before the first.", nil, nil),
		walReplayed: prometheus.NewDesc("greffe_wal_replayed_records",
			"Write-ahead log records replayed when the store last opened: 0 after a clean stop, more after a crash.", nil, nil),
		failed: prometheus.NewDesc("greffe_store_failed",
			"1 when the store met a write or sync error and refuses writes until the node is restarted (it still serves what it acknowledged); 0 otherwise.", nil, nil),
		checkpointAge: prometheus.NewDesc("greffe_checkpoint_age_seconds",
			"Seconds since the last checkpoint was signed (or, after a restart, since it was loaded); absent before the first.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.info, c.events, c.bytes, c.lastAppend, c.appendRequests, c.appendedEvents,
		c.appendSeconds, c.fsyncSeconds, c.batchEvents, c.checkpointSize, c.checkpointAge, c.walReplayed, c.failed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.Stats()
	h := c.store.Histograms()
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.events, prometheus.GaugeValue, float64(st.Head.Size))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(c.store.DiskUsage()))
	if st.Head.RecordedAt != 0 {
		ch <- prometheus.MustNewConstMetric(c.lastAppend, prometheus.GaugeValue, float64(st.Head.RecordedAt)/1e9)
	}
	ch <- prometheus.MustNewConstMetric(c.appendRequests, prometheus.CounterValue, float64(st.Appends))
	ch <- prometheus.MustNewConstMetric(c.appendedEvents, prometheus.CounterValue, h.BatchEvents.Sum)
	ch <- constHistogram(c.appendSeconds, h.Append)
	ch <- constHistogram(c.fsyncSeconds, h.Fsync)
	ch <- constHistogram(c.batchEvents, h.BatchEvents)
	ch <- prometheus.MustNewConstMetric(c.checkpointSize, prometheus.GaugeValue, float64(st.LastCheck))
	ch <- prometheus.MustNewConstMetric(c.walReplayed, prometheus.GaugeValue, float64(st.WALReplayed))
	failed := 0.0
	if c.store.Failure() != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, failed)
	if !st.LastCheckAt.IsZero() {
		age := max(c.clock().Sub(st.LastCheckAt), 0)
		ch <- prometheus.MustNewConstMetric(c.checkpointAge, prometheus.GaugeValue, age.Seconds())
	}
}

// constHistogram turns a store histogram (per-bucket counts) into
// Prometheus's cumulative buckets.
func constHistogram(d *prometheus.Desc, h pebblelog.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
}

// subscriptionCollector reads the SSE subscriptions being served.
type subscriptionCollector struct {
	subs        Subscriptions
	store       Store
	active, lag *prometheus.Desc
}

func newSubscriptionCollector(subs Subscriptions, store Store) *subscriptionCollector {
	return &subscriptionCollector{
		subs:  subs,
		store: store,
		active: prometheus.NewDesc("greffe_sse_subscriptions",
			"SSE subscriptions (GET /v1/subscribe) being served.", nil, nil),
		lag: prometheus.NewDesc("greffe_sse_subscription_max_lag_events",
			"How far behind the head the slowest SSE subscription is, in events (0 without subscriptions).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *subscriptionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.active; ch <- c.lag }

// Collect implements prometheus.Collector.
func (c *subscriptionCollector) Collect(ch chan<- prometheus.Metric) {
	head := c.store.Stats().Head.Size
	pos := c.subs.SubscriptionPositions()
	var lag uint64
	for _, p := range pos {
		if head > p {
			lag = max(lag, head-p)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(len(pos)))
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lag))
}

// projectionCollector reads the read models' runners.
type projectionCollector struct {
	set                   Projections
	lag, position, failed *prometheus.Desc
}

func newProjectionCollector(set Projections) *projectionCollector {
	l := []string{"projection"}
	return &projectionCollector{
		set: set,
		lag: prometheus.NewDesc("greffe_projection_lag_events",
			"Events of the log a projection has still to fold.", l, nil),
		position: prometheus.NewDesc("greffe_projection_position",
			"Events a projection has folded (the log position it has reached).", l, nil),
		failed: prometheus.NewDesc("greffe_projection_failed",
			"1 when a projection's runner stopped on an event it could not fold, else 0.", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *projectionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.position
	ch <- c.failed
}

// Collect implements prometheus.Collector.
func (c *projectionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.set.Status() {
		failed := 0.0
		if st.Error != "" {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(st.Lag), st.Name)
		ch <- prometheus.MustNewConstMetric(c.position, prometheus.GaugeValue, float64(st.Position), st.Name)
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, failed, st.Name)
	}
}

// raftCollector reads this node's raft member.
type raftCollector struct {
	raft                                           Raft
	state, hasLeader, term, members                *prometheus.Desc
	commitIndex, appliedIndex, lastIndex, snapshot *prometheus.Desc
	restores, refusedRPCs, refusedConns            *prometheus.Desc
	refusedSnapshots                               *prometheus.Desc
}

func newRaftCollector(r Raft) *raftCollector {
	return &raftCollector{
		raft: r,
		state: prometheus.NewDesc("greffe_raft_state",
			"1 for this node's raft state (Follower, Candidate, Leader, Shutdown), 0 for the others.", []string{"state"}, nil),
		hasLeader: prometheus.NewDesc("greffe_raft_has_leader",
			"1 when this node knows a leader, else 0.", nil, nil),
		term: prometheus.NewDesc("greffe_raft_term",
			"This node's current raft term.", nil, nil),
		members: prometheus.NewDesc("greffe_raft_members",
			"Members (voters and non-voters) in this node's latest raft configuration.", nil, nil),
		commitIndex: prometheus.NewDesc("greffe_raft_commit_index",
			"This node's raft commit index.", nil, nil),
		appliedIndex: prometheus.NewDesc("greffe_raft_applied_index",
			"Raft index of the last batch this node applied to its ledger.", nil, nil),
		lastIndex: prometheus.NewDesc("greffe_raft_last_index",
			"Index of the last entry in this node's raft log.", nil, nil),
		snapshot: prometheus.NewDesc("greffe_raft_snapshot_index",
			"Raft index of this node's newest snapshot.", nil, nil),
		restores: prometheus.NewDesc("greffe_raft_snapshot_restores_total",
			"Snapshots this node installed since it started.", nil, nil),
		refusedRPCs: prometheus.NewDesc("greffe_raft_refused_rpcs_total",
			"Raft RPCs this node's raft port refused since it started: a sender that is not a member, or not the node its certificate names.", nil, nil),
		refusedConns: prometheus.NewDesc("greffe_raft_refused_connections_total",
			"Connections this node's raft port refused since it started: a failed TLS handshake, a certificate without a node id, too many connections.", nil, nil),
		refusedSnapshots: prometheus.NewDesc("greffe_raft_refused_snapshots_total",
			"Raft snapshots this node's ledger refused since it started (each removed from its snapshot store): a forged history, or a faulty member's.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.hasLeader, c.term, c.members, c.commitIndex, c.appliedIndex, c.lastIndex, c.snapshot, c.restores,
		c.refusedRPCs, c.refusedConns, c.refusedSnapshots} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := LocalRaftStatus(c.raft)
	if err != nil {
		// A member that stopped (removed, or shut down) has no status: say
		// so through the state series rather than failing the scrape.
		st.State = "Shutdown"
	}
	// One series per state (one-hot), so that a query can select the
	// leader, or alert on candidates, without knowing numeric codes.
	for _, s := range []string{"Follower", "Candidate", "Leader", "Shutdown"} {
		v := 0.0
		if s == st.State {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, s)
	}
	hasLeader := 0.0
	if st.LeaderID != "" {
		hasLeader = 1
	}
	ch <- prometheus.MustNewConstMetric(c.hasLeader, prometheus.GaugeValue, hasLeader)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.term, prometheus.GaugeValue, float64(st.Term))
	ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(len(st.Servers)))
	ch <- prometheus.MustNewConstMetric(c.commitIndex, prometheus.GaugeValue, float64(st.CommitIndex))
	ch <- prometheus.MustNewConstMetric(c.appliedIndex, prometheus.GaugeValue, float64(st.AppliedIndex))
	ch <- prometheus.MustNewConstMetric(c.lastIndex, prometheus.GaugeValue, float64(st.LastIndex))
	ch <- prometheus.MustNewConstMetric(c.snapshot, prometheus.GaugeValue, float64(st.SnapshotIndex))
	ch <- prometheus.MustNewConstMetric(c.restores, prometheus.CounterValue, float64(st.Restores))
	ch <- prometheus.MustNewConstMetric(c.refusedRPCs, prometheus.CounterValue, float64(st.RefusedRPCs))
	ch <- prometheus.MustNewConstMetric(c.refusedConns, prometheus.CounterValue, float64(st.RefusedConnections))
	ch <- prometheus.MustNewConstMetric(c.refusedSnapshots, prometheus.CounterValue, float64(st.RefusedSnapshots))
}

// LocalRaftStatus returns this node's own view of the cluster without
// asking the other members: Status runs with a cancelled context, so the
// members it would query answer at once as unreachable (their fields are
// left empty). Scrapes and readiness probes use it; they must never wait
// on another node.
func LocalRaftStatus(r Raft) (wire.Status, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return r.Status(ctx)
}

// exporterCollector reads the Kafka exporter.
type exporterCollector struct {
	ex                              Exporter
	lag, exported, resyncs, skipped *prometheus.Desc
}

func newExporterCollector(ex Exporter) *exporterCollector {
	return &exporterCollector{
		ex: ex,
		lag: prometheus.NewDesc("greffe_kafka_export_lag_events",
			"Events of the log not yet exported to Kafka.", nil, nil),
		exported: prometheus.NewDesc("greffe_kafka_exported_position",
			"End (exclusive) of the positions exported to Kafka.", nil, nil),
		resyncs: prometheus.NewDesc("greffe_kafka_export_resyncs_total",
			"Times the exporter resumed from the topic's tails after a write error.", nil, nil),
		skipped: prometheus.NewDesc("greffe_kafka_export_skipped_total",
			"Events a resume found already at their partition's tail and did not write again.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *exporterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.exported
	ch <- c.resyncs
	ch <- c.skipped
}

// Collect implements prometheus.Collector.
func (c *exporterCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(c.ex.Lag()))
	ch <- prometheus.MustNewConstMetric(c.exported, prometheus.GaugeValue, float64(c.ex.Exported()))
	ch <- prometheus.MustNewConstMetric(c.resyncs, prometheus.CounterValue, float64(c.ex.Resyncs()))
	ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.CounterValue, float64(c.ex.Skipped()))
}
