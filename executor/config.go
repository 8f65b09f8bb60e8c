package executor

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/internal/config"
)

// Executor configuration: the fields, their defaults and their
// validation.

// Config configures an Executor. Zero values mean the defaults of
// DefaultConfig; Client, ExecutorID, Host and Key are required, and
// Policy says what the executor may do (nothing when zero). None of it
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
	// Policy is this host's own policy (hostpolicy.go): the argv templates
	// a run must match, the path prefixes a hash may read, the hosts and
	// address classes a probe may reach, and whether runs may execute as
	// root. The zero value allows nothing: every request is answered with
	// a signed refused_by_host result. cmd/greffe loads it from
	// --host-policy (LoadHostPolicy).
	Policy HostPolicy
	// Resolver resolves the names of probe targets before their addresses
	// are checked against Policy (dial.go). Default net.DefaultResolver.
	Resolver *net.Resolver
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

// ErrInvalidConfig is wrapped by Config.Validate's error, a
// *config.ValidationError that lists every problem with its field and value.
var ErrInvalidConfig = errors.New("executor: invalid config")

// setDefaults fills zero fields from DefaultConfig.
func (c *Config) setDefaults() {
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
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var p config.Problems
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
	pol := c.Policy
	var pe *PolicyError
	if err := pol.Validate(); errors.As(err, &pe) {
		for _, q := range pe.Problems {
			p = append(p, "policy."+q)
		}
	}
	return p.Err(ErrInvalidConfig)
}
