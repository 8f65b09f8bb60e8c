package pebblelog

import (
	"math"

	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/google/uuid"
)

// TestIDFilter_ConcurrentReaders: while one goroutine adds ids (growing
// the filter through several parts), readers never miss an id whose add
// returned before they asked, and ids never added are mostly refused. Run
// with -race: the bits and the list of parts are shared.
func TestIDFilter_ConcurrentReaders(t *testing.T) {
	f := newIDFilter(1<<10, 1<<30) // a small first part forces growth below
	const n = 300_000
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	var added sync.WaitGroup
	progress := make(chan int, n/1000)
	added.Add(1)
	go func() {
		defer added.Done()
		defer close(progress)
		for i, id := range ids {
			f.add(id)
			if (i+1)%1000 == 0 {
				progress <- i + 1
			}
		}
	}()
	var readers sync.WaitGroup
	misses := make(chan uuid.UUID, 1)
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for upto := range progress {
				for _, id := range ids[upto-1000 : upto] {
					if !f.mayContain(id) {
						select {
						case misses <- id:
						default:
						}
						return
					}
				}
			}
		}()
	}
	added.Wait()
	readers.Wait()
	select {
	case id := <-misses:
		t.Fatalf("id %s was added but the filter says it is absent", id)
	default:
	}
	if parts := len(*f.parts.Load()); parts < 3 {
		t.Fatalf("the filter has %d parts after %d adds; the test meant to cross part boundaries", parts, n)
	}
	falsePositives := 0
	for range 100_000 {
		if f.mayContain(uuid.New()) {
			falsePositives++
		}
	}
	// About 1 % per part; a few parts give a few percent at most.
	if falsePositives > 5_000 {
		t.Fatalf("%d of 100000 never-added ids reported present", falsePositives)
	}
}

// Each part uses the number of probes that suits the bits it gives each id,
// and a full part's false positive rate is what that choice promises.
func TestIDFilter_PartFalsePositives(t *testing.T) {
	for _, c := range []struct {
		capacity int
		k        uint64
		bitsPer  float64
	}{
		{1 << 16, 11, 16},         // a power of two: 16 bits per id
		{100_000, 7, 10.48576},    // rounded up to 2^20 bits
		{1 << 20, 11, 16},         // a new store's first part
		{1_500_000, 8, 11.184811}, // rounded up to 2^24 bits
	} {
		p := newBloomPart(c.capacity)
		if p.k != c.k {
			t.Errorf("capacity %d: %d probes, want %d", c.capacity, p.k, c.k)
		}
		if got := float64(p.mask+1) / float64(c.capacity); math.Abs(got-c.bitsPer) > 1e-5 {
			t.Errorf("capacity %d: %.5f bits per id, want %.5f", c.capacity, got, c.bitsPer)
		}
	}

	const capacity = 1 << 16
	f := newIDFilter(capacity, 1<<30)
	for range capacity {
		f.add(uuid.New())
	}
	if parts := len(*f.parts.Load()); parts != 1 {
		t.Fatalf("%d parts after %d adds, want 1", parts, capacity)
	}
	const probes = 400_000
	fp := 0
	for range probes {
		if f.mayContain(uuid.New()) {
			fp++
		}
	}
	// (1 - e^(-k/16))^k: 0.046 % for k = 11; 7 probes would give 0.071 %.
	want := math.Pow(1-math.Exp(-11.0/16), 11) * probes
	if float64(fp) > 1.5*want {
		t.Fatalf("%d false positives in %d probes of a full part, expected about %.0f", fp, probes, want)
	}
}

// Past its budget the filter adds no part: the last one takes the ids
// beyond its capacity. Memory stays within the budget, no added id is ever
// reported absent, and false positives grow only as the last part fills.
func TestIDFilter_Budget(t *testing.T) {
	const budget = 80 << 10 // parts of 1 Ki (2 KiB), 2 Ki, 4 Ki, 8 Ki, 16 Ki ids (32 KiB): 62 KiB, no room for another 16 Ki
	f := newIDFilter(1<<10, budget)
	ids := make([]uuid.UUID, 120_000)
	for i := range ids {
		ids[i] = uuid.New()
		f.add(ids[i])
	}
	parts := *f.parts.Load()
	var capacities []int
	total := 0
	for _, p := range parts {
		capacities = append(capacities, p.limit)
		total += len(p.bits) * 8
	}
	want := []int{1 << 10, 2 << 10, 4 << 10, 8 << 10, math.MaxInt}
	if diff := cmp.Diff(want, capacities); diff != "" {
		t.Fatalf("part capacities (-want +got):\n%s", diff)
	}
	if total > budget || total != f.bytes {
		t.Fatalf("parts hold %d bytes (counted %d), budget %d", total, f.bytes, budget)
	}
	for _, id := range ids {
		if !f.mayContain(id) {
			t.Fatalf("id %s was added but the filter says it is absent", id)
		}
	}
	fp := 0
	for range 20_000 {
		if f.mayContain(uuid.New()) {
			fp++
		}
	}
	// The last part (16 Ki ids' worth of bits) holds ~105,000 ids: about
	// 2.5 bits per id, so most probes hit set bits; the earlier parts add
	// their own ~0.05 %. What matters is that the filter still answers.
	if fp == 0 || fp == 20_000 {
		t.Fatalf("%d false positives of 20000: an overfull part should give some, and not all", fp)
	}

	// A budget below the first part's size shrinks the first part.
	small := newIDFilter(1<<20, 64<<10)
	if got := (*small.parts.Load())[0].limit; bloomPartBytes(got) > 64<<10 || got < 1<<15 {
		t.Fatalf("first part of %d ids for a 64 KiB budget", got)
	}
}
