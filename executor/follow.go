package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// Following the log: the subscription to the measurement events, the
// workers it feeds the requests of this host to, and the low-water mark
// kept in the state file (state.go) to resume from.

// jobQueue bounds the requests waiting for a worker. A full queue holds
// the subscription back (backpressure; the node reads ahead from disk),
// so memory stays bounded however many requests arrive.
const jobQueue = 16

// saveEvery throttles writes of the state file while following.
const saveEvery = time.Second

// job is one request for a worker.
type job struct {
	req aggregates.MeasurementRequested
	// approvedByNonWriter says that a principal who is not a writer (the
	// node's approver role) approved this exact request. It stands in for
	// the host policy's allowlists (runs, hash_paths, probe_hosts), never
	// for its address classes nor allow_root_runs, and not at all when
	// the policy sets ignore_approvals (HostPolicy.approvalCovers).
	//
	// TODO(#20): always false until the node records approvals of
	// measurements (MeasurementApproved{measurement_id, approver, at} on
	// the measurement's stream, appended by ApproveMeasurement only for an
	// approver-role principal). Then follow sets it: see docs/EXECUTOR.md
	// "Approvals" for what is to be wired.
	approvedByNonWriter bool
}

// tracker keeps the requests of this host not yet settled, to compute the
// position to resume from. Safe for concurrent use.
type tracker struct {
	mu   sync.Mutex
	open map[string]uint64 // request id -> position of its request; guarded by mu
	next uint64            // position after the last event seen; guarded by mu
}

func (t *tracker) add(id string, pos uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open[id] = pos
}

func (t *tracker) settle(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open, id)
}

func (t *tracker) seen(pos uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next = max(t.next, pos+1)
}

// from returns the low-water mark: the oldest open request, or the
// position after the last event seen.
func (t *tracker) from() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.next
	for _, p := range t.open {
		w = min(w, p)
	}
	return w
}

// follow subscribes from position from and feeds the workers.
func (x *Executor) follow(ctx context.Context, from uint64) error {
	t := &tracker{open: map[string]uint64{}, next: from}
	jobs := make(chan job, jobQueue)
	var wg sync.WaitGroup
	for range x.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				x.measure(ctx, t, j)
			}
		}()
	}
	saved, lastSave := from, time.Now()
	save := func(force bool) {
		if w := t.from(); w != saved && (force || time.Since(lastSave) >= saveEvery) {
			if err := saveFrom(x.cfg.StateFile, x.cfg.ExecutorID, x.cfg.Host, w); err != nil {
				x.cfg.Logger.Warn("state file", "err", err)
				return
			}
			saved, lastSave = w, time.Now()
		}
	}
	filter := events.Filter{Types: []string{
		aggregates.TypeMeasurementRequested, aggregates.TypeMeasurementClaimed, aggregates.TypeMeasurementRecorded,
		aggregates.TypeMeasurementUncertain, events.TypeExecutorKeyRevoked,
	}}
	err := x.cfg.Client.Subscribe(ctx, from, filter, func(e events.Event) error {
		defer save(false)
		defer t.seen(e.Position)
		switch {
		case e.Type == events.TypeExecutorKeyRevoked:
			var d events.KeyRevokedData
			if json.Unmarshal(e.Data, &d) == nil && d.KeyID == x.keyID && e.Stream == aggregates.ExecutorStream(x.cfg.ExecutorID) {
				x.revoked.Store(true)
				return fmt.Errorf("%w: %s (position %d)", ErrKeyRevoked, x.keyID, e.Position)
			}
		case !strings.HasPrefix(e.Stream, aggregates.MeasurementPrefix):
		case e.Type == aggregates.TypeMeasurementRequested:
			var req aggregates.MeasurementRequested
			if err := json.Unmarshal(e.Data, &req); err != nil {
				x.cfg.Logger.Warn("undecodable request", "position", e.Position, "err", err)
				return nil
			}
			if req.Host != x.cfg.Host {
				return nil
			}
			t.add(req.MeasurementID, e.Position)
			select {
			case jobs <- job{req: req, approvedByNonWriter: false}: // TODO(#20): see job
			case <-ctx.Done():
				return ctx.Err()
			}
		default: // claimed, recorded or uncertain: settled for the resume position
			t.settle(strings.TrimPrefix(e.Stream, aggregates.MeasurementPrefix))
		}
		return nil
	})
	close(jobs)
	wg.Wait()
	save(true)
	switch {
	case errors.Is(err, ErrKeyRevoked):
		x.cfg.Logger.Warn("key revoked: signing nothing more", "key_id", x.keyID)
		return err
	case ctx.Err() != nil:
		return nil
	}
	return fmt.Errorf("follow: %w", err)
}
