//go:build unix

package pebblelog

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// allocBits returns words zeroed 64-bit words for p's bits, mapped outside
// the Go heap: the filter is the store's largest long-lived allocation
// (64 MiB at most), and on the heap it would double the collector's target
// (GOGC=100) and so cost twice its size in memory. The mapping is released
// when p becomes unreachable; a reader holding p keeps it mapped.
func allocBits(p *bloomPart, words int) []atomic.Uint64 {
	mem, err := syscall.Mmap(-1, 0, words*8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]atomic.Uint64, words) // the heap still works
	}
	runtime.AddCleanup(p, func(m []byte) { _ = syscall.Munmap(m) }, mem)
	return unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(mem))), words)
}
