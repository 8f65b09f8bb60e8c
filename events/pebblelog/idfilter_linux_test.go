package pebblelog

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// mappingsOfSize counts this process's mappings of exactly size bytes.
func mappingsOfSize(t *testing.T, size uint64) int {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lo, hi, ok := strings.Cut(strings.Fields(sc.Text())[0], "-")
		if !ok {
			continue
		}
		a, _ := strconv.ParseUint(lo, 16, 64)
		b, _ := strconv.ParseUint(hi, 16, 64)
		if b-a == size {
			n++
		}
	}
	return n
}

// A part's bits live outside the Go heap (so they do not raise the
// collector's target) and are unmapped once the part is unreachable.
func TestIDFilter_BitsOutsideTheHeap(t *testing.T) {
	const capacity = 3 << 20 // 2^25 bits: a 4 MiB mapping
	size := uint64(bloomPartBytes(capacity))
	before := mappingsOfSize(t, size)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	p := newBloomPart(capacity)
	p.bits[len(p.bits)-1].Store(1) // the whole range is usable
	runtime.ReadMemStats(&m1)
	if grew := int64(m1.HeapAlloc) - int64(m0.HeapAlloc); grew > int64(size)/4 {
		t.Fatalf("the heap grew by %d bytes for a part of %d bytes", grew, size)
	}
	if got := mappingsOfSize(t, size); got != before+1 {
		t.Fatalf("%d mappings of %d bytes with the part, %d before", got, size, before)
	}
	runtime.KeepAlive(p)
	p = nil
	for range 50 {
		runtime.GC()
		if mappingsOfSize(t, size) == before {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("the part's mapping of %d bytes was not released", size)
}
