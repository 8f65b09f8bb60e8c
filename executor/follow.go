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
//
// Approvals (issue #20). While the host policy honours approvals (it does
// not set ignore_approvals), a request the policy refuses but that an
// approval could cover (awaitsApproval: a run matching no template, a hash
// path outside hash_paths, a probe host not listed; never root, an address
// class or a ".." path) is not claimed: it stays requested, visible as
// such in the measurements projection, and nothing is done for it. What
// brings it back is its MeasurementApproved, which the node appends on the
// request's stream only for an approver-role principal (or the admin) and
// only before any claim: on it, the loop reads the stream once
// (approvedJob), and queues the request, as recorded there, with
// approvedByNonWriter set. Nothing about a waiting request is kept in
// memory, so there is no set to bound, and the resume position is never
// pinned by a request nobody approves: an approval is never missed all
// the same, because the position is not moved past an approval before the
// request it names has been claimed (the approval's own position is held
// open in the tracker until then), and an approval that came while the
// executor was down lies after the saved position. Replaying from 0 reads
// the requests and their approvals again in log order; whatever is claimed
// or done by now is skipped (settled), whoever claimed it.

// approvalStreamRead bounds the events read of a measurement's stream to
// judge an approval: its MeasurementRequested, its MeasurementApproved,
// and a third event if any (a claim, an uncertainty or a result: then it
// was decided already).
const approvalStreamRead = 3

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
	// node's approver role, or the admin) approved this exact request: its
	// stream holds a MeasurementApproved and no claim (approvedJob). It
	// stands in for the host policy's allowlists (runs, hash_paths,
	// probe_hosts), never for its address classes, allow_root_runs or a
	// ".." in a hash path, and not at all when the policy sets
	// ignore_approvals (HostPolicy.approvalCovers).
	approvedByNonWriter bool
	// approver is the approving principal's name, for the log.
	approver string
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

// isOpen reports whether id was queued and is not settled yet.
func (t *tracker) isOpen(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.open[id]
	return ok
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
	honoured := !x.policy.IgnoreApprovals
	types := []string{
		aggregates.TypeMeasurementRequested, aggregates.TypeMeasurementClaimed, aggregates.TypeMeasurementRecorded,
		aggregates.TypeMeasurementUncertain, events.TypeExecutorKeyRevoked,
	}
	if honoured {
		types = append(types, aggregates.TypeMeasurementApproved)
	}
	filter := events.Filter{Types: types}
	queue := func(j job) error {
		select {
		case jobs <- j:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
			if honoured && x.awaitsApproval(req) {
				x.cfg.Logger.Info("not allowed by the host policy: left unclaimed until an approver approves it (ApproveMeasurement)",
					"measurement", req.MeasurementID, "kind", req.Kind, "position", e.Position)
				return nil
			}
			t.add(req.MeasurementID, e.Position)
			return queue(job{req: req})
		case e.Type == aggregates.TypeMeasurementApproved:
			var d aggregates.MeasurementApproved
			if err := json.Unmarshal(e.Data, &d); err != nil {
				x.cfg.Logger.Warn("undecodable approval", "position", e.Position, "err", err)
				return nil
			}
			id := strings.TrimPrefix(e.Stream, aggregates.MeasurementPrefix)
			if d.Host != "" && d.Host != x.cfg.Host || t.isOpen(id) {
				// Another host's, or queued already (the policy allowed it,
				// or it could not be covered): decided without it.
				return nil
			}
			j, err := x.approvedJob(ctx, id)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case err != nil:
				// Held open: the next start reads this approval again.
				t.add(id, e.Position)
				x.cfg.Logger.Warn("approval not followed: its request could not be read; it is read again at the next start",
					"measurement", id, "position", e.Position, "err", err)
				return nil
			case j == nil:
				return nil
			}
			t.add(id, e.Position)
			return queue(*j)
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

// awaitsApproval reports whether req is one the host policy refuses by
// itself but an approval would let run: it is then left unclaimed while
// approvals are honoured. A request no approval could cover (root without
// allow_root_runs, an address class, a ".." path, an argv of the wrong
// shape) is not: it is claimed and answered refused_by_host at once.
func (x *Executor) awaitsApproval(req aggregates.MeasurementRequested) bool {
	d := x.decide(req, false)
	return d.refusal != nil && d.argvErr == nil && x.decide(req, true).refusal == nil
}

// approvedJob reads measurement id's stream and returns the job of its
// request when the stream shows it approved, for this host, and neither
// claimed nor settled; nil when it does not (another host's, claimed by
// now, or an approval the node never recorded). The request is the one
// recorded on the stream: the approval covers that exact request.
func (x *Executor) approvedJob(ctx context.Context, id string) (*job, error) {
	page, err := x.cfg.Client.ReadStream(ctx, aggregates.MeasurementStream(id), events.ReadOptions{Limit: approvalStreamRead})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", aggregates.MeasurementStream(id), err)
	}
	var m aggregates.Measurement
	for i := range page.Events {
		if m, err = m.Evolve(&page.Events[i]); err != nil {
			return nil, fmt.Errorf("fold %s: %w", aggregates.MeasurementStream(id), err)
		}
	}
	if !m.Requested || !m.Approved || m.Request.Host != x.cfg.Host || m.Claimed || m.Uncertain || m.Recorded {
		return nil, nil
	}
	return &job{req: m.Request, approvedByNonWriter: true, approver: m.ApprovedBy}, nil
}
