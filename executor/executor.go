package executor

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// The Executor itself: its construction and Run, which checks the key's
// registration, then follows the node until it stops. The parts Run
// drives have files of their own: config.go (Config), registration.go
// (the key's status on the node), follow.go (the log subscription and the
// workers), measure.go (one request: claim, lease, work, report) and
// send.go (commands to the node, re-sent after transient failures).

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
	// policy is Config.Policy, validated; never changed.
	policy *HostPolicy
	// euid is the executor's effective user id, read once: runs as root
	// need the policy's allow_root_runs. A field so that a test can play
	// root.
	euid    int
	revoked atomic.Bool
	// reportGrace is Config.ReportGrace, narrowed by Run to the node's
	// policy.measurement.lease_grace so that no lease asks for more than
	// the node grants. Written before the workers start.
	reportGrace time.Duration
}

// New checks cfg and returns an executor; nothing runs until Run.
func New(cfg Config) (*Executor, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	env := allowedEnv(cfg.EnvAllowlist)
	pol := cfg.Policy
	if err := pol.Validate(); err != nil { // accepted by cfg.Validate; this prepares its parsed forms
		return nil, err
	}
	x := &Executor{
		cfg:          cfg,
		keyID:        events.KeyID(cfg.Key.Public().(ed25519.PublicKey)),
		hostIdentity: hostIdentity(),
		env:          env,
		snap:         &snapshotter{nvidiaSMI: cfg.NvidiaSMI, timeout: cfg.SnapshotTimeout, meminfo: cfg.Meminfo, env: env, version: cfg.Version},
		probe:        newProber(cfg.SmokeMaxTokens, newGuardedDialer(&pol, cfg.Resolver)),
		policy:       &pol,
		euid:         os.Geteuid(),
		reportGrace:  cfg.ReportGrace,
	}
	return x, nil
}

// KeyID returns the key id of the executor's key ("ed25519:…").
func (x *Executor) KeyID() string { return x.keyID }

// PublicKey returns the executor's public key.
func (x *Executor) PublicKey() ed25519.PublicKey { return x.cfg.Key.Public().(ed25519.PublicKey) }

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
	x.warnPolicy()
	x.cfg.Logger.Info("following", "executor", x.cfg.ExecutorID, "host", x.cfg.Host, "key_id", x.keyID, "from", from,
		"run_templates", len(x.policy.Runs), "hash_paths", len(x.policy.HashPaths), "probe_hosts", len(x.policy.ProbeHosts),
		"approvals_honoured", !x.policy.IgnoreApprovals)
	// The probe schedules of this host (schedule.go) are asked for while
	// the executor follows; they stop with it.
	sctx, stopSchedules := context.WithCancel(ctx)
	scheduled := make(chan struct{})
	go func() {
		defer close(scheduled)
		x.schedule(sctx)
	}()
	defer func() {
		stopSchedules()
		<-scheduled
	}()
	return x.follow(ctx, from)
}

// warnPolicy says loudly what an operator may not expect: a policy that
// allows nothing, and running as root.
func (x *Executor) warnPolicy() {
	log := x.cfg.Logger
	switch {
	case x.policy.Empty() && x.policy.IgnoreApprovals:
		log.Warn("the host policy allows nothing: every run, hash and probe requested of this host is answered refused_by_host; " +
			"give the executor a policy (greffe executor --host-policy FILE, docs/EXECUTOR.md \"Host policy\")")
	case x.policy.Empty():
		log.Warn("the host policy lists nothing: only what an approver approves (ApproveMeasurement) runs, is hashed or probed; " +
			"every other request of this host is left unclaimed (docs/EXECUTOR.md \"Approvals\")")
	}
	switch {
	case x.euid == 0 && x.policy.AllowRootRuns:
		log.Warn("RUNNING AS ROOT (uid 0) and the host policy sets allow_root_runs: every allowed run executes with full privileges over this host; " +
			"run the executor as an unprivileged user")
	case x.euid == 0:
		log.Warn("running as root (uid 0): every run is refused (root_run_not_allowed) unless the host policy sets allow_root_runs; " +
			"probes and hashes still work; run the executor as an unprivileged user")
	}
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
