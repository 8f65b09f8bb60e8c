package pebblelog

import (
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"github.com/greffe/greffe/events"
)

// Histogram is a snapshot of one of the store's fixed-bucket histograms, in
// the shape Prometheus exposes: Bounds are the buckets' inclusive upper
// bounds, ascending, in the histogram's unit (seconds for latencies,
// events for batch sizes); Counts[i] counts the observations in bucket i
// (not cumulative), and Counts[len(Bounds)] those above the last bound.
// Count is the sum of Counts; Sum the sum of the observed values, in the
// same unit.
//
// A snapshot is taken without stopping writers: Count always equals the
// sum of Counts, but Sum may include an observation whose bucket was not
// counted yet (or the reverse). Over a scrape interval that is noise.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
}

// Histograms are the store's distributions, read by the metrics endpoint.
type Histograms struct {
	// Append is the latency of Append calls that reached the group commit,
	// from queueing to answer (seconds), whatever the answer.
	Append Histogram
	// Fsync is the time the syncer waited for each batch's fsync
	// (seconds). Local mode only: in a cluster the raft log is the
	// write-ahead log and replicated batches are applied without a sync.
	Fsync Histogram
	// BatchEvents is the number of events of each committed batch: one
	// observation per fsync (local mode) or per replicated batch this node
	// proposed (cluster mode), so its Count is the batches and its Sum the
	// events committed through this node's group commit.
	BatchEvents Histogram
}

// latencyBounds are the upper bounds of the latency buckets, in seconds:
// from 50 µs (an fsync on NVMe with a write cache) to 10 s (a stalled disk
// or a raft round without quorum), about two buckets per doubling, so that
// a dashboard's quantile estimate stays within a factor of 2.5. A table,
// never written: snapshots hand out copies.
var latencyBounds = [...]float64{
	50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3,
	1, 2.5, 5, 10,
}

// batchBuckets is the number of batch-size buckets: powers of two from 1
// to 8192, the default MaxBatchEvents.
const batchBuckets = 14 // 2^0 … 2^13

// latencyHistogram records durations in fixed memory with atomics only:
// Observe is a short scan of 17 bounds and two atomic adds, cheap enough
// for the commit path. Safe for concurrent use.
type latencyHistogram struct {
	counts [len(latencyBounds) + 1]atomic.Uint64
	nanos  atomic.Uint64
}

func (h *latencyHistogram) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(latencyBounds) && s > latencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.nanos.Add(uint64(max(d, 0)))
}

func (h *latencyHistogram) snapshot() Histogram {
	out := Histogram{Bounds: slices.Clone(latencyBounds[:]), Counts: make([]uint64, len(h.counts))}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
		out.Count += out.Counts[i]
	}
	out.Sum = time.Duration(h.nanos.Load()).Seconds()
	return out
}

// sizeHistogram records batch sizes in power-of-two buckets; Observe is a
// bit length and two atomic adds. Safe for concurrent use.
type sizeHistogram struct {
	counts [batchBuckets + 1]atomic.Uint64
	sum    atomic.Uint64
}

func (h *sizeHistogram) observe(n int) {
	// Bucket 0 holds 0 and 1 (a batch of duplicates writes nothing); bucket
	// i > 0 holds (2^(i-1), 2^i]: the bit length of n-1.
	n = max(n, 0)
	i := 0
	if n > 1 {
		i = min(bits.Len64(uint64(n-1)), batchBuckets)
	}
	h.counts[i].Add(1)
	h.sum.Add(uint64(n))
}

// writtenEvents counts the events a replicated batch wrote: duplicates and
// refused appends write none.
func writtenEvents(outcomes []events.Outcome) int {
	n := 0
	for _, o := range outcomes {
		if o.Err == nil && !o.Duplicate {
			n += len(o.Events)
		}
	}
	return n
}

func (h *sizeHistogram) snapshot() Histogram {
	out := Histogram{Bounds: make([]float64, batchBuckets), Counts: make([]uint64, len(h.counts))}
	for i := range out.Bounds {
		out.Bounds[i] = float64(uint64(1) << i)
	}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
		out.Count += out.Counts[i]
	}
	out.Sum = float64(h.sum.Load())
	return out
}

// commitMetrics are the distributions the group commit records. The zero
// value is ready; it lives in the committer, which owns the recording
// points (commit.go).
type commitMetrics struct {
	append latencyHistogram
	fsync  latencyHistogram
	batch  sizeHistogram
}

// Histograms returns a snapshot of the store's distributions. Safe for
// concurrent use; it reads atomics only.
func (s *Store) Histograms() Histograms {
	m := &s.commit.metrics
	return Histograms{Append: m.append.snapshot(), Fsync: m.fsync.snapshot(), BatchEvents: m.batch.snapshot()}
}

// DiskUsage returns the bytes the ledger uses on disk (Pebble's tables and
// manifests, from its in-memory metrics, and the write-ahead log's segment
// files, listed), or 0 once the store is closed. For the metrics endpoint.
func (s *Store) DiskUsage() uint64 {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	// Close marks the store closed before it takes dbMu to close Pebble:
	// holding the read lock with closed still false keeps db open.
	if s.closed.Load() {
		return 0
	}
	n := s.db.Metrics().DiskSpaceUsage()
	return n + s.log.diskBytes()
}
