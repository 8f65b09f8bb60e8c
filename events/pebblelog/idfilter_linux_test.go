package pebblelog

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapped reports whether every page of [addr, addr+size) is mapped:
// mincore fails with ENOMEM on an unmapped page. (Counting entries of
// /proc/self/maps does not work: the kernel merges adjacent anonymous
// mappings.)
func mapped(t *testing.T, addr uintptr, size int) bool {
	t.Helper()
	vec := make([]byte, (size+unix.Getpagesize()-1)/unix.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, addr, uintptr(size), uintptr(unsafe.Pointer(&vec[0])))
	if errno == unix.ENOMEM {
		return false
	}
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	return true
}

// A part's bits live outside the Go heap (so they do not raise the
// collector's target) and are unmapped once the part is unreachable.
func TestIDFilter_BitsOutsideTheHeap(t *testing.T) {
	const capacity = 3 << 20 // 2^25 bits: a 4 MiB mapping
	size := bloomPartBytes(capacity)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	p := newBloomPart(capacity)
	p.bits[len(p.bits)-1].Store(1) // the whole range is usable
	runtime.ReadMemStats(&m1)
	if grew := int64(m1.HeapAlloc) - int64(m0.HeapAlloc); grew > int64(size)/4 {
		t.Fatalf("the heap grew by %d bytes for a part of %d bytes", grew, size)
	}
	addr := uintptr(unsafe.Pointer(&p.bits[0]))
	if !mapped(t, addr, size) {
		t.Fatalf("the part's %d bytes at %#x are not mapped", size, addr)
	}
	runtime.KeepAlive(p)
	p = nil
	// The cleanup runs on the runtime's cleanup goroutine some time after
	// the collection that finds the part unreachable: on a loaded machine
	// (CI, with the race run beside it) fifty collections in a row were
	// not enough time for it to be scheduled. Wait on the clock instead.
	deadline := time.Now().Add(20 * time.Second)
	for n := 1; ; n++ {
		runtime.GC()
		if !mapped(t, addr, size) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the part's mapping of %d bytes at %#x was not released after %d collections in 20 s", size, addr, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
