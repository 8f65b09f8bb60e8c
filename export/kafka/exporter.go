package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/export"
)

// Error codes of the exporter. They are part of the public contract: never
// renamed, never reused.
const (
	// CodeTopicNotFound: the topic does not exist (the exporter never
	// creates it).
	CodeTopicNotFound = "kafka_topic_not_found"
	// CodeForeignMessage: a partition's last message lacks the position
	// headers, so the topic holds messages this exporter did not write and
	// its progress cannot be read back from the tails.
	CodeForeignMessage = "kafka_foreign_message"
	// CodeRefused: the brokers refused a write for good (a message too
	// large, an authorization failure); retrying would not help.
	CodeRefused = "kafka_refused"
)

// eventBuffer is how many events the log subscription may read ahead of the
// writer. Two writes' worth keeps the next batch ready while one is in
// flight; a slower Kafka then holds the subscription back (backpressure),
// which costs the log's writers nothing.
const eventBuffer = 2 * DefaultMaxBatchEvents

// tailFetchBytes bounds a tail fetch. Kafka returns the whole record batch
// holding the last offset, at most one write of the exporter.
const tailFetchBytes = 16 << 20

// Exporter copies the log into a Kafka topic: the run loop of package
// export with a sink that writes to the topic and resumes from its
// partition tails. Run (or Start and Stop) drive it; Exported, Lag and
// Resyncs may be read concurrently at any time.
type Exporter struct {
	cfg  Config
	loop *export.Loop

	seen    atomic.Uint64 // the position after the last event read from the log
	skipped atomic.Uint64

	mu     sync.Mutex // guards the fields below (Start and Stop)
	cancel context.CancelFunc
	done   chan struct{}
	runErr error
}

// New validates cfg (after defaults) and returns an exporter of src. It does
// not connect yet.
func New(cfg Config, src events.Subscriber) (*Exporter, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Exporter{cfg: cfg, loop: export.NewLoop(cfg.loop(), src)}
	e.seen.Store(cfg.From)
	return e, nil
}

// Exported returns the first position not known to be in Kafka: every
// event below it was acknowledged by all in-sync replicas (or lies below
// Config.From). Before the first resume it is Config.From.
func (e *Exporter) Exported() uint64 { return e.loop.Position() }

// Lag returns how many events of the log are not exported yet: the head
// (Config.Head, or the last event seen) minus Exported, never negative.
func (e *Exporter) Lag() uint64 {
	head := e.seen.Load()
	if e.cfg.Head != nil {
		head = e.cfg.Head()
	}
	if ex := e.loop.Position(); head > ex {
		return head - ex
	}
	return 0
}

// Resyncs returns how many times the exporter recovered from an error by
// reading the partition tails again.
func (e *Exporter) Resyncs() uint64 { return e.loop.Resyncs() }

// Skipped returns how many events a resume found already at their
// partition's tail and did not write again.
func (e *Exporter) Skipped() uint64 { return e.skipped.Load() }

// Start runs Run on a goroutine the exporter owns, until Stop.
func (e *Exporter) Start(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done != nil {
		return
	}
	ctx, e.cancel = context.WithCancel(ctx)
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		err := e.Run(ctx)
		e.mu.Lock()
		e.runErr = err
		e.mu.Unlock()
	}()
}

// Stop cancels Run and waits for it. It returns Run's error, or nil when Run
// ended because of Stop. Idempotent.
func (e *Exporter) Stop() error {
	e.mu.Lock()
	cancel, done := e.cancel, e.done
	e.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	<-done
	e.mu.Lock()
	defer e.mu.Unlock()
	if errors.Is(e.runErr, context.Canceled) {
		return nil
	}
	return e.runErr
}

// Run exports until ctx ends (returning ctx.Err()), until Config.Until is
// reached (returning nil), or until a failure retrying cannot fix (an
// *events.Error refusal). Any other failure — a broker down, a timeout, the log's
// subscription ending — is retried with exponential backoff, each time
// resuming from the partition tails (export.Loop).
//
// Cancelling ctx during a write may leave that write's messages in Kafka
// although Run did not see them acknowledged: the next run finds them at the
// tails and does not write them again.
func (e *Exporter) Run(ctx context.Context) error {
	tr := &kafkago.Transport{DialTimeout: e.cfg.WriteTimeout, ClientID: "greffe-exporter"}
	defer tr.CloseIdleConnections()
	w := &kafkago.Writer{
		Addr:     kafkago.TCP(e.cfg.Brokers...),
		Topic:    e.cfg.Topic,
		Balancer: kafkago.Murmur2Balancer{},
		// RequireAll: a write counts only once every in-sync replica has
		// it. The zero value (RequireNone) would not even wait for the
		// leader, and the tails would then prove nothing.
		RequiredAcks:    kafkago.RequireAll,
		MaxAttempts:     e.cfg.WriteAttempts,
		WriteBackoffMin: e.cfg.MinBackoff,
		WriteBackoffMax: max(e.cfg.MinBackoff, time.Second),
		// One write yields at most one record batch per partition (see
		// sink.Add), so a partition never holds a later batch of a write
		// without the earlier one.
		BatchSize:  e.cfg.MaxBatchEvents,
		BatchBytes: int64(e.cfg.MaxBatchBytes),
		// Writes are synchronous; waiting for batches to fill would only
		// add latency.
		BatchTimeout: time.Millisecond,
		ReadTimeout:  e.cfg.WriteTimeout,
		WriteTimeout: e.cfg.WriteTimeout,
		Transport:    tr,
	}
	// Close waits for writes still in flight (bounded by WriteAttempts and
	// WriteTimeout), so that a later Run reads settled tails.
	defer w.Close()
	kc := &kafkago.Client{Addr: kafkago.TCP(e.cfg.Brokers...), Transport: tr, Timeout: e.cfg.WriteTimeout}
	return e.loop.Run(ctx, &sink{e: e, w: w, kc: kc})
}

// tails is what the topic says about the exporter's progress.
type tails struct {
	partitions int
	// watermark is the largest batch_start found at a tail: every event
	// below it was acknowledged. 0 when no tail was found.
	watermark uint64
	// last maps a partition to the highest position at its tail.
	last map[int]uint64
	// ids lists the partitions 0..partitions-1, for the balancer.
	ids []int
}

// partitionOf is PartitionOf without allocating.
func (t *tails) partitionOf(stream string) int {
	return kafkago.Murmur2Balancer{}.Balance(kafkago.Message{Key: []byte(stream)}, t.ids...)
}

// sink is the Kafka side of one Run: the topic's writer and client, what
// the tails said at the last resume, and the batch being built.
type sink struct {
	e  *Exporter
	w  *kafkago.Writer
	kc *kafkago.Client
	t  tails

	msgs []kafkago.Message // the batch
	size int               // its bytes (messageSize)
}

// Resume reads the partition tails: the largest batch_start found there
// is where the topic stands, and the events at a partition's tail are not
// written again (Add skips them).
func (k *sink) Resume(ctx context.Context) (uint64, error) {
	k.msgs, k.size = k.msgs[:0], 0
	t, err := k.e.readTails(ctx, k.kc)
	if err != nil {
		return 0, err
	}
	k.t = t
	return t.watermark, nil
}

// Add adds ev's message to the batch, up to MaxBatchEvents and
// MaxBatchBytes. Since one write stays within the writer's batch limits,
// kafka-go sends at most one record batch per partition per write, so a
// partition never holds a later part of a write without the earlier one.
// An event the last resume found at its partition's tail is acknowledged
// without writing.
func (k *sink) Add(ev *events.Event, start uint64) (bool, error) {
	e := k.e
	e.seenUpTo(ev.Position + 1)
	if p, ok := k.t.last[k.t.partitionOf(ev.Stream)]; ok && ev.Position <= p {
		e.skipped.Add(1)
		return true, nil
	}
	m, err := Message(ev, start)
	if err != nil {
		return false, err
	}
	n := messageSize(&m)
	if n > e.cfg.MaxBatchBytes {
		return false, events.Errorf(CodeRefused, events.KindRefused, nil, "event %d encodes to a %d-byte message, above MaxBatchBytes %d", ev.Position, n, e.cfg.MaxBatchBytes)
	}
	if len(k.msgs) > 0 && (k.size+n > e.cfg.MaxBatchBytes || len(k.msgs) == e.cfg.MaxBatchEvents) {
		return false, nil
	}
	k.msgs, k.size = append(k.msgs, m), k.size+n
	return true, nil
}

// Write writes the batch, once every in-sync replica has it.
func (k *sink) Write(ctx context.Context) error {
	msgs := k.msgs
	// A new slice for the next batch: a write whose context ends may still
	// be finished by kafka-go in the background, with these messages.
	k.msgs, k.size = nil, 0
	if len(msgs) == 0 {
		return nil
	}
	if err := k.w.WriteMessages(ctx, msgs...); err != nil {
		return classify(err, msgs[0], msgs[len(msgs)-1])
	}
	return nil
}

// readTails reads the last message of every partition.
func (e *Exporter) readTails(ctx context.Context, kc *kafkago.Client) (tails, error) {
	md, err := kc.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{e.cfg.Topic}})
	if err != nil {
		return tails{}, fmt.Errorf("metadata of %s: %w", e.cfg.Topic, err)
	}
	var topic *kafkago.Topic
	for i := range md.Topics {
		if md.Topics[i].Name == e.cfg.Topic {
			topic = &md.Topics[i]
		}
	}
	if topic == nil || errors.Is(topic.Error, kafkago.UnknownTopicOrPartition) {
		return tails{}, events.Errorf(CodeTopicNotFound, events.KindRefused, nil, "topic %q does not exist; create it (its partitions and replication are yours to choose)", e.cfg.Topic)
	}
	if topic.Error != nil || len(topic.Partitions) == 0 {
		return tails{}, fmt.Errorf("metadata of %s: %d partitions, %w", e.cfg.Topic, len(topic.Partitions), topic.Error)
	}
	t := tails{partitions: len(topic.Partitions), last: map[int]uint64{}}
	for p := range t.partitions {
		t.ids = append(t.ids, p)
	}
	var reqs []kafkago.OffsetRequest
	for p := range t.partitions {
		reqs = append(reqs, kafkago.FirstOffsetOf(p), kafkago.LastOffsetOf(p))
	}
	offs, err := kc.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{e.cfg.Topic: reqs}})
	if err != nil {
		return tails{}, fmt.Errorf("offsets of %s: %w", e.cfg.Topic, err)
	}
	for _, po := range offs.Topics[e.cfg.Topic] {
		if po.Error != nil {
			return tails{}, fmt.Errorf("offsets of %s/%d: %w", e.cfg.Topic, po.Partition, po.Error)
		}
		if po.LastOffset <= po.FirstOffset {
			continue // empty partition
		}
		pos, start, err := e.readTail(ctx, kc, po.Partition, po.LastOffset-1)
		if err != nil {
			return tails{}, err
		}
		t.last[po.Partition] = pos
		t.watermark = max(t.watermark, start)
	}
	return t, nil
}

// readTail returns the position and batch_start headers of one partition's
// message at offset.
func (e *Exporter) readTail(ctx context.Context, kc *kafkago.Client, partition int, offset int64) (pos, start uint64, err error) {
	resp, err := kc.Fetch(ctx, &kafkago.FetchRequest{
		Topic: e.cfg.Topic, Partition: partition, Offset: offset,
		MinBytes: 1, MaxBytes: tailFetchBytes, MaxWait: e.cfg.WriteTimeout,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("tail of %s/%d: %w", e.cfg.Topic, partition, err)
	}
	if resp.Error != nil {
		return 0, 0, fmt.Errorf("tail of %s/%d: %w", e.cfg.Topic, partition, resp.Error)
	}
	for {
		rec, err := resp.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return 0, 0, fmt.Errorf("tail of %s/%d: offset %d not returned", e.cfg.Topic, partition, offset)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("tail of %s/%d: %w", e.cfg.Topic, partition, err)
		}
		if rec.Offset != offset {
			continue // the batch holding the tail starts earlier
		}
		pos, okPos := HeaderUint(rec.Headers, HeaderPosition)
		start, okStart := HeaderUint(rec.Headers, HeaderBatchStart)
		if !okPos || !okStart {
			return 0, 0, events.Errorf(CodeForeignMessage, events.KindRefused, nil,
				"the last message of %s/%d (offset %d) has no %s and %s headers; export to a topic only greffe writes", e.cfg.Topic, partition, offset, HeaderPosition, HeaderBatchStart)
		}
		return pos, start, nil
	}
}

// classify turns a write error into a refusal (*events.Error) when retrying cannot help.
func classify(err error, first, last kafkago.Message) error {
	from, _ := HeaderUint(first.Headers, HeaderPosition)
	to, _ := HeaderUint(last.Headers, HeaderPosition)
	if permanent(err) {
		return events.Errorf(CodeRefused, events.KindRefused, err, "the brokers refused the events %d to %d", from, to)
	}
	return fmt.Errorf("write events %d to %d: %w", from, to, err)
}

func permanent(err error) bool {
	var we kafkago.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil && permanent(e) {
				return true
			}
		}
		return false
	}
	var tooLarge kafkago.MessageTooLargeError
	if errors.As(err, &tooLarge) {
		return true
	}
	var ke kafkago.Error
	if errors.As(err, &ke) {
		return !ke.Temporary()
	}
	return false
}

// seenUpTo raises the position after the last event read to v.
func (e *Exporter) seenUpTo(v uint64) {
	for {
		cur := e.seen.Load()
		if v <= cur || e.seen.CompareAndSwap(cur, v) {
			return
		}
	}
}
