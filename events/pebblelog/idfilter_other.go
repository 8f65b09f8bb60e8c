//go:build !unix

package pebblelog

import "sync/atomic"

// allocBits returns words zeroed 64-bit words for p's bits (on the heap;
// see idfilter_unix.go).
func allocBits(_ *bloomPart, words int) []atomic.Uint64 { return make([]atomic.Uint64, words) }
