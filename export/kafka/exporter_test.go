package kafka

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// testTimeout bounds every wait of these tests.
const testTimeout = 60 * time.Second

const topic = "greffe-events"

// cluster starts three in-process brokers with the topic (3 partitions).
func cluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(3, topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func openStore(t *testing.T) *pebblelog.Store {
	t.Helper()
	st, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// seed appends n events over 17 streams, several per append.
func seed(t *testing.T, st *pebblelog.Store, n int) {
	t.Helper()
	for i := 0; i < n; {
		var req events.AppendRequest
		for j := 0; j < 3 && i < n; j, i = j+1, i+1 {
			req.Streams = append(req.Streams, events.StreamAppend{
				Stream: fmt.Sprintf("s-%d", (i*7)%17),
				Events: []events.Proposed{{ID: uuid.New(), Type: "Tick", Data: fmt.Appendf(nil, `{"i":%d}`, i), Metadata: json.RawMessage(`{}`)}},
			})
		}
		// Streams must be distinct within one append.
		seen := map[string]bool{}
		var uniq []events.StreamAppend
		for _, sa := range req.Streams {
			if seen[sa.Stream] {
				if _, err := st.Append(t.Context(), events.AppendRequest{Streams: []events.StreamAppend{sa}}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			seen[sa.Stream] = true
			uniq = append(uniq, sa)
		}
		if _, err := st.Append(t.Context(), events.AppendRequest{Streams: uniq}); err != nil {
			t.Fatal(err)
		}
	}
}

func newExporter(t *testing.T, c *kfake.Cluster, st *pebblelog.Store, mod func(*Config)) *Exporter {
	t.Helper()
	cfg := Config{Brokers: c.ListenAddrs(), Topic: topic, MaxBatchEvents: 100, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		WriteTimeout: 5 * time.Second, Head: func() uint64 { return st.Head().Size }}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// consumed is one message as a consumer group member read it.
type consumed struct {
	partition int
	offset    int64
	key       string
	value     []byte
	headers   map[string]string
}

// topicSize is how many messages the topic holds, duplicates included.
func topicSize(t *testing.T, ctx context.Context, c *kfake.Cluster) int {
	t.Helper()
	kc := &kafkago.Client{Addr: kafkago.TCP(c.ListenAddrs()...)}
	var reqs []kafkago.OffsetRequest
	for p := range 3 {
		reqs = append(reqs, kafkago.FirstOffsetOf(p), kafkago.LastOffsetOf(p))
	}
	offs, err := kc.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, po := range offs.Topics[topic] {
		n += int(po.LastOffset - po.FirstOffset)
	}
	return n
}

// consume reads every message of the topic with a kafka-go consumer group,
// as a downstream consumer would.
func consume(t *testing.T, ctx context.Context, c *kfake.Cluster) []consumed {
	t.Helper()
	total := topicSize(t, ctx, c)
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: c.ListenAddrs(), GroupID: "consumer-" + uuid.NewString(), Topic: topic,
		MaxWait: 200 * time.Millisecond, StartOffset: kafkago.FirstOffset, ReadLagInterval: -1,
	})
	defer r.Close()
	var out []consumed
	for len(out) < total {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("consumer read %d of %d messages: %v", len(out), total, err)
		}
		h := map[string]string{}
		for _, x := range m.Headers {
			h[x.Key] = string(x.Value)
		}
		out = append(out, consumed{partition: m.Partition, offset: m.Offset, key: string(m.Key), value: m.Value, headers: h})
	}
	return out
}

// dedupe applies the consumer contract of docs/ECOSYSTEM.md: per partition,
// drop a message whose position is not above the highest position seen. It
// returns the kept messages and how many were dropped.
func dedupe(t *testing.T, msgs []consumed) ([]consumed, int) {
	t.Helper()
	highest := map[int]int64{}
	var kept []consumed
	dropped := 0
	for _, m := range msgs {
		var pos int64
		if _, err := fmt.Sscan(m.headers[HeaderPosition], &pos); err != nil {
			t.Fatalf("message %d/%d: position header %q", m.partition, m.offset, m.headers[HeaderPosition])
		}
		if h, ok := highest[m.partition]; ok && pos <= h {
			dropped++
			continue
		}
		highest[m.partition] = pos
		kept = append(kept, m)
	}
	return kept, dropped
}

// verifyExactlyOnce checks that the kept messages are the log, each event
// once: the value is the event's public JSON, the key and headers its
// coordinates, each stream's events in version order on one partition.
func verifyExactlyOnce(t *testing.T, st *pebblelog.Store, kept []consumed) {
	t.Helper()
	all, err := st.ReadAll(t.Context(), events.ReadOptions{Limit: events.MaxReadLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != len(all) {
		t.Fatalf("kept %d messages, the log has %d events", len(kept), len(all))
	}
	byPos := map[uint64]consumed{}
	for _, m := range kept {
		var pos uint64
		fmt.Sscan(m.headers[HeaderPosition], &pos)
		if _, dup := byPos[pos]; dup {
			t.Fatalf("position %d kept twice", pos)
		}
		byPos[pos] = m
	}
	nextVersion := map[string]uint64{}
	partitionOf := map[string]int{}
	for i := range all {
		e := &all[i]
		m, ok := byPos[e.Position]
		if !ok {
			t.Fatalf("position %d (%s v%d) missing", e.Position, e.Stream, e.Version)
		}
		want, _ := json.Marshal(e)
		if string(m.value) != string(want) || m.key != e.Stream {
			t.Fatalf("position %d: key %q value %s, want %q %s", e.Position, m.key, m.value, e.Stream, want)
		}
		wantH := map[string]string{
			HeaderPosition: fmt.Sprint(e.Position), HeaderStream: e.Stream, HeaderVersion: fmt.Sprint(e.Version),
			HeaderType: e.Type, HeaderEventID: e.ID.String(), HeaderLeafHash: hex.EncodeToString(e.LeafHash[:]),
			HeaderBatchStart: m.headers[HeaderBatchStart],
		}
		if diff := cmp.Diff(wantH, m.headers); diff != "" {
			t.Fatalf("position %d headers (-want +got):\n%s", e.Position, diff)
		}
		if p, ok := partitionOf[e.Stream]; ok && p != m.partition {
			t.Fatalf("stream %s on partitions %d and %d", e.Stream, p, m.partition)
		}
		partitionOf[e.Stream] = m.partition
		if m.partition != PartitionOf(e.Stream, 3) {
			t.Fatalf("stream %s on partition %d, PartitionOf says %d", e.Stream, m.partition, PartitionOf(e.Stream, 3))
		}
		if e.Version != nextVersion[e.Stream] {
			t.Fatalf("stream %s: version %d after %d", e.Stream, e.Version, nextVersion[e.Stream])
		}
		nextVersion[e.Stream]++
	}
	// Per stream, the consumer's order (partition offsets) is version order.
	lastOffset := map[string]int64{}
	for _, e := range all {
		m := byPos[e.Position]
		if o, ok := lastOffset[e.Stream]; ok && m.offset <= o {
			t.Fatalf("stream %s: version %d at offset %d, before the previous version's %d", e.Stream, e.Version, m.offset, o)
		}
		lastOffset[e.Stream] = m.offset
	}
}

func TestExporter_EveryEventOnceInOrderPerStream(t *testing.T) {
	c := cluster(t)
	st := openStore(t)
	ctx := runCtx(t)
	seed(t, st, 1200)
	e := newExporter(t, c, st, func(cfg *Config) { cfg.Until = 1500 })
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	seed(t, st, 300) // live, while the exporter runs
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if e.Exported() != 1500 || e.Lag() != 0 {
		t.Errorf("Exported %d, Lag %d; want 1500, 0", e.Exported(), e.Lag())
	}
	msgs := consume(t, ctx, c)
	kept, dropped := dedupe(t, msgs)
	if dropped != 0 || e.Resyncs() != 0 {
		t.Errorf("%d duplicates, %d resyncs on a clean run; want none", dropped, e.Resyncs())
	}
	verifyExactlyOnce(t, st, kept)

	// A second run finds everything at the tails and writes nothing.
	again := newExporter(t, c, st, func(cfg *Config) { cfg.Until = 1500 })
	if err := again.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n := topicSize(t, ctx, c); n != len(msgs) {
		t.Errorf("a rerun grew the topic from %d to %d messages", len(msgs), n)
	}
}

// TestExporter_KilledMidRunAndRestarted cancels the exporter while a produce
// request is in flight (the broker applies it after the exporter gave up
// waiting), then starts a fresh exporter, as a restarted process would: it
// resumes from the tails, nothing is lost, and a duplicate, if any, is
// confined to that one write and dropped by position.
func TestExporter_KilledMidRunAndRestarted(t *testing.T) {
	c := cluster(t)
	st := openStore(t)
	ctx := runCtx(t)
	seed(t, st, 2000)
	runCtx1, kill := context.WithCancel(ctx)
	var produces atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if produces.Add(1) == 10 {
			kill() // the request still goes through: not handled here
		}
		return nil, nil, false
	})
	first := newExporter(t, c, st, nil)
	if err := first.Run(runCtx1); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want canceled", err)
	}
	if ex := first.Exported(); ex == 0 || ex >= 2000 {
		t.Fatalf("first run exported %d, want a run stopped midway", ex)
	}
	second := newExporter(t, c, st, func(cfg *Config) { cfg.Until = 2000 })
	if err := second.Run(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := consume(t, ctx, c)
	kept, dropped := dedupe(t, msgs)
	t.Logf("first run acknowledged %d events; restart skipped %d already at the tails; %d duplicates dropped by position", first.Exported(), second.Skipped(), dropped)
	if dropped > second.cfg.MaxBatchEvents {
		t.Errorf("%d duplicates, more than one write (%d)", dropped, second.cfg.MaxBatchEvents)
	}
	verifyExactlyOnce(t, st, kept)
}

// TestExporter_ProduceErrorAfterApplied injects broker answers that report
// an error although the write was applied, so that kafka-go retries and
// writes a batch twice. The duplicates are found by position and dropped;
// after them every event is there once, in order.
func TestExporter_ProduceErrorAfterApplied(t *testing.T) {
	tests := []struct {
		name        string
		err         *kerr.Error
		count       int
		wantResyncs bool // kafka-go gave up and the exporter resumed from the tails
	}{
		// kafka-go retries at once: the partition gets the batch twice.
		{"not enough replicas after append", kerr.NotEnoughReplicasAfterAppend, 1, false},
		// Every attempt times out after applying: kafka-go gives up after
		// WriteAttempts; the exporter reads the tails, finds the batch and
		// goes on without writing it a fourth time.
		{"request timed out on every attempt", kerr.RequestTimedOut, 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(t)
			st := openStore(t)
			ctx := runCtx(t)
			seed(t, st, 600)
			var produces atomic.Int32
			h := c.Fault(kfake.Fault{
				// Partition 0 only, so that consecutive hits are the
				// attempts of one batch.
				Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{0}, Err: tc.err, Count: tc.count,
				// From the third produce on, so that the duplicate lands
				// in the middle of a partition.
				When: func(kmsg.Request) bool { return produces.Add(1) >= 3 },
			})
			e := newExporter(t, c, st, func(cfg *Config) { cfg.Until = 600 })
			if err := e.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if h.Hits() != tc.count {
				t.Fatalf("fault answered %d requests, want %d", h.Hits(), tc.count)
			}
			msgs := consume(t, ctx, c)
			kept, dropped := dedupe(t, msgs)
			t.Logf("%d messages, %d duplicates dropped by position, %d resyncs, %d skipped at the tails", len(msgs), dropped, e.Resyncs(), e.Skipped())
			if dropped == 0 {
				t.Errorf("no duplicate: the injected error did not make kafka-go write twice")
			}
			if got := e.Resyncs() > 0; got != tc.wantResyncs {
				t.Errorf("resyncs %d, want resync %v", e.Resyncs(), tc.wantResyncs)
			}
			verifyExactlyOnce(t, st, kept)
		})
	}
}

func TestExporter_Refusals(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, c *kfake.Cluster)
		topic    string
		wantCode string
	}{
		{"topic does not exist", nil, "missing-topic", CodeTopicNotFound},
		{"topic holds foreign messages", func(t *testing.T, c *kfake.Cluster) {
			w := &kafkago.Writer{Addr: kafkago.TCP(c.ListenAddrs()...), Topic: topic, RequiredAcks: kafkago.RequireAll, BatchTimeout: time.Millisecond}
			defer w.Close()
			if err := w.WriteMessages(t.Context(), kafkago.Message{Key: []byte("k"), Value: []byte("not greffe")}); err != nil {
				t.Fatal(err)
			}
		}, topic, CodeForeignMessage},
		{"brokers refuse the write for good", func(t *testing.T, c *kfake.Cluster) {
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.MessageTooLarge})
		}, topic, CodeRefused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(t)
			st := openStore(t)
			seed(t, st, 10)
			if tc.setup != nil {
				tc.setup(t, c)
			}
			e := newExporter(t, c, st, func(cfg *Config) { cfg.Topic = tc.topic; cfg.Until = 10 })
			err := e.Run(runCtx(t))
			var fe *events.Error
			if !errors.As(err, &fe) || fe.Code != tc.wantCode || fe.Kind != events.KindRefused {
				t.Fatalf("Run: %v, want code %s", err, tc.wantCode)
			}
			if events.CodeOf(err) != tc.wantCode {
				t.Errorf("events.CodeOf = %q, want %q", events.CodeOf(err), tc.wantCode)
			}
		})
	}
}

// TestExporter_StartStopAndLag runs the exporter as the node does (Start,
// then Stop) and follows Lag while the log grows.
func TestExporter_StartStopAndLag(t *testing.T) {
	c := cluster(t)
	st := openStore(t)
	ctx := runCtx(t)
	var mu sync.Mutex
	reached := map[uint64]chan struct{}{100: make(chan struct{}), 250: make(chan struct{})}
	e := newExporter(t, c, st, func(cfg *Config) {
		cfg.Progress = func(ex uint64) {
			mu.Lock()
			defer mu.Unlock()
			for n, ch := range reached {
				if ex >= n {
					close(ch)
					delete(reached, n)
				}
			}
		}
	})
	wait := func(n uint64) {
		mu.Lock()
		ch, ok := reached[n]
		mu.Unlock()
		if !ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("exported %d, waiting for %d", e.Exported(), n)
		}
	}
	seed(t, st, 100)
	if e.Lag() != 100 {
		t.Errorf("lag before start = %d, want 100", e.Lag())
	}
	e.Start(ctx)
	wait(100)
	seed(t, st, 150)
	wait(250)
	if e.Lag() != 0 {
		t.Errorf("lag after catching up = %d, want 0", e.Lag())
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	seed(t, st, 5)
	if e.Lag() != 5 {
		t.Errorf("lag after stop and 5 appends = %d, want 5", e.Lag())
	}
}

func TestConfig_Validate(t *testing.T) {
	valid := Config{Brokers: []string{"127.0.0.1:9092"}, Topic: "t"}
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no brokers", func(c *Config) { c.Brokers = nil }, false},
		{"broker without port", func(c *Config) { c.Brokers = []string{"kafka"} }, false},
		{"bad topic", func(c *Config) { c.Topic = "a topic" }, false},
		{"batch bytes below the largest event", func(c *Config) { c.MaxBatchBytes = 1000 }, false},
		{"until below from", func(c *Config) { c.From, c.Until = 10, 5 }, false},
		{"backoffs inverted", func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Second, time.Millisecond }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid
			tc.mod(&cfg)
			_, err := New(cfg, nil)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
				t.Errorf("New: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
