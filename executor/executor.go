package executor

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
)

// Config configures an Executor. Zero values mean the defaults of
// DefaultConfig; Client, ExecutorID, Host and Key are required. None of it
// changes while the executor runs.
type Config struct {
	// Client talks to the node. Required. Its token needs the executor role
	// (or writer/admin to register the key with RegisterApproval).
	Client *client.Client
	// ExecutorID names the executor: its keys live in stream
	// "executor-<ExecutorID>". Required.
	ExecutorID string
	// Host is the host the executor measures; it takes the requests whose
	// host is exactly this. Required.
	Host string
	// Key signs every result. Required.
	Key ed25519.PrivateKey
	// RegisterApproval, when set and the key is not registered yet, is the
	// id of the "activation" approval for "executor-<ExecutorID>" under
	// which Run registers the key. Empty: Run waits until an operator
	// registers it.
	RegisterApproval string
	// StateFile keeps the position to resume from (see state.go). Empty:
	// nothing is kept and every start reads the log from position 0.
	StateFile string
	// Lease is how long each claim or renewal holds a request; the lease is
	// renewed every Lease/3 while the work runs, so an executor that dies
	// leaves its request uncertain about Lease later. Default 30 s.
	Lease time.Duration
	// ReportGrace is how far past the request's timeout the lease may run,
	// for the snapshots and the report, and how long a report may take to
	// send. Run narrows the first use to the node's
	// policy.measurement.lease_grace (default 1 min). Default 30 s.
	ReportGrace time.Duration
	// Concurrency is how many requests run at once. Default 1: measurements
	// of one GPU should not disturb each other.
	Concurrency int
	// EnvAllowlist names the variables a run inherits (DefaultEnvAllowlist).
	EnvAllowlist []string
	// TempRoot is where each run's fresh working directory is made. Default
	// os.TempDir().
	TempRoot string
	// NvidiaSMI is the nvidia-smi program: a name looked up on PATH or an
	// absolute path. Default "nvidia-smi".
	NvidiaSMI string
	// SnapshotTimeout bounds each nvidia-smi call of a snapshot; a hanging
	// nvidia-smi is killed and recorded as timeout. Default 5 s.
	SnapshotTimeout time.Duration
	// Meminfo is read for MemAvailable. Default /proc/meminfo.
	Meminfo string
	// SmokeMaxTokens bounds a smoke completion's output tokens. Default 16.
	SmokeMaxTokens int
	// KillGrace bounds how long a finished or killed run waits for
	// descendants that escaped its process group to release its output.
	// Default 2 s.
	KillGrace time.Duration
	// Version is recorded in every snapshot. Default "dev".
	Version string
	// Logger receives the executor's logs. Default: discard.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults; the caller sets Client, ExecutorID,
// Host and Key.
func DefaultConfig() Config {
	return Config{
		Lease: 30 * time.Second, ReportGrace: 30 * time.Second, Concurrency: 1,
		EnvAllowlist: DefaultEnvAllowlist(), TempRoot: os.TempDir(), NvidiaSMI: "nvidia-smi",
		SnapshotTimeout: 5 * time.Second, Meminfo: "/proc/meminfo", SmokeMaxTokens: 16,
		KillGrace: 2 * time.Second, Version: "dev",
	}
}

// ErrInvalidConfig is wrapped by Config.Validate's error.
var ErrInvalidConfig = errors.New("executor: invalid config")

// ValidationError lists every problem of a Config, each with its field and
// value.
type ValidationError struct {
	Problems []string
}

// Error joins the problems.
func (e *ValidationError) Error() string {
	return ErrInvalidConfig.Error() + ": " + strings.Join(e.Problems, "; ")
}

// Unwrap returns ErrInvalidConfig.
func (e *ValidationError) Unwrap() error { return ErrInvalidConfig }

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Lease == 0 {
		c.Lease = d.Lease
	}
	if c.ReportGrace == 0 {
		c.ReportGrace = d.ReportGrace
	}
	if c.Concurrency == 0 {
		c.Concurrency = d.Concurrency
	}
	if c.EnvAllowlist == nil {
		c.EnvAllowlist = d.EnvAllowlist
	}
	if c.TempRoot == "" {
		c.TempRoot = d.TempRoot
	}
	if c.NvidiaSMI == "" {
		c.NvidiaSMI = d.NvidiaSMI
	}
	if c.SnapshotTimeout == 0 {
		c.SnapshotTimeout = d.SnapshotTimeout
	}
	if c.Meminfo == "" {
		c.Meminfo = d.Meminfo
	}
	if c.SmokeMaxTokens == 0 {
		c.SmokeMaxTokens = d.SmokeMaxTokens
	}
	if c.KillGrace == 0 {
		c.KillGrace = d.KillGrace
	}
	if c.Version == "" {
		c.Version = d.Version
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var p []string
	if c.Client == nil {
		p = append(p, "client is required")
	}
	for _, f := range []struct{ name, v string }{{"executor_id", c.ExecutorID}, {"host", c.Host}} {
		if f.v == "" || len(f.v) > aggregates.MaxIDLen || strings.ContainsAny(f.v, " \t\r\n") {
			p = append(p, fmt.Sprintf("%s %q: 1 to %d bytes without spaces", f.name, f.v, aggregates.MaxIDLen))
		}
	}
	if len(c.Key) != ed25519.PrivateKeySize {
		p = append(p, fmt.Sprintf("key is %d bytes; an ed25519 private key is %d", len(c.Key), ed25519.PrivateKeySize))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"lease", c.Lease}, {"report_grace", c.ReportGrace}, {"snapshot_timeout", c.SnapshotTimeout}, {"kill_grace", c.KillGrace}} {
		if d.v <= 0 {
			p = append(p, fmt.Sprintf("%s is %s; must be positive", d.name, d.v))
		}
	}
	if c.Lease > 0 && c.Lease < 3*time.Millisecond {
		p = append(p, fmt.Sprintf("lease is %s; renewals every third of it need at least 3ms", c.Lease))
	}
	if c.Concurrency < 1 || c.Concurrency > 64 {
		p = append(p, fmt.Sprintf("concurrency is %d; 1 to 64", c.Concurrency))
	}
	if c.SmokeMaxTokens < 1 {
		p = append(p, fmt.Sprintf("smoke_max_tokens is %d; must be positive", c.SmokeMaxTokens))
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

// ErrKeyRevoked is returned by Run when the executor's key is revoked: it
// signs nothing more, and a new key needs a new registration.
var ErrKeyRevoked = errors.New("executor: key revoked")

// Executor follows a node and measures what is requested of its host. Call
// Run once; KeyStatus and Register are safe to call concurrently with it.
type Executor struct {
	cfg          Config
	keyID        string
	hostIdentity string
	env          []string
	snap         *snapshotter
	probe        *prober
	revoked      atomic.Bool
	// reportGrace is Config.ReportGrace, narrowed by Run to the node's
	// policy.measurement.lease_grace so that no lease asks for more than
	// the node grants. Written before the workers start.
	reportGrace time.Duration
}

// New checks cfg and returns an executor; nothing runs until Run.
func New(cfg Config) (*Executor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	env := allowedEnv(cfg.EnvAllowlist)
	x := &Executor{
		cfg:          cfg,
		keyID:        events.KeyID(cfg.Key.Public().(ed25519.PublicKey)),
		hostIdentity: hostIdentity(),
		env:          env,
		snap:         &snapshotter{nvidiaSMI: cfg.NvidiaSMI, timeout: cfg.SnapshotTimeout, meminfo: cfg.Meminfo, env: env, version: cfg.Version},
		probe:        newProber(cfg.SmokeMaxTokens),
		reportGrace:  cfg.ReportGrace,
	}
	return x, nil
}

// KeyID returns the key id of the executor's key ("ed25519:…").
func (x *Executor) KeyID() string { return x.keyID }

// PublicKey returns the executor's public key.
func (x *Executor) PublicKey() ed25519.PublicKey { return x.cfg.Key.Public().(ed25519.PublicKey) }

// KeyStatus says where the executor's key stands on the node.
type KeyStatus string

// Key statuses.
const (
	KeyRegistered    KeyStatus = "registered"
	KeyNotRegistered KeyStatus = "not_registered"
	KeyRevoked       KeyStatus = "revoked"
)

// KeyStatus reads the executor's stream and says whether its key is
// registered, revoked or unknown there.
func (x *Executor) KeyStatus(ctx context.Context) (KeyStatus, error) {
	stream := aggregates.ExecutorStream(x.cfg.ExecutorID)
	var evs []events.Event
	for from := uint64(0); ; {
		page, err := x.cfg.Client.ReadStream(ctx, stream, events.ReadOptions{From: from, Limit: 1000})
		if c := client.CodeOf(err); c == events.CodeNotFound || c == events.CodeStreamNotFound {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", stream, err)
		}
		evs = append(evs, page.Events...)
		if page.Next == nil || len(page.Events) == 0 {
			break
		}
		from = *page.Next
	}
	st, err := aggregates.Fold(stream, evs)
	if err != nil {
		return "", fmt.Errorf("fold %s: %w", stream, err)
	}
	k, ok := st.(aggregates.Executor).Keys[x.keyID]
	switch {
	case !ok:
		return KeyNotRegistered, nil
	case k.Revoked:
		return KeyRevoked, nil
	}
	return KeyRegistered, nil
}

// Register sends RegisterExecutorKey under approvalID. A refusal (no
// approval yet, another host…) is a *client.Error with the gate's code.
func (x *Executor) Register(ctx context.Context, approvalID string) error {
	_, err := x.send(ctx, "RegisterExecutorKey", uuid.New(), aggregates.RegisterExecutorKey{
		ExecutorID: x.cfg.ExecutorID, Host: x.cfg.Host, PublicKey: x.PublicKey(), ApprovalID: approvalID,
	})
	return err
}

// Run follows the node until ctx ends (it returns nil) or the key is
// revoked (ErrKeyRevoked, after the measurements in flight have reported).
// An unregistered key is registered under Config.RegisterApproval, or
// waited for. Every goroutine Run starts has ended when it returns.
func (x *Executor) Run(ctx context.Context) error {
	info, err := x.cfg.Client.Info(ctx)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	st, err := x.KeyStatus(ctx)
	if err != nil {
		return err
	}
	switch {
	case st == KeyRevoked:
		return fmt.Errorf("%w: %s", ErrKeyRevoked, x.keyID)
	case st == KeyNotRegistered && x.cfg.RegisterApproval != "":
		if err := x.Register(ctx, x.cfg.RegisterApproval); err != nil {
			return fmt.Errorf("register %s: %w", x.keyID, err)
		}
	case st == KeyNotRegistered:
		x.cfg.Logger.Warn("key not registered; waiting for an operator to register it",
			"executor", x.cfg.ExecutorID, "host", x.cfg.Host, "key_id", x.keyID)
		if err := x.waitRegistered(ctx, info.Head.Size); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	from, err := loadFrom(x.cfg.StateFile, x.cfg.ExecutorID, x.cfg.Host)
	if err != nil {
		return err
	}
	if raw, err := x.cfg.Client.Policy(ctx); err == nil {
		var p aggregates.Policy
		if json.Unmarshal(raw, &p) == nil && p.Measurement.LeaseGrace.Duration < x.reportGrace {
			x.reportGrace = p.Measurement.LeaseGrace.Duration
		}
	}
	x.cfg.Logger.Info("following", "executor", x.cfg.ExecutorID, "host", x.cfg.Host, "key_id", x.keyID, "from", from)
	return x.follow(ctx, from)
}

var errRegistered = errors.New("registered")

// waitRegistered follows the executor's stream from position from (read
// before the key's status, so nothing slips between) until the key is
// registered.
func (x *Executor) waitRegistered(ctx context.Context, from uint64) error {
	stream := aggregates.ExecutorStream(x.cfg.ExecutorID)
	err := x.cfg.Client.Subscribe(ctx, from, events.Filter{StreamPrefix: stream,
		Types: []string{events.TypeExecutorKeyRegistered, events.TypeExecutorKeyRevoked}}, func(e events.Event) error {
		if e.Stream != stream {
			return nil // "executor-gpu10" also starts with "executor-gpu1"
		}
		var d struct {
			KeyID string `json:"key_id"`
		}
		if json.Unmarshal(e.Data, &d) != nil || d.KeyID != x.keyID {
			return nil
		}
		if e.Type == events.TypeExecutorKeyRevoked {
			return fmt.Errorf("%w: %s", ErrKeyRevoked, x.keyID)
		}
		return errRegistered
	})
	if errors.Is(err, errRegistered) {
		x.cfg.Logger.Info("key registered", "key_id", x.keyID)
		return nil
	}
	return err
}

// jobQueue bounds the requests waiting for a worker. A full queue holds
// the subscription back (backpressure; the node reads ahead from disk),
// so memory stays bounded however many requests arrive.
const jobQueue = 16

// saveEvery throttles writes of the state file while following.
const saveEvery = time.Second

type job struct {
	req aggregates.MeasurementRequested
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
			case jobs <- job{req: req}:
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

// measure claims, runs and reports one request. Nothing is retried: a
// request whose claim is refused is someone else's or no one's, and a run
// that did not report leaves its lease to expire into uncertainty.
func (x *Executor) measure(ctx context.Context, t *tracker, j job) {
	req := j.req
	log := x.cfg.Logger.With("measurement", req.MeasurementID, "kind", req.Kind)
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
	claimed := time.Now()
	hardCap := claimed.Add(req.Timeout.Duration + x.reportGrace)
	lease := earlier(claimed.Add(x.cfg.Lease), hardCap)
	_, err := x.send(ctx, "ClaimMeasurement", uuid.New(), aggregates.ClaimMeasurement{
		MeasurementID: req.MeasurementID, ExecutorID: x.cfg.ExecutorID, LeaseUntil: lease.UTC(),
	})
	if err != nil {
		// Claimed by another executor (lease_held, already_claimed), done,
		// or refused for good: this executor will not run it. Without an
		// answer the claim may or may not have landed: if it did, its
		// lease runs out into uncertainty; either way it is not retried.
		t.settle(req.MeasurementID)
		var ae *client.Error
		switch {
		case ctx.Err() != nil:
		case errors.As(err, &ae) && ae.Status/100 == 4:
			log.Info("not claimed", "code", ae.Code, "err", err)
		default:
			log.Warn("claim outcome unknown; not retried", "err", err)
		}
		return
	}
	log.Info("claimed", "lease_until", lease)
	renewCtx, stopRenew := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		x.renew(renewCtx, req, lease, hardCap, log)
	}()
	res, err := x.work(ctx, req)
	stopRenew()
	rwg.Wait()
	if err != nil {
		log.Warn("not reported: the executor stopped while measuring; the lease will expire into uncertainty", "err", err)
		return
	}
	x.report(ctx, res, log)
}

// settled reports whether the measurement's stream already shows a claim,
// a result or an uncertainty. Only a shortcut: on any doubt it says no and
// the claim's gate decides.
func (x *Executor) settled(ctx context.Context, id string) bool {
	page, err := x.cfg.Client.ReadStream(ctx, aggregates.MeasurementStream(id), events.ReadOptions{Limit: 2})
	return err == nil && len(page.Events) > 1
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
			MeasurementID: req.MeasurementID, ExecutorID: x.cfg.ExecutorID, LeaseUntil: next.UTC(),
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

// work takes the snapshots and does what the request approved. It returns
// errStopped when ctx ended first.
func (x *Executor) work(ctx context.Context, req aggregates.MeasurementRequested) (*aggregates.MeasurementResult, error) {
	r := &aggregates.MeasurementResult{MeasurementID: req.MeasurementID, ExecutorID: x.cfg.ExecutorID, Host: x.cfg.Host,
		HostIdentity: x.hostIdentity, Argv: req.Argv, ExitCode: -1}
	before := x.snap.take(ctx)
	r.StartedAt = before.At
	switch req.Kind {
	case aggregates.MeasurementRun:
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
	case aggregates.MeasurementProbe:
		spec, err := aggregates.ParseProbeArgv(req.Argv)
		if err != nil {
			r.Outcome, r.Error = aggregates.ResultStartFailed, err.Error()
			break
		}
		pctx, cancel := context.WithTimeout(ctx, req.Timeout.Duration)
		start := time.Now()
		r.Probe = x.probe.probe(pctx, spec)
		cancel()
		if ctx.Err() != nil {
			return nil, errStopped
		}
		r.Outcome, r.ExitCode, r.Duration = aggregates.ResultCompleted, 0, aggregates.D(time.Since(start))
	case aggregates.MeasurementHash:
		targets, err := aggregates.ParseHashArgv(req.Argv)
		if err != nil {
			r.Outcome, r.Error = aggregates.ResultStartFailed, err.Error()
			break
		}
		hctx, cancel := context.WithTimeout(ctx, req.Timeout.Duration)
		start := time.Now()
		r.Artifacts = hashFiles(hctx, targets)
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
		MeasurementID: r.MeasurementID, ExecutorID: x.cfg.ExecutorID, Payload: payload, Envelope: *env,
	})
	if err != nil {
		log.Warn("result refused", "code", client.CodeOf(err), "err", err)
		return
	}
	log.Info("recorded", "outcome", r.Outcome, "exit_code", r.ExitCode, "position", out.Position)
}

// sendAttempts bounds how many times a command is sent when no answer, a
// 5xx, an outcome_unknown or a concurrency_conflict came back. The id is
// the same each time, so the node applies it at most once.
const sendAttempts = 6

// send sends one command, re-sending it (same id) after transient
// failures. A refusal or a malformed command is returned at once.
func (x *Executor) send(ctx context.Context, name string, id uuid.UUID, data any) (client.CommandOut, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return client.CommandOut{}, fmt.Errorf("encode %s: %w", name, err)
	}
	in := client.CommandIn{Command: name, ID: id.String(), Actor: "executor:" + x.cfg.ExecutorID, Data: b}
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		out, err := x.cfg.Client.Command(ctx, in)
		if err == nil || !transient(err) || attempt >= sendAttempts || ctx.Err() != nil {
			return out, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return out, err
		}
		wait = min(2*wait, 3*time.Second)
	}
}

// earlier returns the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// transient reports whether re-sending the same command may succeed.
func transient(err error) bool {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return true // no answer at all
	}
	return ae.Status >= http.StatusInternalServerError || ae.Code == events.CodeOutcomeUnknown || ae.Code == "concurrency_conflict"
}

// hostIdentity names the machine without exposing its machine-id: a
// digest of /etc/machine-id under a greffe-specific prefix (the file's
// own advice). Empty when there is none.
func hostIdentity() string {
	b, err := os.ReadFile("/etc/machine-id")
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte("greffe host identity\x00" + strings.TrimSpace(string(b))))
	return "machine-id-sha256:" + hex.EncodeToString(sum[:16])
}
