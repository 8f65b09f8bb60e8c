package pebblelog

import (
	"math"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// TestIDFilter_ConcurrentReaders: while one goroutine adds ids (growing
// the filter through several parts), readers never miss an id whose add
// returned before they asked, and ids never added are mostly refused. Run
// with -race: the bits and the list of parts are shared.
func TestIDFilter_ConcurrentReaders(t *testing.T) {
	f := newIDFilter(1 << 10) // a small first part forces growth below
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
	f := newIDFilter(capacity)
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
