package pebblelog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/greffe/greffe/events"
)

// Proposer replicates batches (the raft replicator implements it). Batches
// are applied in the order Propose is called; each one is applied on every
// replica through Store.ApplyReplicated. Propose must not block for long: it
// hands the batch over and returns a wait function that blocks until the
// batch is applied locally (or ctx ends) and returns its outcomes. A wait
// error that leaves the outcome open must wrap events.ErrOutcomeUnknown.
type Proposer interface {
	Propose(b *events.Batch) (wait func(ctx context.Context) ([]events.Outcome, error))
}

// Queue capacities. The request queue absorbs bursts from many writers while
// a batch is being synced; the pipeline depth bounds how many batches are
// applied in memory but not yet fsynced (or not yet committed by raft).
const (
	requestQueue  = 4096
	pipelineDepth = 1
	// replicatedDepth is the pipeline depth once a proposer is set (issue
	// #5). A raft round costs two fsyncs in sequence (the leader's log,
	// then a follower's) and a network round trip; with one batch in
	// flight, 64 writers split into two cohorts that take turns. Proposing
	// the next batch while the previous one replicates doubled cluster
	// throughput (BenchmarkAppend in replicator: 7.7-9.2k -> 16-18k
	// events/s with 64 writers). Raft keeps proposals in order and never
	// commits one without those before it.
	replicatedDepth = 4
)

type appendReq struct {
	r     events.AppendRequest
	bytes int
	done  chan appendResp // buffered 1: the committer never blocks on a writer
}

type appendResp struct {
	o   events.Outcome
	err error
}

// inflight is a batch handed from the sequencer to the syncer, in order.
type inflight struct {
	reqs []*appendReq
	p    *prepared                                           // local mode
	wait func(ctx context.Context) ([]events.Outcome, error) // replicated mode
	err  error                                               // failed before reaching disk
	// applied receives once the local batch is in Pebble's memtable (or
	// failed to get there); the syncer publishes it only then.
	applied chan error
}

// committer coalesces concurrent appends (group commit). The sequencer
// goroutine forms a batch from whatever is queued, applies it to Pebble
// without waiting for the WAL fsync, and hands it to the syncer goroutine,
// which waits for the fsync (Pebble groups fsyncs of consecutive batches),
// advances the acknowledged head and answers the writers. While one batch
// syncs, the next one is being prepared: throughput is bounded by fsync
// latency times batch size, not by fsync latency alone.
type committer struct {
	s        *Store
	in       chan *appendReq
	toSync   chan *inflight
	proposer atomic.Pointer[Proposer]
	tokens   chan struct{} // room downstream; the syncer returns one per batch
	// mu is held by whoever forms and seals local batches: the sequencer
	// from its first request until the batch is sealed, or a lone writer
	// committing on its own goroutine (tryDirect).
	mu sync.Mutex
	// lastReqs is the number of appends in the last local batch. A lone
	// writer (batches of one) takes commitNow. Guarded by mu.
	lastReqs int
	// stopped is set by the sequencer on its way out (stop). Guarded by mu.
	stopped bool
	// gone is closed when the syncer returns, after the last batch was
	// answered. From then on nothing reads in: a request that reaches it
	// later (an Append that passed the closed check just before Close) is
	// never taken, and its Append answers ErrClosed instead of waiting.
	gone chan struct{}
	// active counts Append calls in progress. A batch is committed
	// synchronously (tryDirect, commitNow) only when it is 1: with the
	// store's own log a sync is fast enough that, with 64 writers, the
	// request queue is often empty for an instant, and a synchronous commit
	// then held the pipeline for a whole fsync with one append in it
	// (BenchmarkAppend/writers=64/per=100 lost 10-15 %).
	active  atomic.Int32
	metrics commitMetrics // latencies and batch sizes (metrics.go)
}

func newCommitter(s *Store) *committer {
	c := &committer{s: s, in: make(chan *appendReq, requestQueue), toSync: make(chan *inflight, replicatedDepth),
		tokens: make(chan struct{}, replicatedDepth), gone: make(chan struct{})}
	for range pipelineDepth {
		c.tokens <- struct{}{}
	}
	return c
}

func (c *committer) start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(2)
	go func() { defer wg.Done(); c.sequence(ctx) }()
	go func() { defer wg.Done(); c.syncLoop(ctx) }()
}

// SetProposer switches the store to replicated mode: from now on batches are
// proposed instead of applied locally, up to replicatedDepth at a time.
// Call it before serving appends.
func (s *Store) SetProposer(p Proposer) {
	if s.commit.proposer.Swap(&p) == nil {
		for range replicatedDepth - pipelineDepth {
			s.commit.tokens <- struct{}{}
		}
	}
}

// Append checks r (events.Check) and commits it: AppendChecked. See
// events.Appender.
func (s *Store) Append(ctx context.Context, r events.AppendRequest) (events.Outcome, error) {
	v, err := events.Check(r)
	if err != nil {
		return events.Outcome{}, err
	}
	return s.AppendChecked(ctx, v)
}

// AppendChecked commits v with other concurrent appends, checking nothing
// again: v's bounds were checked where it was made (events.Check). It
// returns once the events are durable. See events.Appender.
func (s *Store) AppendChecked(ctx context.Context, v events.Validated) (events.Outcome, error) {
	r := v.Request()
	if s.closed.Load() {
		return events.Outcome{}, events.ErrClosed
	}
	if err := s.failure(); err != nil {
		return events.Outcome{}, fmt.Errorf("%w: %v", errStoreFailed, err)
	}
	n := 0
	for _, sa := range r.Streams {
		for _, e := range sa.Events {
			n += 96 + len(sa.Stream) + len(e.Type) + len(e.Data) + len(e.Metadata)
		}
	}
	req := &appendReq{r: r, bytes: n, done: make(chan appendResp, 1)}
	s.commit.active.Add(1)
	defer s.commit.active.Add(-1)
	t0 := time.Now()
	if !s.commit.tryDirect(req) {
		select {
		case s.commit.in <- req:
		case <-s.commit.gone:
			return events.Outcome{}, events.ErrClosed // not queued: nothing written
		case <-ctx.Done():
			return events.Outcome{}, ctx.Err() // not queued: nothing written
		}
	}
	var resp appendResp
	select {
	case resp = <-req.done:
	case <-s.commit.gone:
		// The committer answered every request it took before it went, so
		// either the answer is here, or req reached the queue after the
		// sequencer's last look at it and nothing was written.
		select {
		case resp = <-req.done:
		default:
			return events.Outcome{}, events.ErrClosed
		}
	case <-ctx.Done():
		return events.Outcome{}, fmt.Errorf("%w: %w", events.ErrOutcomeUnknown, ctx.Err())
	}
	s.commit.metrics.append.observe(time.Since(t0))
	if resp.err != nil {
		return events.Outcome{}, resp.err
	}
	if resp.o.Err != nil {
		return events.Outcome{}, resp.o.Err
	}
	return resp.o, nil
}

// tryDirect commits req on the caller's goroutine when it is a lone writer:
// local mode, nothing queued, nothing being formed or in flight, and the
// last batch held one append too. It saves the two goroutine hand-offs of
// the sequencer (the writer's request and its answer): the writer's CPU
// per append fell from 83 to 59 µs (BenchmarkAppend/writers=1, profiled),
// against an fsync of about 300 µs on the development disk. It reports
// whether it took req; the answer
// arrives on req.done either way. Anything else goes through the sequencer,
// which waits on mu meanwhile, as it waited on commitNow before.
func (c *committer) tryDirect(req *appendReq) bool {
	if c.proposer.Load() != nil || c.active.Load() != 1 || len(c.in) != 0 || !c.mu.TryLock() {
		return false
	}
	defer c.mu.Unlock()
	if c.stopped || c.lastReqs > 1 || len(c.in) != 0 {
		return false
	}
	select {
	case <-c.tokens:
	default:
		return false
	}
	if len(c.tokens) != pipelineDepth-1 { // a batch is in flight
		c.tokens <- struct{}{}
		return false
	}
	o := c.openBatch()
	o.add(req)
	c.seal(o) // commitNow unless a writer arrived meanwhile
	return true
}

// stop waits for a direct commit in progress and refuses later ones. The
// sequencer calls it on its way out, before it closes toSync: a direct
// commit that took mu after that would hand its batch to a closed channel
// (seal sends on toSync whenever it does not commit at once), and Close
// closes Pebble once the sequencer is gone.
func (c *committer) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
}

// errStoreFailed is returned after an fsync failure: Pebble's state is no
// longer known to match the disk, and only a restart (which replays the WAL)
// can tell what survived. A failure (events.KindFailed): the appends it
// refuses were not written (the one whose write failed is answered
// events.ErrOutcomeUnknown).
var errStoreFailed = &events.Error{Code: events.CodeStoreFailed, Kind: events.KindFailed, Message: "the store failed to write to disk; restart the node"}

// sequence forms batches. A batch stays open, taking every request that
// arrives, until the stage after it (the fsync, or raft) has room; then it is
// sealed and handed over. In local mode each request is applied to the open
// batch as it arrives, so preparing overlaps the previous fsync and a batch
// holds everything that arrived during it: with 64 writers and 1 event per
// append, batches approach 64 events instead of a few.
func (c *committer) sequence(ctx context.Context) {
	defer close(c.toSync)
	defer c.stop()
	tokens := c.tokens
	var open *openBatch
	for {
		if open == nil {
			var first *appendReq
			select {
			case first = <-c.in:
			case <-ctx.Done():
				c.drainClosed()
				return
			}
			c.mu.Lock()
			open = c.openBatch()
			open.add(first)
		}
		// Take what is already queued, then wait for either more requests or
		// room downstream, whichever comes first.
		select {
		case r := <-c.in:
			if !open.fits(r, &c.s.cfg) {
				c.handOff(ctx, open, tokens)
				open = c.openBatch()
			}
			open.add(r)
			continue
		default:
		}
		select {
		case r := <-c.in:
			if !open.fits(r, &c.s.cfg) {
				c.handOff(ctx, open, tokens)
				open = c.openBatch()
			}
			open.add(r)
		case <-tokens:
			c.seal(open)
			open = nil
			c.mu.Unlock()
		case <-ctx.Done():
			open.fail(events.ErrClosed)
			c.mu.Unlock()
			c.drainClosed()
			return
		}
	}
}

// openBatch is the batch being formed.
type openBatch struct {
	c       *committer
	reqs    []*appendReq
	nEvents int
	nBytes  int
	at      time.Time
	bb      *builder // local mode
	err     error    // local mode: a storage failure while adding
}

func (c *committer) openBatch() *openBatch {
	o := &openBatch{c: c, at: c.s.cfg.Clock()}
	if c.proposer.Load() == nil && c.s.failure() == nil {
		c.s.dbMu.RLock()
		o.bb = c.s.newBuilder(o.at, 0)
		c.s.dbMu.RUnlock()
	}
	return o
}

func (o *openBatch) fits(r *appendReq, cfg *Config) bool {
	return o.nEvents+r.r.EventCount() <= cfg.MaxBatchEvents && o.nBytes+r.bytes <= cfg.MaxBatchBytes
}

func (o *openBatch) add(r *appendReq) {
	o.reqs = append(o.reqs, r)
	o.nEvents += r.r.EventCount()
	o.nBytes += r.bytes
	if o.bb != nil && o.err == nil {
		o.c.s.dbMu.RLock()
		o.err = o.bb.add(&r.r)
		o.c.s.dbMu.RUnlock()
	}
}

func (o *openBatch) fail(err error) {
	if o.bb != nil {
		o.bb.abort()
	}
	for _, r := range o.reqs {
		r.done <- appendResp{err: err}
	}
}

// handOff waits for room downstream, then seals the batch.
func (c *committer) handOff(ctx context.Context, o *openBatch, tokens chan struct{}) {
	select {
	case <-tokens:
	case <-ctx.Done():
		// Close is waiting for the syncer to finish; let it.
		<-tokens
	}
	c.seal(o)
}

// seal hands a formed batch to the syncer. REQUIRES: c.mu held; a token was
// taken, which the syncer returns when the batch is answered.
func (c *committer) seal(o *openBatch) {
	f := &inflight{reqs: o.reqs}
	switch {
	case c.s.failure() != nil:
		f.err = fmt.Errorf("%w: %v", errStoreFailed, c.s.failure())
		if o.bb != nil {
			o.bb.abort()
		}
	case o.bb == nil && c.proposer.Load() != nil:
		b := &events.Batch{RecordedAt: o.at, Appends: make([]events.AppendRequest, len(o.reqs))}
		for i, r := range o.reqs {
			b.Appends[i] = r.r
		}
		f.wait = (*c.proposer.Load()).Propose(b)
	case o.bb == nil:
		f.err = fmt.Errorf("%w: batch formed without a builder", errStoreFailed)
	case o.err != nil:
		o.bb.abort()
		c.s.fail(o.err)
		f.err = fmt.Errorf("%w: %v", errStoreFailed, o.err)
	case len(o.reqs) == 1 && c.lastReqs <= 1 && len(c.in) == 0 && len(c.tokens) == pipelineDepth-1 && c.active.Load() <= 1:
		c.lastReqs = 1
		c.commitNow(o)
		return
	default:
		c.lastReqs = len(o.reqs)
		c.sealLocal(o.bb, f)
		return
	}
	c.toSync <- f
}

// sealLocal seals the open batch and logs it (writeAheadLog.start), which
// hands it to the syncer as soon as it is in the log: the store's own log
// then starts the fsync at once and only then applies the batch to
// Pebble's memtable (applying a batch of a thousand events takes about as
// long as its sync, and the two overlap); Pebble's applies and logs it in
// one call, and syncs on its own goroutine. The syncer answers once the
// sync is done and the batch installed (applied). REQUIRES: as seal.
func (c *committer) sealLocal(bb *builder, f *inflight) {
	s := c.s
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	p, err := bb.seal()
	if err != nil {
		s.fail(err)
		f.err = fmt.Errorf("%w: %v", errStoreFailed, err)
		c.toSync <- f
		return
	}
	logged := false
	err = s.log.start(p.wb, func(wait func() error) {
		logged = true
		p.wait = wait
		f.p, f.applied = p, make(chan error, 1)
		c.toSync <- f
	})
	switch {
	case !logged:
		// Not in the log: nothing of it was written.
		p.wb.Close()
		s.fail(err)
		f.err = fmt.Errorf("%w: %v", errStoreFailed, err)
		c.toSync <- f
		return
	case err == nil:
		s.install(p)
	default:
		s.fail(err)
	}
	f.applied <- err
}

func (c *committer) syncLoop(ctx context.Context) {
	defer close(c.gone)
	for f := range c.toSync {
		c.syncOne(ctx, f)
		c.tokens <- struct{}{}
	}
}

func (c *committer) syncOne(ctx context.Context, f *inflight) {
	switch {
	case f.err != nil:
		c.respondAll(f.reqs, nil, f.err)
	case f.p != nil:
		t0 := time.Now()
		err := f.p.wait()
		if aerr := <-f.applied; err == nil && aerr != nil {
			err = aerr // logged but not in the memtable: the store has failed
		}
		c.finishLocal(f, time.Since(t0), err)
	default:
		outcomes, err := f.wait(ctx)
		if err == nil && len(outcomes) != len(f.reqs) {
			err = fmt.Errorf("%w: replicated batch answered %d outcomes for %d appends", events.ErrOutcomeUnknown, len(outcomes), len(f.reqs))
		}
		if err == nil {
			c.metrics.batch.observe(writtenEvents(outcomes))
		}
		c.respondAll(f.reqs, outcomes, err)
	}
}

// finishLocal answers a local batch once its fsync returned (err nil) or
// failed: it advances the acknowledged head, counts, and answers.
func (c *committer) finishLocal(f *inflight, waited time.Duration, err error) {
	c.s.stats.syncNanos.Add(uint64(waited))
	c.metrics.fsync.observe(waited)
	f.p.wb.Close()
	if err != nil {
		// The batch is in the memtable but maybe not on disk.
		c.s.fail(err)
		c.respondAll(f.reqs, nil, fmt.Errorf("%w: fsync: %v", events.ErrOutcomeUnknown, err))
		return
	}
	c.s.publish(f.p.head)
	c.s.stats.batches.Add(1)
	c.s.stats.events.Add(uint64(f.p.nEvents))
	c.metrics.batch.observe(f.p.nEvents)
	c.respondAll(f.reqs, f.p.outcomes, nil)
}

// commitNow commits a batch synchronously on the sequencer when a lone
// writer is appending (this batch and the last held one append, nothing is
// queued or in flight): it then waits for one fsync and no hand-off to the
// syncer (measured: 2.1-2.4k -> 2.6-2.9k appends/s with one writer). Under
// concurrency the pipelined path is taken instead, so that preparing the
// next batch overlaps this fsync (taking commitNow there cost a quarter of
// the throughput with 64 writers).
// REQUIRES: the batch's token is taken and no other batch is in flight.
func (c *committer) commitNow(o *openBatch) {
	f := &inflight{reqs: o.reqs}
	c.s.dbMu.RLock()
	p, err := o.bb.seal()
	var waited time.Duration
	if err == nil {
		t0 := time.Now()
		err = c.s.commitSynced(p.wb)
		waited = time.Since(t0)
		if err == nil {
			c.s.install(p)
		}
	}
	c.s.dbMu.RUnlock()
	if p == nil {
		c.s.fail(err)
		c.respondAll(f.reqs, nil, fmt.Errorf("%w: %v", errStoreFailed, err))
	} else {
		f.p = p
		c.finishLocal(f, waited, err)
	}
	c.tokens <- struct{}{}
}

func (c *committer) respondAll(reqs []*appendReq, outcomes []events.Outcome, err error) {
	c.s.stats.appends.Add(uint64(len(reqs)))
	for i, r := range reqs {
		if err != nil {
			r.done <- appendResp{err: err}
			continue
		}
		r.done <- appendResp{o: outcomes[i]}
	}
}

func (c *committer) drainClosed() {
	for {
		select {
		case r := <-c.in:
			r.done <- appendResp{err: events.ErrClosed}
		default:
			return
		}
	}
}

// ErrAlreadyApplied is returned by ApplyReplicated for a raft index at or
// below the stored applied index: the entry was applied before a restart.
var ErrAlreadyApplied = errors.New("pebblelog: batch already applied")

// ApplyReplicated applies a committed raft entry holding b. It is the FSM's
// apply: the same deterministic code as local group commit, with the raft
// index stored in the same Pebble batch, so that an entry replayed after a
// restart is recognised (ErrAlreadyApplied) and skipped. Must be called by
// one goroutine at a time, in index order.
func (s *Store) ApplyReplicated(b *events.Batch, index uint64) ([]events.Outcome, error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if index <= s.seq.applied {
		return nil, ErrAlreadyApplied
	}
	p, err := s.prepare(b, index)
	if err != nil {
		return nil, err
	}
	defer p.wb.Close()
	// Not synced: the entry is already durable in the raft log of a quorum,
	// which is this store's write-ahead log in a cluster. A crash loses at
	// most an unsynced tail, which raft replays (the raft index stored with
	// the batch makes the replay exact); raft only drops entries of its log
	// after a snapshot, and Snapshot syncs first (snapshot.go). Anything
	// this node signs is synced after the events it covers (one ordered
	// WAL). Syncing here would put a third fsync in every commit's path.
	if err := s.writeBatch(p.wb); err != nil {
		return nil, fmt.Errorf("apply raft index %d: %w", index, err)
	}
	s.install(p)
	s.publish(p.head)
	return p.outcomes, nil
}
