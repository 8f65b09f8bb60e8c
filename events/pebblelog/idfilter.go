package pebblelog

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/google/uuid"
)

// idFilter is a scalable Bloom filter of every event id in the log. Almost
// every appended event has a new id, and proving absence with a Pebble Get
// costs one filter-block probe per overlapping sstable (random UUID keys
// overlap every table): measured at 60 % of the sequencer's CPU. The filter
// answers "certainly absent" from memory; "maybe present" (all real retries
// and a few false positives per ten thousand) falls through to Pebble,
// which stays the truth.
//
// It grows by adding parts of doubling capacity, so it is never rebuilt
// while the store runs; Open sizes the first part from the id index it
// scans, and at least a million ids: each part adds its own false
// positives, and one that reaches Pebble costs a filter-block read per
// overlapping sstable (measured: 9 % of the CPU of a 20 s append load with
// 64 KiB first parts and 7 probes, 0.45 % false positives at 3 million ids).
// Memory: 10 to 20 bits per id of capacity, about 2 bytes per id, up to
// a budget (Config.IDFilterBytes): past it no part is added, the last part
// takes ids beyond its capacity, and its false positives grow with them
// (never a false negative). The store's memory then stays bounded however
// long the log grows, and appends slow down gently instead.
// The bits are mapped outside the Go heap where the system allows it
// (idfilter_unix.go).
//
// One goroutine adds (the applier); any number may ask mayContain at the
// same time (EventByID answers most lookups of absent ids from it, e.g. a
// command's check for a prior refusal): bits are set and read atomically,
// and a new part is published by swapping the list.
type idFilter struct {
	seed     maphash.Seed
	parts    atomic.Pointer[[]*bloomPart]
	maxBytes int // the budget of all parts
	bytes    int // owned by the adder
}

type bloomPart struct {
	bits     []atomic.Uint64
	mask     uint64 // number of bits - 1 (a power of two)
	k        uint64 // probes per id
	n, limit int    // owned by the adder
}

// minIDFilterCapacity is the capacity of a new store's first part (2 MiB).
const minIDFilterCapacity = 1 << 20

// minBloomPartCapacity is the smallest part; a budget too small for it
// still gets one.
const minBloomPartCapacity = 64

// newIDFilter returns a filter whose first part holds capacity ids, or
// fewer if that would not fit maxBytes.
func newIDFilter(capacity, maxBytes int) *idFilter {
	f := &idFilter{seed: maphash.MakeSeed(), maxBytes: maxBytes}
	capacity = max(capacity, minBloomPartCapacity)
	for capacity > minBloomPartCapacity && bloomPartBytes(capacity) > maxBytes {
		capacity /= 2
	}
	first := newBloomPart(capacity)
	f.bytes = len(first.bits) * 8
	parts := []*bloomPart{first}
	f.parts.Store(&parts)
	return f
}

func bloomPartBits(capacity int) uint64 { return uint64(1) << bits.Len64(uint64(capacity)*10-1) }

func bloomPartBytes(capacity int) int { return int(bloomPartBits(capacity) / 8) }

// newBloomPart sizes a part for capacity ids: at least 10 bits each,
// rounded up to a power of two, and the number of probes that minimises
// false positives for the bits each id gets (k = ln 2 · bits per id: 11
// probes and 0.05 % at 16 bits, 7 and 0.8 % at 10).
func newBloomPart(capacity int) *bloomPart {
	nbits := bloomPartBits(capacity)
	k := uint64(math.Round(math.Ln2 * float64(nbits) / float64(capacity)))
	p := &bloomPart{mask: nbits - 1, k: min(max(k, 1), 16), limit: capacity}
	p.bits = allocBits(p, int(nbits/64))
	return p
}

func (f *idFilter) hash(id uuid.UUID) (uint64, uint64) {
	h := maphash.Bytes(f.seed, id[:])
	return h, bits.RotateLeft64(h, 32) | 1
}

// add records id. Only one goroutine may add.
func (f *idFilter) add(id uuid.UUID) {
	parts := *f.parts.Load()
	last := parts[len(parts)-1]
	if last.n >= last.limit {
		// The next part doubles the last one, or takes what the budget
		// has left; with too little left, the last part takes the id.
		c := last.limit * 2
		for c >= last.limit && f.bytes+bloomPartBytes(c) > f.maxBytes {
			c /= 2
		}
		if c >= last.limit {
			last = newBloomPart(c)
			f.bytes += len(last.bits) * 8
			grown := append(parts[:len(parts):len(parts)], last)
			f.parts.Store(&grown)
		} else {
			last.limit = math.MaxInt // full budget: over capacity from now on
		}
	}
	h1, h2 := f.hash(id)
	for i := uint64(0); i < last.k; i++ {
		b := (h1 + i*h2) & last.mask
		last.bits[b/64].Or(1 << (b % 64))
	}
	last.n++
}

// mayContain reports false only when id was certainly never added.
func (f *idFilter) mayContain(id uuid.UUID) bool {
	h1, h2 := f.hash(id)
	for _, p := range *f.parts.Load() {
		hit := true
		for i := uint64(0); i < p.k; i++ {
			b := (h1 + i*h2) & p.mask
			if p.bits[b/64].Load()&(1<<(b%64)) == 0 {
				hit = false
				break
			}
		}
		if hit {
			return true
		}
	}
	return false
}
