package node

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
)

// The lease watcher is who notices that an executor vanished: it follows
// the log's claims, renewals and results, and once a claim's lease has
// passed without a result it sends MarkMeasurementUncertain, so the ledger
// says "uncertain" instead of waiting forever (DOMAIN.md: a measurement
// whose executor vanished is uncertain, not failed and not retried). The
// node does it, not an executor, because the executor is what may be gone.
//
// Time is the command handler's clock (a commands.ManualClock in tests and
// fixtures): expiry is judged by the same clock that decides the command,
// so the watcher never sends a mark the gate would refuse as lease_held
// except when a renewal is still on its way through the log. Sending the
// same mark twice is harmless: its command id is derived from the
// measurement and the lease it expires, and the gate appends nothing for a
// measurement already uncertain.

const (
	// leasePollInterval is how often pending leases are compared with the
	// clock: an expiry is noticed at most this late. One second against
	// leases of seconds to minutes.
	leasePollInterval = time.Second
	// leaseUpdates bounds the claims and results waiting between the
	// subscription and the watcher; a full buffer holds the subscription
	// back (it reads from disk, so nothing is lost).
	leaseUpdates = 256
	// leaseWatcherActor is the principal of the marks the node sends.
	leaseWatcherActor = "node:lease-watcher"
)

// watchLeases starts the lease watcher, stopped by Close before the
// projections and the store. Not on a settable clock (tests, fixtures,
// `greffe demo`): there time jumps with each command's "at", and a replayed
// history says itself when a lease expired; a watcher acting between two of
// its commands would rewrite it.
//
// REQUIRES: n.Store and n.Commands are open.
func (n *Node) watchLeases() {
	if n.Commands.Settable() {
		return
	}
	// In a cluster only the leader marks: a follower's command would be
	// refused with not_leader every tick, and the leader's watcher sees the
	// same log.
	var active func() bool
	if rep := n.Replicator(); rep != nil {
		active = rep.IsLeader
	}
	lw := startLeaseWatcher(n.Store, n.Commands, n.cfg.Logger, leasePollInterval, active)
	n.closers = append([]func() error{lw.Close}, n.closers...)
}

// leaseNamespace derives the watcher's command ids.
var leaseNamespace = uuid.MustParse("2c7f3f8e-5d0b-4f5e-9a51-6c1f0d6a7e21")

// leaseWatcher is started by Open and stopped by Close. Its only state
// lives in its goroutine.
type leaseWatcher struct {
	// active reports whether this watcher should mark expired leases now
	// (nil: always, a single node).
	active func() bool
	log    events.Subscriber
	cmds   *commands.Handler
	logger *slog.Logger
	poll   time.Duration
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// leaseUpdate is one fact about a lease: the lease now ends at until, or
// (settled) the measurement has a result or is already uncertain.
type leaseUpdate struct {
	id      string
	until   time.Time
	settled bool
}

// startLeaseWatcher starts following log from position 0 (a restarted node
// finds the leases still open).
func startLeaseWatcher(log events.Subscriber, cmds *commands.Handler, logger *slog.Logger, poll time.Duration, active func() bool) *leaseWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &leaseWatcher{log: log, cmds: cmds, logger: logger, poll: poll, cancel: cancel, active: active}
	updates := make(chan leaseUpdate, leaseUpdates)
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		w.follow(ctx, updates)
	}()
	go func() {
		defer w.wg.Done()
		w.watch(ctx, updates)
	}()
	return w
}

// Close stops the watcher and waits for it. Idempotent.
func (w *leaseWatcher) Close() error {
	w.once.Do(func() {
		w.cancel()
		w.wg.Wait()
	})
	return nil
}

// follow subscribes to the measurement events and turns them into
// updates, resubscribing from where it was after a failure.
func (w *leaseWatcher) follow(ctx context.Context, out chan<- leaseUpdate) {
	filter := events.Filter{StreamPrefix: aggregates.MeasurementPrefix, Types: []string{
		aggregates.TypeMeasurementClaimed, aggregates.TypeMeasurementLeaseRenewed,
		aggregates.TypeMeasurementRecorded, aggregates.TypeMeasurementUncertain,
	}}
	var next uint64
	for {
		err := w.log.Subscribe(ctx, next, filter, func(e events.Event) error {
			next = e.Position + 1
			u := leaseUpdate{id: strings.TrimPrefix(e.Stream, aggregates.MeasurementPrefix)}
			switch e.Type {
			case aggregates.TypeMeasurementClaimed, aggregates.TypeMeasurementLeaseRenewed:
				var d struct {
					LeaseUntil time.Time `json:"lease_until"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					w.logger.Warn("lease watcher: undecodable lease", "position", e.Position, "err", err)
					return nil
				}
				u.until = d.LeaseUntil
			default:
				u.settled = true
			}
			select {
			case out <- u:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if ctx.Err() != nil {
			return
		}
		w.logger.Warn("lease watcher: subscription ended; resubscribing", "from", next, "err", err)
		t := time.NewTimer(w.poll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// watch keeps the open leases and marks the expired ones uncertain.
func (w *leaseWatcher) watch(ctx context.Context, in <-chan leaseUpdate) {
	open := map[string]time.Time{}
	tick := time.NewTicker(w.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-in:
			switch {
			case u.settled:
				delete(open, u.id)
			case u.until.After(open[u.id]):
				open[u.id] = u.until
			}
		case <-tick.C:
			now := w.cmds.Clock()()
			for id, until := range open {
				if now.Before(until) {
					continue
				}
				if w.mark(ctx, id, until) {
					delete(open, id)
				}
			}
		}
	}
}

// mark sends MarkMeasurementUncertain for a lease that ended at until. It
// reports whether the lease is settled (marked now or before, or the
// measurement has its result); a lease_held refusal means a renewal is on
// its way, and a failure is tried again at the next tick.
func (w *leaseWatcher) mark(ctx context.Context, id string, until time.Time) bool {
	if w.active != nil && !w.active() {
		return false // not the leader: keep the lease pending, another node marks it
	}
	data, err := json.Marshal(aggregates.MarkMeasurementUncertain{MeasurementID: aggregates.ID(id)})
	if err != nil {
		return false
	}
	cid := uuid.NewSHA1(leaseNamespace, []byte(id+"\x00"+until.UTC().Format(time.RFC3339Nano)))
	_, err = w.cmds.Handle(ctx, commands.Request{Command: "MarkMeasurementUncertain", ID: cid.String(),
		Principal: aggregates.Principal{Name: leaseWatcherActor, Role: aggregates.RoleWriter}, Data: data})
	var re *commands.RefusedError
	switch {
	case err == nil:
		w.logger.Info("measurement uncertain: its lease passed without a result", "measurement", id, "lease_until", until)
		return true
	case errors.As(err, &re) && re.Refusal.Code == aggregates.CodeLeaseHeld:
		return false
	case errors.As(err, &re):
		return true // recorded, unknown: nothing left to mark
	}
	if ctx.Err() == nil {
		w.logger.Warn("lease watcher: mark uncertain", "measurement", id, "err", err)
	}
	return false
}
