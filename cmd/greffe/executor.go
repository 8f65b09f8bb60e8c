package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/executor"
	"github.com/greffe/greffe/node"
)

// executorFlags are the flags shared by `greffe executor` and its
// subcommands.
type executorFlags struct {
	r      remote
	key    string
	hostID string
	id     string
}

func (f *executorFlags) register(c *cobra.Command) {
	f.r.register(c)
	c.Flags().StringVar(&f.key, "key", "", "the executor's ed25519 key file (PKCS #8 PEM; created with mode 0600 when missing)")
	c.Flags().StringVar(&f.hostID, "host-id", "", "the host this executor measures: requests for exactly this host are its")
	c.Flags().StringVar(&f.id, "id", "", "the executor's id, its stream executor-<id> (default: --host-id)")
}

func (f *executorFlags) check() error {
	if f.key == "" || f.hostID == "" {
		return usageError{errors.New("--key and --host-id are required")}
	}
	if f.id == "" {
		f.id = f.hostID
	}
	return nil
}

// loadKey opens (or creates) the key and says so on w's command.
func (f *executorFlags) loadKey(c *cobra.Command) (ed25519.PrivateKey, error) {
	key, created, err := executor.LoadOrCreateKey(f.key)
	if err != nil {
		if errors.Is(err, executor.ErrKeyExposed) || errors.Is(err, executor.ErrKeyInvalid) {
			return nil, &exitError{code: exitCannot, err: err}
		}
		return nil, err
	}
	if created {
		fmt.Fprintf(c.ErrOrStderr(), "created key %s (mode 0600)\n", f.key)
	}
	return key, nil
}

func (f *executorFlags) config(key ed25519.PrivateKey) executor.Config {
	cfg := executor.DefaultConfig()
	cfg.Client, cfg.ExecutorID, cfg.Host, cfg.Key, cfg.Version = f.r.client(), f.id, f.hostID, key, node.Version
	return cfg
}

func newExecutorCmd() *cobra.Command {
	var (
		f          executorFlags
		state      string
		approval   string
		level      string
		env        []string
		policyFile string
		cfgFlags   executor.Config
	)
	c := &cobra.Command{
		Use:   "executor --server URL --key FILE --host-id NAME",
		Short: "Run the GPU-host executor: claim, run, sign and report the measurements requested of this host",
		Long: `Run the GPU-host executor (docs/EXECUTOR.md).

The key is created on first use (mode 0600) and must be registered through
RegisterExecutorKey, which needs an owner's "activation" approval for
executor-<id>: see "greffe executor register". Until it is, the executor
waits (or, with --approval, registers itself under that approval).

What it does is this host's decision, not a writer's: --host-policy FILE
lists the argv templates it runs, the path prefixes it hashes, the hosts
(and address classes: loopback, private, link-local, cloud metadata) it
probes, and whether runs may execute as root. An approver's
ApproveMeasurement of one exact request stands in for those lists (never
for the address classes or root) unless the policy sets ignore_approvals:
what the policy does not allow but an approval could cover waits
unclaimed until it is approved. Without a policy it refuses every request,
approved or not, each with a signed refused_by_host result
(docs/EXECUTOR.md, "Host policy" and "Approvals").

Exit codes: 0 stopped by a signal; 1 refused by the node, or the key was
revoked; 2 could not run (usage, key file, host policy file, node
unreachable).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			lv, err := parseLogLevel(level)
			if err != nil {
				return err
			}
			// Without a policy file nothing runs at all, approved or not;
			// a file, even {}, lets an approver's approval stand in for its
			// allowlists unless it sets ignore_approvals.
			pol := executor.HostPolicy{IgnoreApprovals: true}
			if policyFile != "" {
				if pol, err = executor.LoadHostPolicy(policyFile); err != nil {
					return usageError{err}
				}
			}
			key, err := f.loadKey(c)
			if err != nil {
				return err
			}
			cfg := f.config(key)
			cfg.Policy = pol
			cfg.Logger = slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: lv}))
			if f.r.json {
				cfg.Logger = slog.New(slog.NewJSONHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: lv}))
			}
			cfg.RegisterApproval, cfg.Lease, cfg.Concurrency = approval, cfgFlags.Lease, cfgFlags.Concurrency
			cfg.NvidiaSMI, cfg.SnapshotTimeout, cfg.TempRoot = cfgFlags.NvidiaSMI, cfgFlags.SnapshotTimeout, cfgFlags.TempRoot
			cfg.EnvAllowlist = append(executor.DefaultEnvAllowlist(), env...)
			cfg.StateFile = state
			if state == "" {
				cfg.StateFile = filepath.Join(filepath.Dir(f.key), f.id+".state")
			}
			x, err := executor.New(cfg)
			if err != nil {
				return usageError{err}
			}
			if f.r.json {
				err = printJSON(c.OutOrStdout(), map[string]any{"executor_id": f.id, "host": f.hostID, "key_id": x.KeyID(), "public_key": x.PublicKey(),
					"host_policy": policyFile, "run_templates": len(pol.Runs), "hash_paths": len(pol.HashPaths), "probe_hosts": len(pol.ProbeHosts),
					"approvals_honoured": !pol.IgnoreApprovals})
				if err != nil {
					return err
				}
			} else {
				printIdentity(c, f, x)
				printPolicy(c, policyFile, pol)
			}
			err = x.Run(c.Context())
			if errors.Is(err, executor.ErrKeyRevoked) {
				return &exitError{code: exitRefused, err: err}
			}
			return err
		},
	}
	f.register(c)
	fl := c.Flags()
	fl.StringVar(&state, "state", "", "file keeping the log position to resume from (default: <key folder>/<id>.state)")
	fl.StringVar(&approval, "approval", "", "register an unregistered key under this activation approval (needs a writer token)")
	fl.StringVar(&level, "log-level", "info", "log level: debug, info, warn, error")
	fl.StringArrayVar(&env, "env", nil, "another environment variable runs may inherit (repeatable; the allowlist is in docs/EXECUTOR.md)")
	fl.StringVar(&policyFile, "host-policy", "", "this host's policy (JSON): the runs, hash paths and probe targets it allows (docs/EXECUTOR.md); without one every request is refused")
	d := executor.DefaultConfig()
	fl.DurationVar(&cfgFlags.Lease, "lease", d.Lease, "how long a claim or renewal holds a request (renewed every third of it)")
	fl.IntVar(&cfgFlags.Concurrency, "concurrency", d.Concurrency, "requests run at once")
	fl.StringVar(&cfgFlags.NvidiaSMI, "nvidia-smi", d.NvidiaSMI, "the nvidia-smi program (a name on PATH or an absolute path)")
	fl.DurationVar(&cfgFlags.SnapshotTimeout, "snapshot-timeout", d.SnapshotTimeout, "bound on each nvidia-smi call")
	fl.StringVar(&cfgFlags.TempRoot, "work-dir", d.TempRoot, "where each run's fresh temporary directory is made")
	c.AddCommand(newExecutorKeyCmd(), newExecutorRegisterCmd(), newExecutorVerifyCmd())
	return c
}

// printIdentity prints who the executor is, and what an operator does when
// its key is not registered.
func printIdentity(c *cobra.Command, f executorFlags, x *executor.Executor) {
	c.Printf("executor %s on host %s\nkey      %s\npublic   %s\n", f.id, f.hostID, x.KeyID(), base64.StdEncoding.EncodeToString(x.PublicKey()))
	st, err := x.KeyStatus(c.Context())
	if err != nil || st != executor.KeyNotRegistered {
		return
	}
	c.Printf("status   not registered; the executor waits. An approver grants an approval (in its own name, with its token) and a writer registers the key:\n"+
		"  greffe cmd GrantApproval --data '{\"approval_id\":\"reg-%[1]s\",\"approver\":\"<approver's token name>\",\"action\":\"activation\",\"subject\":\"%[2]s\",\"uses\":1,\"expires_at\":\"%[3]s\"}'\n"+
		"  greffe executor register --key %[4]s --host-id %[5]s --id %[1]s --approval reg-%[1]s\n",
		f.id, aggregates.ExecutorStream(f.id), time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339), f.key, f.hostID)
}

// printPolicy says what the host policy allows, or that it allows nothing.
func printPolicy(c *cobra.Command, file string, p executor.HostPolicy) {
	if file == "" {
		c.Printf("policy   none: every run, hash and probe is refused (refused_by_host); give one with --host-policy FILE\n")
		return
	}
	approvals := "approvals honoured: an approver's ApproveMeasurement stands in for the lists; what it could cover waits unclaimed"
	if p.IgnoreApprovals {
		approvals = "approvals ignored: what the policy does not allow is refused (refused_by_host)"
	}
	c.Printf("policy   %s: %d run templates, %d hash paths, %d probe hosts; %s\n", file, len(p.Runs), len(p.HashPaths), len(p.ProbeHosts), approvals)
}

func newExecutorKeyCmd() *cobra.Command {
	var f executorFlags
	c := &cobra.Command{
		Use:   "key --key FILE --host-id NAME",
		Short: "Create the executor's key if missing and print its id, public key and status on the node",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			key, err := f.loadKey(c)
			if err != nil {
				return err
			}
			x, err := executor.New(f.config(key))
			if err != nil {
				return usageError{err}
			}
			st, err := x.KeyStatus(c.Context())
			if err != nil {
				return err
			}
			if f.r.json {
				return printJSON(c.OutOrStdout(), map[string]any{"executor_id": f.id, "host": f.hostID, "key_id": x.KeyID(),
					"public_key": x.PublicKey(), "status": st})
			}
			c.Printf("executor %s on host %s\nkey      %s\npublic   %s\nstatus   %s\n", f.id, f.hostID, x.KeyID(), base64.StdEncoding.EncodeToString(x.PublicKey()), st)
			return nil
		},
	}
	f.register(c)
	return c
}

func newExecutorRegisterCmd() *cobra.Command {
	var (
		f        executorFlags
		approval string
	)
	c := &cobra.Command{
		Use:   "register --key FILE --host-id NAME --approval ID",
		Short: "Register the executor's key under an owner's activation approval (RegisterExecutorKey)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if approval == "" {
				return usageError{errors.New("--approval is required: the id of an \"activation\" grant for executor-<id>")}
			}
			key, err := f.loadKey(c)
			if err != nil {
				return err
			}
			x, err := executor.New(f.config(key))
			if err != nil {
				return usageError{err}
			}
			if err := x.Register(c.Context(), approval); err != nil {
				return err
			}
			if f.r.json {
				return printJSON(c.OutOrStdout(), map[string]any{"registered": true, "executor_id": f.id, "host": f.hostID, "key_id": x.KeyID()})
			}
			c.Printf("registered %s for executor %s on host %s\n", x.KeyID(), f.id, f.hostID)
			return nil
		},
	}
	f.register(c)
	c.Flags().StringVar(&approval, "approval", "", "the activation approval's id")
	return c
}

func newExecutorVerifyCmd() *cobra.Command {
	var r remote
	c := &cobra.Command{
		Use:   "verify MEASUREMENT_ID",
		Short: "Check a recorded measurement's signature against its executor's keys at its position, and print what it measured",
		Long: `Check a recorded measurement's DSSE signature over its stored bytes
against the keys its executor had registered, and not revoked, before it was
recorded; then print what it measured.

Exit codes: 0 the signature verifies; 1 it does not; 2 no result yet, or the
node could not be read.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			v, err := executor.VerifyRecorded(c.Context(), r.client(), args[0])
			var se *events.SignatureError
			switch {
			case errors.As(err, &se):
				return &exitError{code: exitRefused, err: err}
			case errors.Is(err, executor.ErrNotRecorded):
				return &exitError{code: exitCannot, err: err}
			case err != nil:
				return err
			}
			if r.json {
				return printJSON(c.OutOrStdout(), map[string]any{"verified": true, "key_ids": v.KeyIDs, "position": v.Event.Position,
					"late": v.Late, "result": v.Result})
			}
			printVerified(c, v)
			return nil
		},
	}
	r.register(c)
	return c
}

func printVerified(c *cobra.Command, v executor.Verified) {
	res := v.Result
	late := ""
	if v.Late {
		late = " (late: recorded beside its uncertainty)"
	}
	c.Printf("measurement %s on host %s by executor %s%s\n", res.MeasurementID, res.Host, res.ExecutorID, late)
	c.Printf("signature   verified: %v, position %d\n", v.KeyIDs, v.Event.Position)
	c.Printf("argv        %q\n", res.Argv)
	c.Printf("outcome     %s, exit %d, ran %s (%s .. %s)\n", res.Outcome, res.ExitCode, res.Duration,
		res.StartedAt.Format(time.RFC3339Nano), res.EndedAt.Format(time.RFC3339Nano))
	if res.Error != "" {
		c.Printf("error       %s\n", res.Error)
	}
	for _, s := range []struct {
		name string
		snap *aggregates.ResourceSnapshot
	}{{"before", res.Before}, {"after", res.After}} {
		if s.snap == nil {
			continue
		}
		gpu := s.snap.GPUStatus
		if s.snap.GPUError != "" {
			gpu += " (" + s.snap.GPUError + ")"
		}
		for _, g := range s.snap.GPUs {
			gpu += fmt.Sprintf("; %s driver %s, %s / %s used", g.Name, g.Driver, mibOf(g.MemoryUsedBytes), mibOf(g.MemoryTotalBytes))
		}
		c.Printf("%-11s host %s, %d CPUs, RAM available %s, GPU %s\n", s.name, s.snap.Hostname, s.snap.CPUCount, mibOf(s.snap.RAMAvailableBytes), gpu)
	}
	if res.Probe != nil {
		c.Printf("probe       %s %s: %s, models %q, latency %s %s\n", res.Probe.Kind, res.Probe.Endpoint, res.Probe.Outcome, res.Probe.Models, res.Probe.Latency, res.Probe.Error)
	}
	for _, a := range res.Artifacts {
		c.Printf("artifact    %s %s: %d bytes sha256 %s %s\n", a.Role, a.Path, a.Size, a.SHA256, a.Error)
	}
	for _, k := range sortedMetricNames(res.Metrics) {
		c.Printf("metric      %s %g %s\n", k, res.Metrics[k], res.MetricUnits[k])
	}
	for _, o := range []struct {
		name      string
		bytes     int64
		truncated bool
		excerpt   string
	}{{"stdout", res.StdoutBytes, res.StdoutTruncated, res.StdoutExcerpt}, {"stderr", res.StderrBytes, res.StderrTruncated, res.StderrExcerpt}} {
		if o.bytes == 0 {
			continue
		}
		t := ""
		if o.truncated {
			t = ", truncated"
		}
		c.Printf("%-11s %d bytes%s: %s\n", o.name, o.bytes, t, firstLines(o.excerpt, 3))
	}
}

// mibOf prints a byte count in MiB, or "unknown".
func mibOf(b *uint64) string {
	if b == nil {
		return "unknown"
	}
	return fmt.Sprintf("%d MiB", *b>>20)
}

func sortedMetricNames(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimRight(s, "\n"), "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, " | ")
}
