package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// One measurement: decide it under the host policy (hostpolicy.go), claim
// the request, renew its lease while the work runs, do what the request
// asked and the host allows (run.go, probe.go, hash.go, between two
// snapshots: snapshot.go), then sign and report the result. A request the
// policy refuses (with its approval, if it has one) is claimed and
// answered refused_by_host at once, with nothing done for it; one an
// approval could cover never gets here unapproved while approvals are
// honoured (follow.go).

// measure claims, runs and reports one request. Nothing is retried: a
// request whose claim is refused is someone else's or no one's, and a run
// that did not report leaves its lease to expire into uncertainty.
func (x *Executor) measure(ctx context.Context, t *tracker, j job) {
	req := j.req
	log := x.cfg.Logger.With("measurement", req.MeasurementID, "kind", req.Kind)
	if j.approvedByNonWriter {
		log = log.With("approved_by", j.approver)
	}
	if x.revoked.Load() || ctx.Err() != nil {
		return
	}
	if x.settled(ctx, req.MeasurementID) {
		// Replayed from before a restart and already claimed or done: the
		// gate would refuse the claim; asking would only fill the refusals
		// stream.
		t.settle(req.MeasurementID)
		return
	}
	d := x.decide(req, j.approvedByNonWriter)
	if d.refusal != nil && !j.approvedByNonWriter && !x.policy.IgnoreApprovals {
		// Refused without an approval, and no approval would let it run
		// (the follow loop leaves unclaimed what one would): the refusal
		// says what an approval cannot stand in for (an address class,
		// root, a ".." path).
		if da := x.decide(req, true); da.refusal != nil {
			d = da
		}
	}
	claimed := time.Now()
	hardCap := claimed.Add(req.Timeout.Duration + x.reportGrace)
	lease := earlier(claimed.Add(x.cfg.Lease), hardCap)
	_, err := x.send(ctx, "ClaimMeasurement", uuid.New(), aggregates.ClaimMeasurement{
		MeasurementID: aggregates.ID(req.MeasurementID), ExecutorID: aggregates.ID(x.cfg.ExecutorID), LeaseUntil: lease.UTC(),
	})
	if err != nil {
		// Claimed by another executor (lease_held, already_claimed), done,
		// or refused for good: this executor will not run it. Without an
		// answer the claim may or may not have landed: if it did, its
		// lease runs out into uncertainty; either way it is not retried.
		t.settle(req.MeasurementID)
		var ae *wire.Error
		switch {
		case ctx.Err() != nil:
		case errors.As(err, &ae) && ae.Status/100 == 4:
			log.Info("not claimed", "code", ae.Code, "err", err)
		default:
			log.Warn("claim outcome unknown; not retried", "err", err)
		}
		return
	}
	if d.refusal != nil {
		log.Warn("refused by the host policy: nothing done", "code", d.refusal.Code, "rule", d.refusal.Rule, "reason", d.refusal.Reason)
		x.report(ctx, x.refused(req, d), log)
		return
	}
	log.Info("claimed", "lease_until", lease, "allowed_by", d.allowedBy)
	renewCtx, stopRenew := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		x.renew(renewCtx, req, lease, hardCap, log)
	}()
	res, err := x.work(ctx, req, d)
	stopRenew()
	rwg.Wait()
	if err != nil {
		log.Warn("not reported: the executor stopped while measuring; the lease will expire into uncertainty", "err", err)
		return
	}
	x.report(ctx, res, log)
}

// settled reports whether the measurement's stream already shows a claim,
// a result or an uncertainty (an approval settles nothing: it comes before
// any claim). Only a shortcut: on any doubt it says no and the claim's
// gate decides.
func (x *Executor) settled(ctx context.Context, id string) bool {
	page, err := x.cfg.Client.ReadStream(ctx, aggregates.MeasurementStream(id), events.ReadOptions{Limit: approvalStreamRead})
	if err != nil {
		return false
	}
	return slices.ContainsFunc(page.Events, func(e events.Event) bool {
		switch e.Type {
		case aggregates.TypeMeasurementClaimed, aggregates.TypeMeasurementUncertain, aggregates.TypeMeasurementRecorded:
			return true
		}
		return false
	})
}

// renew moves the lease forward every Lease/3 until ctx ends, never past
// hardCap. A refused renewal stops renewing: the lease runs out and the
// node decides (the result, if late, is recorded beside the uncertainty).
func (x *Executor) renew(ctx context.Context, req aggregates.MeasurementRequested, lease, hardCap time.Time, log *slog.Logger) {
	tick := time.NewTicker(x.cfg.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		next := earlier(time.Now().Add(x.cfg.Lease), hardCap)
		if !next.After(lease) {
			continue
		}
		_, err := x.send(ctx, "RenewMeasurementLease", uuid.New(), aggregates.RenewMeasurementLease{
			MeasurementID: aggregates.ID(req.MeasurementID), ExecutorID: aggregates.ID(x.cfg.ExecutorID), LeaseUntil: next.UTC(),
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Warn("lease not renewed; it will run out", "code", client.CodeOf(err), "err", err)
			return
		}
		lease = next
	}
}

// decision is what the host policy made of one request, before anything
// is done for it.
type decision struct {
	// refusal is set when the policy refuses the request.
	refusal *Refusal
	// allowedBy names what allowed it (a run template's name, "approved"),
	// for the log.
	allowedBy string
	// probe is a probe's parsed argv; hash a hash's sources, or (refused)
	// its targets and the index of the one at fault.
	probe     aggregates.ProbeSpec
	hash      []hashSource
	targets   []aggregates.HashTarget
	refusedAt int
	// argvErr is an argv the node should not have accepted for its kind:
	// recorded start_failed, as before the policy existed.
	argvErr error
}

// decide applies the host policy to req. approvedByNonWriter is the
// follow loop's job.approvedByNonWriter.
func (x *Executor) decide(req aggregates.MeasurementRequested, approvedByNonWriter bool) decision {
	var d decision
	switch req.Kind {
	case aggregates.MeasurementRun:
		d.allowedBy, d.refusal = x.policy.checkRun(req.Argv, approvedByNonWriter, x.euid)
	case aggregates.MeasurementProbe:
		if d.probe, d.argvErr = aggregates.ParseProbeArgv(req.Argv); d.argvErr == nil {
			d.refusal = x.policy.checkProbe(d.probe, approvedByNonWriter)
			d.allowedBy = "probe_hosts"
		}
	case aggregates.MeasurementHash:
		if d.targets, d.argvErr = aggregates.ParseHashArgv(req.Argv); d.argvErr == nil {
			d.hash, d.refusedAt, d.refusal = x.policy.planHash(d.targets, approvedByNonWriter)
			d.allowedBy = "hash_paths"
		}
	}
	if approvedByNonWriter && d.refusal == nil && !x.policy.IgnoreApprovals {
		d.allowedBy = "approved"
	}
	return d
}

// refused is the signed answer to a request the policy refused: nothing
// was run, read or dialled, and no snapshot taken (a refused measurement
// grounds no admission). A probe's and a hash's readings are present, as
// the node requires of their kinds, each carrying the refusal.
func (x *Executor) refused(req aggregates.MeasurementRequested, d decision) *aggregates.MeasurementResult {
	now := time.Now().UTC()
	r := &aggregates.MeasurementResult{MeasurementID: req.MeasurementID, ExecutorID: x.cfg.ExecutorID, Host: x.cfg.Host,
		HostIdentity: x.hostIdentity, Argv: req.Argv, ExitCode: -1, StartedAt: now, EndedAt: now,
		Outcome: OutcomeRefusedByHost, Error: d.refusal.Error()}
	switch req.Kind {
	case aggregates.MeasurementProbe:
		r.Probe = &aggregates.ProbeReading{Kind: d.probe.Kind, Endpoint: d.probe.Endpoint, Outcome: aggregates.ProbeRefused, Error: d.refusal.Error()}
	case aggregates.MeasurementHash:
		r.Artifacts = refusedHash(d.targets, d.refusedAt, d.refusal)
	}
	return r
}

// work takes the snapshots and does what the request asked and d
// allowed. It returns errStopped when ctx ended first.
func (x *Executor) work(ctx context.Context, req aggregates.MeasurementRequested, d decision) (*aggregates.MeasurementResult, error) {
	r := &aggregates.MeasurementResult{MeasurementID: req.MeasurementID, ExecutorID: x.cfg.ExecutorID, Host: x.cfg.Host,
		HostIdentity: x.hostIdentity, Argv: req.Argv, ExitCode: -1}
	before := x.snap.take(ctx)
	r.StartedAt = before.At
	switch {
	case d.argvErr != nil:
		r.Outcome, r.Error = aggregates.ResultStartFailed, d.argvErr.Error()
	case req.Kind == aggregates.MeasurementRun:
		rr, err := runProcess(ctx, runSpec{Argv: req.Argv, Env: x.env, Timeout: req.Timeout.Duration, OutputCap: req.OutputCapBytes,
			TempRoot: x.cfg.TempRoot, Metrics: true, KillGrace: x.cfg.KillGrace})
		if err != nil {
			return nil, err
		}
		r.Outcome, r.ExitCode, r.Error, r.Duration = rr.Outcome, rr.ExitCode, rr.Error, aggregates.D(rr.Duration)
		r.StdoutSHA256, r.StderrSHA256 = rr.Stdout.digest(), rr.Stderr.digest()
		r.StdoutExcerpt, r.StdoutTruncated = rr.Stdout.excerpt()
		r.StderrExcerpt, r.StderrTruncated = rr.Stderr.excerpt()
		r.StdoutBytes, r.StderrBytes = rr.Stdout.n, rr.Stderr.n
		if len(rr.Metrics.values) > 0 {
			r.Metrics = rr.Metrics.values
		}
		if len(rr.Metrics.units) > 0 {
			r.MetricUnits = rr.Metrics.units
		}
		if rr.Metrics.dropped > 0 {
			r.Error = strings.TrimPrefix(r.Error+fmt.Sprintf("; %d metrics beyond the first %d were dropped", rr.Metrics.dropped, maxMetrics), "; ")
		}
	case req.Kind == aggregates.MeasurementProbe:
		pctx, cancel := context.WithTimeout(ctx, req.Timeout.Duration)
		start := time.Now()
		var ref *Refusal
		r.Probe, ref = x.probe.probe(pctx, d.probe)
		cancel()
		if ctx.Err() != nil {
			return nil, errStopped
		}
		r.Outcome, r.ExitCode, r.Duration = aggregates.ResultCompleted, 0, aggregates.D(time.Since(start))
		if ref != nil {
			// Refused at the dial, once the target's name was resolved.
			x.cfg.Logger.Warn("refused by the host policy at the dial: nothing connected", "measurement", req.MeasurementID,
				"code", ref.Code, "rule", ref.Rule, "reason", ref.Reason)
			r.Outcome, r.ExitCode, r.Error = OutcomeRefusedByHost, -1, ref.Error()
		}
	case req.Kind == aggregates.MeasurementHash:
		hctx, cancel := context.WithTimeout(ctx, req.Timeout.Duration)
		start := time.Now()
		r.Artifacts = hashFiles(hctx, d.hash)
		timedOut := hctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return nil, errStopped
		}
		r.Duration = aggregates.D(time.Since(start))
		if timedOut {
			r.Outcome, r.Error = aggregates.ResultTimeout, fmt.Sprintf("hashing did not finish within the timeout of %s", req.Timeout)
		} else {
			r.Outcome, r.ExitCode = aggregates.ResultCompleted, 0
		}
	default:
		r.Outcome, r.Error = aggregates.ResultStartFailed, fmt.Sprintf("this executor does not know the kind %q", req.Kind)
	}
	after := x.snap.take(ctx)
	if ctx.Err() != nil {
		return nil, errStopped
	}
	screened(r, before, after)
	r.EndedAt = after.At
	return r, nil
}

// recordNamespace derives the id of a result's RecordMeasurement command:
// one id per executor and request, so a re-sent report is recognised and
// never recorded twice.
var recordNamespace = uuid.MustParse("8f0c7a52-7d44-4d8e-bb0e-2f5a86f3c1a9")

// report signs r and sends it. The report outlives a stopping executor by
// up to ReportGrace: the work is done, losing it would only make it
// uncertain.
func (x *Executor) report(ctx context.Context, r *aggregates.MeasurementResult, log *slog.Logger) {
	payload, err := json.Marshal(r)
	if err != nil {
		log.Error("encode result", "err", err)
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.cfg.ReportGrace)
	defer cancel()
	env, err := events.SignData(rctx, aggregates.MeasurementPayloadType, payload, x.cfg.Key)
	if err != nil {
		log.Error("sign result", "err", err)
		return
	}
	id := uuid.NewSHA1(recordNamespace, []byte(x.cfg.ExecutorID+"\x00"+r.MeasurementID))
	out, err := x.send(rctx, "RecordMeasurement", id, aggregates.RecordMeasurement{
		MeasurementID: aggregates.ID(r.MeasurementID), ExecutorID: aggregates.ID(x.cfg.ExecutorID), Payload: payload, Envelope: *env,
	})
	if err != nil {
		log.Warn("result refused", "code", client.CodeOf(err), "err", err)
		return
	}
	log.Info("recorded", "outcome", r.Outcome, "exit_code", r.ExitCode, "position", out.Position)
}

// earlier returns the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
