package bench

import (
	"math/bits"
	"time"
)

// histogram records durations in fixed memory: log-linear buckets, 32 per
// power of two (about 3 % resolution), from 1 µs to about 18 minutes. A long
// run with millions of appends keeps the load generator's memory flat, so
// the peak RSS it reports is the target's.
type histogram struct {
	counts [40 * subBuckets]uint64
	n      uint64
}

const subBuckets = 32

func bucketOf(d time.Duration) int {
	us := uint64(max(d.Microseconds(), 1))
	exp := bits.Len64(us) - 1 // us in [2^exp, 2^(exp+1))
	var sub uint64
	if exp >= 5 {
		sub = (us >> (exp - 5)) & (subBuckets - 1)
	} else {
		sub = (us << (5 - exp)) & (subBuckets - 1)
	}
	return min(exp*subBuckets+int(sub), 40*subBuckets-1)
}

// lowerBound returns the smallest duration of bucket b.
func lowerBound(b int) time.Duration {
	exp, sub := b/subBuckets, uint64(b%subBuckets)
	var us uint64
	if exp >= 5 {
		us = (1 << exp) | sub<<(exp-5)
	} else {
		us = ((1 << 5) | sub) >> (5 - exp)
	}
	return time.Duration(us) * time.Microsecond
}

func (h *histogram) record(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the lower bound of the bucket holding quantile q.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	target := uint64(float64(h.n-1)*q) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= target {
			return lowerBound(i)
		}
	}
	return lowerBound(len(h.counts) - 1)
}
