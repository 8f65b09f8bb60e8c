package pebblelog

import (
	"sync"
	"testing"

	"github.com/google/uuid"
)

// TestIDFilter_ConcurrentReaders: while one goroutine adds ids (growing
// the filter through several parts), readers never miss an id whose add
// returned before they asked, and ids never added are mostly refused. Run
// with -race: the bits and the list of parts are shared.
func TestIDFilter_ConcurrentReaders(t *testing.T) {
	f := newIDFilter(1 << 10) // the minimum part (1<<16) forces growth below
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
