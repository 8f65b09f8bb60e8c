package events_test

import (
	"bytes"
	"crypto/rand"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/greffe/greffe/events"
)

// The store's and the auditor's allocation-free hashes must give the
// reference's answers, for the 32-byte children they use and (HashChildren)
// for any other length.
func TestHashChildren_MatchesRFC6962(t *testing.T) {
	h := func(n int, fill byte) []byte { return bytes.Repeat([]byte{fill}, n) }
	random := make([]byte, 64)
	_, _ = rand.Read(random)
	for _, c := range []struct {
		name string
		l, r []byte
	}{
		{"32+32", h(32, 1), h(32, 2)},
		{"random 32+32", random[:32], random[32:]},
		{"empty", nil, nil},
		{"31+33", h(31, 3), h(33, 4)},
		{"64+32", h(64, 5), h(32, 6)},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := rfc6962.DefaultHasher.HashChildren(c.l, c.r)
			if diff := cmp.Diff(want, events.HashChildren(c.l, c.r)); diff != "" {
				t.Errorf("HashChildren (-rfc6962 +events):\n%s", diff)
			}
			if len(c.l) == 32 && len(c.r) == 32 {
				if got := events.NodeHash(c.l, c.r); !bytes.Equal(got[:], want) {
					t.Errorf("NodeHash = %x, want %x", got, want)
				}
			}
		})
	}
}

func TestLeafHash_MatchesRFC6962UnderConcurrency(t *testing.T) {
	inputs := [][]byte{nil, {0}, bytes.Repeat([]byte("x"), 63), bytes.Repeat([]byte("y"), 65535)}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				in := inputs[(g+i)%len(inputs)]
				got := events.LeafHash(in)
				if want := rfc6962.DefaultHasher.HashLeaf(in); !bytes.Equal(got[:], want) {
					t.Errorf("LeafHash(%d bytes) = %x, want %x", len(in), got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
