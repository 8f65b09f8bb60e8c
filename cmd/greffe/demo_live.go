package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/executor"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/wire"
)

// The demo's live part (issue #16): after the seeds' histories, a control
// plane at work. Two stand-in runtimes on 127.0.0.1 (one like Ollama, one
// like a llama.cpp server that lists only an alias), providers declared on
// them, an executor whose key is registered under an owner's approval, and
// standing probe schedules, so that rows turn green within seconds, one
// stays not live (an alias proves nothing), and stopping a stand-in turns
// its rows red at the next probe.

const (
	demoExecutor = "demo-gpu"
	demoHost     = "demo-host"
	// DefaultDemoProbeInterval is the schedules' interval unless
	// --probe-interval says otherwise.
	defaultDemoProbeInterval = 10 * time.Second
)

// demoNS derives the live part's command ids: the same command sent by a
// second run on the same folder is the same command, applied once.
var demoNS = uuid.MustParse("a4e1c0de-7d3b-4c55-8f0e-16b16e9d2f31")

// demoProvider is one provider of the live part.
type demoProvider struct {
	name, standIn, profile, tag string
	activate                    bool
}

var liveProviders = []demoProvider{
	{"live-qwen3", "ollama", "local_ollama", "qwen3:8b", true},
	{"live-llama3", "ollama", "local_ollama", "llama3.2:3b", true},
	// A llama.cpp server started with --alias lists the alias, not the
	// exact tag: never live-proven.
	{"live-llamacpp", "llama.cpp", "local_llama_cpp", "qwen3-8b:q4_k_m", false},
}

// liveDemo is what the live part started; stop ends it all.
type liveDemo struct {
	standIns map[string]*standIn
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func (l *liveDemo) stop() {
	l.cancel()
	l.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range l.standIns {
		_ = s.Close(ctx)
	}
}

// demoPorts remembers the stand-ins' addresses in the data folder, so a
// second run declares the same endpoints (a new endpoint would end the
// providers' activation).
type demoPorts map[string]string

func loadDemoPorts(dir string) demoPorts {
	p := demoPorts{}
	if b, err := os.ReadFile(filepath.Join(dir, "demo-live.json")); err == nil {
		_ = json.Unmarshal(b, &p)
	}
	return p
}

// startLive starts the live part against n and prints what it started.
func startLive(ctx context.Context, w io.Writer, n *node.Node, dir string, interval time.Duration) (*liveDemo, error) {
	lctx, cancel := context.WithCancel(ctx)
	l := &liveDemo{standIns: map[string]*standIn{}, cancel: cancel}
	ok := false
	defer func() {
		if !ok {
			l.stop()
		}
	}()
	ports := loadDemoPorts(dir)
	for _, s := range []struct {
		name, ownedBy string
		models        []string
	}{
		{"ollama", "library", []string{"qwen3:8b", "llama3.2:3b"}},
		{"llama.cpp", "llamacpp", []string{"Qwen3-8B"}},
	} {
		addr := ports[s.name]
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		si, err := startStandIn(addr, s.name, s.ownedBy, s.models)
		if err != nil {
			return nil, err
		}
		l.standIns[s.name] = si
		ports[s.name] = si.Addr()
	}
	if b, err := json.Marshal(ports); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "demo-live.json"), b, 0o600)
	}

	c := client.New(n.URL(), "")
	now := n.Commands.Clock()()
	run := now.Format("20060102T150405")
	do := func(name string, data any) error {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		id := uuid.NewSHA1(demoNS, append([]byte(name+"\x00"), b...))
		if _, err := c.Command(ctx, wire.CommandIn{Command: name, ID: id.String(), Actor: "demo", Data: b}); err != nil {
			return fmt.Errorf("demo %s: %w", name, err)
		}
		return nil
	}
	rows, err := readinessRows(ctx, c, "")
	if err != nil {
		return nil, err
	}
	for _, p := range liveProviders {
		if err := do("DeclareProvider", aggregates.DeclareProvider{Name: aggregates.ID(p.name), Kind: aggregates.KindLocal, Profile: aggregates.ShortText(p.profile),
			Endpoint: aggregates.OptionalLongText(l.standIns[p.standIn].URL()), ModelTag: aggregates.OptionalShortText(p.tag), Capabilities: []string{"chat", "code"}, TaskClasses: []string{"code", "chat"}}); err != nil {
			return nil, err
		}
		if err := do("DeclareProviderLimits", aggregates.DeclareProviderLimits{Name: aggregates.ID(p.name), ContextTokens: 32768, OutputTokens: 4096}); err != nil {
			return nil, err
		}
		r, known := rows[p.name]
		if !p.activate || known && r.Endpoint == l.standIns[p.standIn].URL() && r.ActivationReady.State != aggregates.StateNotActivated {
			continue
		}
		approval := "demo-activate-" + p.name + "-" + run
		if err := do("GrantApproval", aggregates.GrantApproval{ApprovalID: aggregates.ID(approval), Approver: "demo-owner", Action: aggregates.ActionActivation,
			Subject: aggregates.ShortText(aggregates.ProviderStream(p.name)), Uses: 1, ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
			return nil, err
		}
		if err := do("ActivateProvider", aggregates.ActivateProvider{Name: aggregates.ID(p.name), ApprovalID: aggregates.OptionalID(approval)}); err != nil {
			return nil, err
		}
	}

	key, _, err := executor.LoadOrCreateKey(filepath.Join(dir, "demo-executor.key"))
	if err != nil {
		return nil, err
	}
	// The executor's host policy (issue #20): probes of the two stand-ins,
	// on loopback, and nothing else, approved or not (the demo's node has
	// no tokens: anyone could approve); written where an operator can read
	// it and loaded as `greffe executor --host-policy` loads one.
	policyFile := filepath.Join(dir, "demo-host-policy.json")
	if err := executor.WriteHostPolicy(policyFile, executor.HostPolicy{
		ProbeHosts: []string{l.standIns["ollama"].Addr(), l.standIns["llama.cpp"].Addr()}, AllowLoopbackProbeTargets: true,
		IgnoreApprovals: true}); err != nil {
		return nil, err
	}
	policy, err := executor.LoadHostPolicy(policyFile)
	if err != nil {
		return nil, err
	}
	cfg := executor.DefaultConfig()
	cfg.Client, cfg.ExecutorID, cfg.Host, cfg.Key, cfg.Version = c, demoExecutor, demoHost, key, node.Version
	cfg.TempRoot, cfg.Policy = dir, policy
	x, err := executor.New(cfg)
	if err != nil {
		return nil, err
	}
	registered := "already registered"
	if st, err := x.KeyStatus(ctx); err != nil {
		return nil, err
	} else if st == executor.KeyNotRegistered {
		approval := "demo-register-" + run
		if err := do("GrantApproval", aggregates.GrantApproval{ApprovalID: aggregates.ID(approval), Approver: "demo-owner", Action: aggregates.ActionActivation,
			Subject: aggregates.ShortText(aggregates.ExecutorStream(demoExecutor)), Uses: 1, ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
			return nil, err
		}
		if err := x.Register(ctx, approval); err != nil {
			return nil, err
		}
		registered = "registered under approval " + approval
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := x.Run(lctx); err != nil {
			fmt.Fprintf(w, "demo executor stopped: %v\n", err)
		}
	}()
	timeout := min(interval/2, 5*time.Second)
	for _, p := range liveProviders {
		if err := do("ApproveProbeSchedule", aggregates.ApproveProbeSchedule{Provider: aggregates.ID(p.name), Host: demoHost, Kind: aggregates.ProbeModels,
			Interval: aggregates.PositiveDuration(aggregates.D(interval)), Timeout: aggregates.PositiveDuration(aggregates.D(timeout)), Approver: "demo-owner"}); err != nil {
			return nil, err
		}
	}

	ol, lc := l.standIns["ollama"], l.standIns["llama.cpp"]
	fmt.Fprintf(w, "\nthe live part: a control plane at work (clock: the wall clock, never before the ledger's last recorded time)\n")
	fmt.Fprintf(w, "  stand-in runtime ollama     %s  lists qwen3:8b, llama3.2:3b\n", ol.URL())
	fmt.Fprintf(w, "  stand-in runtime llama.cpp  %s  lists only the alias Qwen3-8B\n", lc.URL())
	fmt.Fprintf(w, "  executor %s on host %s, key %s (%s)\n", demoExecutor, demoHost, x.KeyID(), registered)
	fmt.Fprintf(w, "  its host policy %s: probes of the two stand-ins only; no run, no hash\n", policyFile)
	names := make([]string, len(liveProviders))
	for i, p := range liveProviders {
		names[i] = p.name
	}
	fmt.Fprintf(w, "  probe schedules: %s, every %s on %s\n", strings.Join(names, ", "), interval, demoHost)
	ok = true
	return l, nil
}

// readinessRows reads the matrix (now) by provider; key "" reads all.
func readinessRows(ctx context.Context, c *client.Client, key string) (map[string]projections.ReadinessRow, error) {
	b, err := c.Projection(ctx, "readiness", client.ProjectionQuery{Key: key})
	if err != nil {
		return nil, err
	}
	var out struct {
		Rows []projections.ReadinessRow `json:"rows"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	m := map[string]projections.ReadinessRow{}
	for _, r := range out.Rows {
		m[r.Provider] = r
	}
	return m, nil
}

// waitFirstProbes waits (bounded) until every live provider has a probe.
func waitFirstProbes(ctx context.Context, c *client.Client, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		rows, err := readinessRows(ctx, c, "")
		done := err == nil
		for _, p := range liveProviders {
			if r, ok := rows[p.name]; !ok || r.LiveProven.State == aggregates.StateNotProbed {
				done = false
			}
		}
		if done {
			return
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// printHistory lists the providers no schedule keeps fresh: those of the
// seeds' histories, probed once at their history's time.
func printHistory(ctx context.Context, w io.Writer, c *client.Client) error {
	rows, err := readinessRows(ctx, c, "")
	if err != nil {
		return err
	}
	var hist []string
	for name, r := range rows {
		if r.Schedule == nil {
			hist = append(hist, name)
		}
	}
	sort.Strings(hist)
	fmt.Fprintf(w, "history (the seeds' providers, no probe schedule: probed once, at their history's time): %s\n", strings.Join(hist, ", "))
	return nil
}
