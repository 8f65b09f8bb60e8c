package node

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// KeyRing is the node's view of the keys that may sign events: it folds
// every ExecutorKeyRegistered and ExecutorKeyRevoked event of the log, in
// order, through a subscription it owns (started by startKeyRing, stopped
// by Close). The API checks appended envelopes against it
// (api.Server.UseKeyRing). Safe for concurrent use.
type KeyRing struct {
	mu      sync.RWMutex
	ring    *events.KeyRing // guarded by mu
	applied uint64          // guarded by mu: the first applied events are folded
	wake    chan struct{}   // guarded by mu: closed at the next advance, when non-nil
	err     error           // guarded by mu: why the subscription stopped

	cancel context.CancelFunc
	done   chan struct{}
}

// startKeyRing subscribes to log from position 0 and keeps the ring
// current until Close.
func startKeyRing(log events.Subscriber, logger *slog.Logger) *KeyRing {
	ctx, cancel := context.WithCancel(context.Background())
	k := &KeyRing{ring: events.NewKeyRing(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(k.done)
		var err error
		if ps, ok := log.(progressSubscriber); ok {
			// Only the executors' key events, and how far the log was read:
			// the rest of the log is skipped unread.
			err = ps.SubscribeProgress(ctx, 0, events.Filter{StreamPrefix: events.KeyStreamPrefix}, k.apply, k.reached)
		} else {
			err = log.Subscribe(ctx, 0, events.Filter{}, k.apply)
		}
		if ctx.Err() != nil {
			err = errors.New("the node is closing")
		} else {
			logger.Error("key ring subscription stopped: signed appends are refused", "err", err)
		}
		k.mu.Lock()
		k.err = fmt.Errorf("key ring: %w", err)
		if k.wake != nil {
			close(k.wake)
			k.wake = nil
		}
		k.mu.Unlock()
	}()
	return k
}

// progressSubscriber is the capability of a log that subscribes with a
// filter and tells how far it read (*pebblelog.Store).
type progressSubscriber interface {
	SubscribeProgress(ctx context.Context, from uint64, f events.Filter, fn func(events.Event) error, progress func(next uint64)) error
}

var _ progressSubscriber = (*pebblelog.Store)(nil)

// reached records that the events below next were all read.
func (k *KeyRing) reached(next uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if next > k.applied {
		k.applied = next
		if k.wake != nil {
			close(k.wake)
			k.wake = nil
		}
	}
}

// apply folds one event (in position order) and wakes waiters.
func (k *KeyRing) apply(e events.Event) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ring.Apply(&e) // only executor-stream key events count (events.IsKeyEvent)
	k.applied = e.Position + 1
	if k.wake != nil {
		close(k.wake)
		k.wake = nil
	}
	return nil
}

// LookupAt implements api.KeyRing: it waits until the first size events
// are folded (or ctx ends) and returns a lookup of the current ring.
func (k *KeyRing) LookupAt(ctx context.Context, size uint64) (events.KeyLookup, error) {
	for {
		k.mu.Lock()
		switch {
		case k.applied >= size:
			k.mu.Unlock()
			return k.lookup, nil
		case k.err != nil:
			err := k.err
			k.mu.Unlock()
			return nil, err
		}
		if k.wake == nil {
			k.wake = make(chan struct{})
		}
		wake := k.wake
		k.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (k *KeyRing) lookup(keyID string) (ed25519.PublicKey, bool, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.ring.Lookup(keyID)
}

// Close stops the subscription and waits for it. Idempotent.
func (k *KeyRing) Close() error {
	k.cancel()
	<-k.done
	return nil
}

// startKeyRing starts the node's key ring on its store and makes the API
// check appended envelopes against it. The ring stops before the store
// closes.
func (n *Node) startKeyRing() {
	kr := startKeyRing(n.Store, n.cfg.Logger)
	n.API.UseKeyRing(kr)
	n.closers = append([]func() error{kr.Close}, n.closers...)
}
