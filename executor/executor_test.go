package executor_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/executor"
	"github.com/greffe/greffe/internal/config"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/wire"
)

// These tests run the executor against a real node on 127.0.0.1:0, with
// real subprocesses, a fake nvidia-smi first on PATH and real HTTP servers
// playing the model runtimes. They wait on events of the log (bounded),
// never on the clock.

const (
	host = "spark-1"
	// waitFor bounds every wait on an event.
	waitFor = 20 * time.Second
)

type harness struct {
	t       *testing.T
	node    *node.Node
	c       *client.Client
	meminfo string
	// policy is the host policy of the executors config makes: runs of
	// "true" and of what allow adds, hashes under the temporary folder,
	// probes of 127.0.0.1 (the tests' runtimes), and runs as root when the
	// tests run as root.
	policy executor.HostPolicy
}

// allow adds a run template of exactly argv to the harness's policy, for
// the executors config makes from now on.
func (h *harness) allow(argv ...string) []string {
	h.policy.Runs = append(h.policy.Runs, executor.Exact("", argv...))
	return argv
}

// newHarness starts a node (policy nil: the default) and puts the fake
// nvidia-smi variant gpu first on PATH.
func newHarness(t *testing.T, policy *aggregates.Policy, gpu string) *harness {
	t.Helper()
	return newHarnessWith(t, gpu, node.Config{Policy: policy}, "")
}

// newHarnessWith starts a node of cfg (DataDir and API.Addr set here)
// whose commands the harness sends with token.
func newHarnessWith(t *testing.T, gpu string, cfg node.Config, token string) *harness {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "fixtures", "fake-gpu", gpu))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	cfg.DataDir, cfg.API.Addr = t.TempDir(), "127.0.0.1:0"
	n, err := node.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	})
	mem := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(mem, []byte("MemTotal:       131072000 kB\nMemAvailable:   8388608 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := executor.HostPolicy{Runs: []executor.RunTemplate{executor.Exact("true", "true")}, HashPaths: []string{filepath.Clean(os.TempDir())},
		ProbeHosts: []string{"127.0.0.1"}, AllowLoopbackProbeTargets: true, AllowRootRuns: os.Geteuid() == 0}
	return &harness{t: t, node: n, c: client.New(n.URL(), token), meminfo: mem, policy: pol}
}

// send sends a command under a fresh id.
func (h *harness) send(name string, data any) (wire.CommandOut, error) {
	h.t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.c.Command(h.t.Context(), wire.CommandIn{Command: name, ID: uuid.NewString(), Actor: "test", Data: b})
}

func (h *harness) must(name string, data any) wire.CommandOut {
	h.t.Helper()
	out, err := h.send(name, data)
	if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	return out
}

// register grants an activation approval and registers a new key for the
// executor id; it returns the key.
func (h *harness) register(id string) ed25519.PrivateKey {
	h.t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		h.t.Fatal(err)
	}
	approval := "reg-" + id + "-" + uuid.NewString()[:8]
	h.must("GrantApproval", aggregates.GrantApproval{ApprovalID: aggregates.ID(approval), Approver: "owner", Action: aggregates.ActionActivation,
		Subject: aggregates.ShortText(aggregates.ExecutorStream(id)), Uses: 1, ExpiresAt: time.Now().Add(24 * time.Hour)})
	h.must("RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: aggregates.ID(id), Host: host, PublicKey: aggregates.Ed25519PublicKey(key.Public().(ed25519.PublicKey)), ApprovalID: aggregates.OptionalID(approval)})
	return key
}

// config is an executor of id with key on the harness's node.
func (h *harness) config(id string, key ed25519.PrivateKey) executor.Config {
	cfg := executor.DefaultConfig()
	cfg.Client, cfg.ExecutorID, cfg.Host, cfg.Key = client.New(h.node.URL(), ""), id, host, key
	cfg.Meminfo, cfg.SnapshotTimeout, cfg.TempRoot, cfg.Version = h.meminfo, 2*time.Second, h.t.TempDir(), "test"
	cfg.Policy = h.policy
	cfg.Policy.Runs = slices.Clone(h.policy.Runs)
	return cfg
}

// running is an executor started by start.
type running struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's error, once done is closed
}

// start runs an executor until stop is called or the test ends.
func (h *harness) start(cfg executor.Config) *running {
	h.t.Helper()
	x, err := executor.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: h.t, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = x.Run(ctx)
	}()
	h.t.Cleanup(func() { _ = r.stop() })
	return r
}

// wait returns Run's error once it returned by itself (bounded).
func (r *running) wait() error {
	r.t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(waitFor):
		r.t.Fatal("the executor kept running")
		return nil
	}
}

// stop cancels Run and returns its error. Idempotent.
func (r *running) stop() error {
	r.cancel()
	return r.wait()
}

// request requests a measurement and returns its id.
func (h *harness) request(r aggregates.RequestMeasurement) string {
	h.t.Helper()
	if r.MeasurementID == "" {
		r.MeasurementID = aggregates.ID("m-" + uuid.NewString()[:8])
	}
	if r.Host == "" {
		r.Host = host
	}
	if r.Kind == "" {
		r.Kind = aggregates.MeasurementRun
	}
	if r.Timeout.Duration == 0 {
		r.Timeout = aggregates.PositiveDuration(aggregates.D(10 * time.Second))
	}
	if r.OutputCapBytes == 0 {
		r.OutputCapBytes = 16 << 10
	}
	h.must("RequestMeasurement", r)
	return string(r.MeasurementID)
}

// waitEvent follows the log from 0 until an event of typ on stream (or,
// with a stream ending in "-", on a stream with that prefix) matches.
func (h *harness) waitEvent(stream, typ string, match func(events.Event) bool) events.Event {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), waitFor)
	defer cancel()
	var found events.Event
	errFound := errors.New("found")
	err := h.c.Subscribe(ctx, 0, events.Filter{StreamPrefix: stream, Types: []string{typ}}, func(e events.Event) error {
		if (strings.HasSuffix(stream, "-") || e.Stream == stream) && (match == nil || match(e)) {
			found = e
			return errFound
		}
		return nil
	})
	if !errors.Is(err, errFound) {
		h.t.Fatalf("no %s on %s within %s: %v", typ, stream, waitFor, err)
	}
	return found
}

// refused waits for the recorded refusal of a command on a measurement.
func (h *harness) refused(command, measurementID string) commands.CommandRefused {
	h.t.Helper()
	var d commands.CommandRefused
	h.waitEvent(commands.RefusalsStream, commands.TypeCommandRefused, func(e events.Event) bool {
		var r commands.CommandRefused
		if json.Unmarshal(e.Data, &r) != nil || r.Command != command {
			return false
		}
		if id, _ := r.Details["measurement_id"].(string); id != measurementID {
			return false
		}
		d = r
		return true
	})
	return d
}

// stream returns a stream's event types in order (none for a stream that
// does not exist).
func (h *harness) stream(name string) []string {
	h.t.Helper()
	out, err := h.c.ReadStream(h.t.Context(), name, events.ReadOptions{Limit: 1000})
	if client.CodeOf(err) == "not_found" {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	var types []string
	for _, e := range out.Events {
		types = append(types, e.Type)
	}
	return types
}

// result waits for the measurement's result, checks its signature against
// key with the standard DSSE verification, and decodes it.
func (h *harness) result(id string, key ed25519.PrivateKey) aggregates.MeasurementResult {
	h.t.Helper()
	e := h.waitEvent(aggregates.MeasurementStream(id), aggregates.TypeMeasurementRecorded, nil)
	pub := key.Public().(ed25519.PublicKey)
	if _, err := events.VerifyEnvelope(e.Data, e.Envelope, func(kid string) (ed25519.PublicKey, bool, bool) {
		return pub, false, kid == events.KeyID(pub)
	}); err != nil {
		h.t.Fatalf("the stored result does not verify: %v", err)
	}
	var r aggregates.MeasurementResult
	if err := json.Unmarshal(e.Data, &r); err != nil {
		h.t.Fatal(err)
	}
	return r
}

// liveState returns the live_proven state of provider's row of the
// readiness projection, once the projection has folded minPosition events.
func (h *harness) liveState(provider string, minPosition uint64) string {
	h.t.Helper()
	b, err := h.c.Projection(h.t.Context(), "readiness", client.ProjectionQuery{Key: provider, MinPosition: minPosition})
	if err != nil {
		h.t.Fatal(err)
	}
	var out struct {
		Rows []projections.ReadinessRow `json:"rows"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Rows) != 1 {
		h.t.Fatalf("readiness of %s: %v %s", provider, err, b)
	}
	return out.Rows[0].LiveProven.State
}

// gate is a file a run waits for: the test decides when the run ends,
// without sleeping. Its argv is allowed for the executors config makes
// from now on.
func (h *harness) gate() (path string, argv []string) {
	path = filepath.Join(h.t.TempDir(), "go")
	return path, h.allow("sh", "-c", "while [ ! -e "+path+" ]; do sleep 0.02; done; echo released")
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// openAI is a fake OpenAI-compatible runtime answering /v1/models with
// body (status 0: never answers).
func openAI(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/models" && status == 0:
			<-r.Context().Done()
		case r.URL.Path == "/v1/models":
			w.WriteHeader(status)
			io.WriteString(w, body)
		case r.URL.Path == "/v1/chat/completions":
			io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// declare declares a local provider at endpoint serving tag.
func (h *harness) declare(name, endpoint, tag string) {
	h.t.Helper()
	h.must("DeclareProvider", aggregates.DeclareProvider{Name: aggregates.ID(name), Kind: aggregates.KindLocal, Profile: "local_ollama", Endpoint: aggregates.OptionalLongText(endpoint),
		ModelTag: aggregates.OptionalShortText(tag), Capabilities: []string{"chat", "code"}, TaskClasses: []string{"code"}})
	h.must("DeclareProviderLimits", aggregates.DeclareProviderLimits{Name: aggregates.ID(name), ContextTokens: 32768, OutputTokens: 8192})
}

const tag = "qwen3-coder:30b"

// TestExecutor_Kinds: one executor runs every kind of request; each signed
// result verifies and says what happened.
func TestExecutor_Kinds(t *testing.T) {
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	bench := h.allow("sh", "-c", "echo warm; echo 'metric tflops 41.5 TFLOP/s'; echo oops >&2")
	sleeper := h.allow("sh", "-c", "sleep 60 & echo $!; wait")
	chatty := h.allow("sh", "-c", "head -c 5000 /dev/zero | tr '\\000' x")
	missing := h.allow("greffe-no-such-benchmark")
	h.start(h.config("gpu1", key))

	t.Run("a run with metrics and a snapshot before and after", func(t *testing.T) {
		argv := bench
		id := h.request(aggregates.RequestMeasurement{Argv: argv, Purpose: "benchmark"})
		r := h.result(id, key)
		got := []any{r.Argv, r.Outcome, r.ExitCode, r.StdoutExcerpt, r.StderrExcerpt, r.Metrics, r.MetricUnits, r.StdoutTruncated}
		want := []any{argv, aggregates.ResultExited, 0, "warm\nmetric tflops 41.5 TFLOP/s\n", "oops\n",
			map[string]float64{"tflops": 41.5}, map[string]string{"tflops": "TFLOP/s"}, false}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if r.Before == nil || r.After == nil || r.Before.GPUStatus != aggregates.GPUPresent || r.After.ExecutorVersion != "test" || r.Before.CPUCount < 1 {
			t.Fatalf("snapshots: %+v %+v", r.Before, r.After)
		}
		wantGPU := &aggregates.GPUReading{Name: "NVIDIA GB10", Driver: "580.95.05", MemoryTotalBytes: 122880 << 20, MemoryUsedBytes: 4096 << 20}
		if diff := cmp.Diff(wantGPU, r.GPU); diff != "" {
			t.Errorf("GPU (-want +got):\n%s", diff)
		}
		if r.RAMAvailableBytes == nil || *r.RAMAvailableBytes != 8<<30 || !r.ResidentModelsObserved {
			t.Errorf("ram %v, resident models observed %v", r.RAMAvailableBytes, r.ResidentModelsObserved)
		}
		if !r.StartedAt.Before(r.EndedAt) || r.Duration.Duration <= 0 {
			t.Errorf("times %s %s %s", r.StartedAt, r.EndedAt, r.Duration)
		}
	})

	t.Run("a timeout kills the process group, grandchild too", func(t *testing.T) {
		id := h.request(aggregates.RequestMeasurement{Argv: sleeper, Timeout: aggregates.PositiveDuration(aggregates.D(500 * time.Millisecond))})
		r := h.result(id, key)
		if r.Outcome != aggregates.ResultTimeout || r.ExitCode != -1 {
			t.Fatalf("got %s %d %q", r.Outcome, r.ExitCode, r.Error)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(r.StdoutExcerpt))
		if err != nil {
			t.Fatalf("no pid in %q", r.StdoutExcerpt)
		}
		waitGone(t, pid)
	})

	t.Run("output past the cap is recorded truncated", func(t *testing.T) {
		id := h.request(aggregates.RequestMeasurement{Argv: chatty, OutputCapBytes: 1024})
		r := h.result(id, key)
		got := []any{len(r.StdoutExcerpt), r.StdoutBytes, r.StdoutTruncated, r.StderrTruncated}
		if diff := cmp.Diff([]any{1024, int64(5000), true, false}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	t.Run("a program that is not there", func(t *testing.T) {
		r := h.result(h.request(aggregates.RequestMeasurement{Argv: missing}), key)
		if r.Outcome != aggregates.ResultStartFailed || !strings.Contains(r.Error, "not found") {
			t.Fatalf("got %s %q", r.Outcome, r.Error)
		}
	})

	probes := []struct {
		name, provider, endpoint string
		wantOutcome              string
		wantExact                bool
	}{
		{"an Ollama probe lists the exact tag", "ollama", openAI(t, 200, `{"object":"list","data":[{"id":"qwen3-coder:30b","object":"model"}]}`), aggregates.ProbeOK, true},
		{"a llama.cpp probe lists only its file: not exact", "llamacpp", openAI(t, 200, `{"object":"list","data":[{"id":"qwen3-coder-30b-q4_k_m.gguf","object":"model","owned_by":"llamacpp"}]}`), aggregates.ProbeOK, false},
		{"a runtime answering 500", "broken", openAI(t, 500, `{"error":"boom"}`), aggregates.ProbeFailed, false},
		{"a runtime that never answers", "wedged", openAI(t, 0, ""), aggregates.ProbeTimeout, false},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			h.declare(p.provider, p.endpoint, tag)
			id := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementProbe, Provider: aggregates.OptionalID(p.provider),
				Argv: []string{aggregates.ProbeModels, p.endpoint}, Timeout: aggregates.PositiveDuration(aggregates.D(time.Second))})
			r := h.result(id, key)
			if r.Probe == nil || string(r.Probe.Outcome) != p.wantOutcome {
				t.Fatalf("probe reading %+v", r.Probe)
			}
			e := h.waitEvent(aggregates.ProviderStream(p.provider), aggregates.TypeProbeRecorded, nil)
			var d aggregates.ProbeRecorded
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			got := []any{d.Outcome, d.ExactTagListed, d.ObservedBy, d.MeasurementID, d.ExpectedTag}
			if diff := cmp.Diff([]any{p.wantOutcome, p.wantExact, "gpu1", id, tag}, got); diff != "" {
				t.Errorf("ProbeRecorded (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("a smoke probe", func(t *testing.T) {
		endpoint := openAI(t, 200, `{"object":"list","data":[{"id":"qwen3-coder:30b"}]}`)
		h.declare("smoked", endpoint, tag)
		id := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementProbe, Provider: "smoked",
			Argv: []string{aggregates.ProbeSmoke, endpoint, tag}, Timeout: aggregates.PositiveDuration(aggregates.D(2 * time.Second))})
		r := h.result(id, key)
		if r.Probe == nil || r.Probe.Outcome != aggregates.ProbeOK || r.Probe.SmokeFinishReason != "stop" {
			t.Fatalf("probe reading %+v", r.Probe)
		}
	})

	t.Run("a hash becomes the binding's hashes", func(t *testing.T) {
		dir := t.TempDir()
		weights, server := filepath.Join(dir, "weights.gguf"), filepath.Join(dir, "llama-server")
		if err := os.WriteFile(weights, []byte("weights"), 0o600); err != nil {
			t.Fatal(err)
		}
		id := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementHash, BindingID: "b1",
			Argv: []string{"weights=" + weights, "server=" + server}})
		r := h.result(id, key)
		sum := sha256.Sum256([]byte("weights"))
		digest := hex.EncodeToString(sum[:])
		if len(r.Artifacts) != 2 || r.Artifacts[0].SHA256 != digest || r.Artifacts[1].SHA256 != "" || r.Artifacts[1].Error == "" {
			t.Fatalf("artifacts %+v", r.Artifacts)
		}
		e := h.waitEvent(aggregates.BindingStream("b1"), aggregates.TypeArtifactHashed, nil)
		var d aggregates.ArtifactHashed
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		got := []any{d.Path, d.Size, d.SHA256, d.VerifiedBy, d.VerifierRole, d.MeasurementID}
		want := []any{weights, int64(7), digest, "gpu1", aggregates.VerifierSupervisor, id}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ArtifactHashed (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{aggregates.TypeArtifactHashed}, h.stream(aggregates.BindingStream("b1"))); diff != "" {
			t.Errorf("a file not read is not hashed (-want +got):\n%s", diff)
		}
	})
}

// waitGone polls (an external process, with a deadline) until pid has
// exited: absent from /proc, or a zombie waiting for its reaper.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs: %s", pid, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signedResult is a result for request id of argv by executor exec,
// signed with key, as a RecordMeasurement.
func signedResult(t *testing.T, id, exec string, argv []string, key ed25519.PrivateKey) aggregates.RecordMeasurement {
	t.Helper()
	now := time.Now().UTC()
	payload, err := json.Marshal(aggregates.MeasurementResult{MeasurementID: id, ExecutorID: exec, Host: host, Argv: argv,
		StartedAt: now, EndedAt: now, ExitCode: 0, Outcome: aggregates.ResultExited}) // a run starts after its request
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.SignData(t.Context(), aggregates.MeasurementPayloadType, payload, key)
	if err != nil {
		t.Fatal(err)
	}
	return aggregates.RecordMeasurement{MeasurementID: aggregates.ID(id), ExecutorID: aggregates.ID(exec), Payload: payload, Envelope: *env}
}

// resign signs r again with key.
func resign(t *testing.T, r aggregates.MeasurementResult, key ed25519.PrivateKey) aggregates.RecordMeasurement {
	t.Helper()
	payload, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.SignData(t.Context(), aggregates.MeasurementPayloadType, payload, key)
	if err != nil {
		t.Fatal(err)
	}
	return aggregates.RecordMeasurement{MeasurementID: aggregates.ID(r.MeasurementID), ExecutorID: aggregates.ID(r.ExecutorID), Payload: payload, Envelope: *env}
}

// TestNode_RefusesMeasurements: the node's gates on results, each through
// HTTP against a real node, each refusal recorded in the refusals stream.
func TestNode_RefusesMeasurements(t *testing.T) {
	h := newHarness(t, nil, "present")
	key1, key2 := h.register("gpu1"), h.register("gpu2")
	revoked := h.register("gpu1") // a second key of gpu1, revoked below
	h.must("RevokeExecutorKey", aggregates.RevokeExecutorKey{ExecutorID: "gpu1", KeyID: aggregates.ShortText(events.KeyID(revoked.Public().(ed25519.PublicKey))), Reason: "host reinstalled"})
	_, unknown, _ := ed25519.GenerateKey(rand.Reader)
	argv := []string{"nvidia-smi", "-q"}
	claimed := func() string {
		id := h.request(aggregates.RequestMeasurement{Argv: argv})
		h.must("ClaimMeasurement", aggregates.ClaimMeasurement{MeasurementID: aggregates.ID(id), ExecutorID: "gpu1", LeaseUntil: time.Now().Add(time.Minute)})
		return id
	}
	cases := []struct {
		name   string
		record func(id string) aggregates.RecordMeasurement
		status int
		code   string
	}{
		{"unsigned", func(id string) aggregates.RecordMeasurement {
			r := signedResult(t, id, "gpu1", argv, key1)
			r.Envelope.Signatures = nil
			return r
		}, 422, aggregates.CodeMeasurementUnsigned}, // a gate, so recorded in refusals (issue #15); was a 400 that recorded nothing
		{"started before it was requested", func(id string) aggregates.RecordMeasurement {
			r := signedResult(t, id, "gpu1", argv, key1)
			var res aggregates.MeasurementResult
			if err := json.Unmarshal(r.Payload, &res); err != nil {
				t.Fatal(err)
			}
			res.StartedAt = res.StartedAt.Add(-time.Hour)
			return resign(t, res, key1)
		}, 422, aggregates.CodeMeasurementTimeInvalid},
		{"a signature that does not verify", func(id string) aggregates.RecordMeasurement {
			r := signedResult(t, id, "gpu1", argv, key1)
			r.Envelope.Signatures[0].Sig[0] ^= 1
			return r
		}, 422, aggregates.CodeSignatureInvalid},
		{"signed by an unknown key", func(id string) aggregates.RecordMeasurement { return signedResult(t, id, "gpu1", argv, unknown) }, 422, aggregates.CodeExecutorKeyUnknown},
		{"signed by a revoked key", func(id string) aggregates.RecordMeasurement { return signedResult(t, id, "gpu1", argv, revoked) }, 422, aggregates.CodeExecutorKeyRevoked},
		{"for an argv that is not the approved one", func(id string) aggregates.RecordMeasurement {
			return signedResult(t, id, "gpu1", []string{"nvidia-smi", "-q", "--loop=1"}, key1)
		}, 422, aggregates.CodeArgvNotApproved},
		{"for a request another executor claimed", func(id string) aggregates.RecordMeasurement { return signedResult(t, id, "gpu2", argv, key2) }, 422, aggregates.CodeNotClaimedByExecutor},
		{"signed well", func(id string) aggregates.RecordMeasurement { return signedResult(t, id, "gpu1", argv, key1) }, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := claimed()
			_, err := h.send("RecordMeasurement", tc.record(id))
			var ae *wire.Error
			switch {
			case tc.status == 200 && err != nil:
				t.Fatal(err)
			case tc.status == 200:
				h.waitEvent(aggregates.MeasurementStream(id), aggregates.TypeMeasurementRecorded, nil)
				return
			case !errors.As(err, &ae) || ae.Status != tc.status || ae.Code != tc.code:
				t.Fatalf("got %v, want %d %s", err, tc.status, tc.code)
			}
			if tc.status == 422 {
				if got := h.refused("RecordMeasurement", id).Code; got != tc.code {
					t.Errorf("recorded refusal %s, want %s", got, tc.code)
				}
			}
			if diff := cmp.Diff([]string{aggregates.TypeMeasurementRequested, aggregates.TypeMeasurementClaimed}, h.stream(aggregates.MeasurementStream(id))); diff != "" {
				t.Errorf("nothing recorded (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExecutor_KeyRevokedBetweenClaimAndReport: the executor claims, its
// key is revoked while it runs; its signed report is refused
// (executor_key_revoked, recorded) and the executor stops.
func TestExecutor_KeyRevokedBetweenClaimAndReport(t *testing.T) {
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	release, argv := h.gate()
	x := h.start(h.config("gpu1", key))
	id := h.request(aggregates.RequestMeasurement{Argv: argv})
	h.waitEvent(aggregates.MeasurementStream(id), aggregates.TypeMeasurementClaimed, nil)
	h.must("RevokeExecutorKey", aggregates.RevokeExecutorKey{ExecutorID: "gpu1", KeyID: aggregates.ShortText(events.KeyID(key.Public().(ed25519.PublicKey))), Reason: "key leaked"})
	touch(t, release)
	if got := h.refused("RecordMeasurement", id).Code; got != aggregates.CodeExecutorKeyRevoked {
		t.Fatalf("refusal %s, want %s", got, aggregates.CodeExecutorKeyRevoked)
	}
	if err := x.wait(); !errors.Is(err, executor.ErrKeyRevoked) {
		t.Fatalf("Run returned %v, want ErrKeyRevoked", err)
	}
}

// TestExecutor_StoppedMidRunIsUncertain: an executor that vanishes
// mid-run leaves its request uncertain (the node's lease watcher notices);
// no executor claims it again; a late result is recorded beside the
// uncertainty, not over it.
func TestExecutor_StoppedMidRunIsUncertain(t *testing.T) {
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	_, argv := h.gate() // never released: only the executor's end ends it
	cfg := h.config("gpu1", key)
	cfg.Lease = 600 * time.Millisecond
	x := h.start(cfg)
	id := h.request(aggregates.RequestMeasurement{Argv: argv, Timeout: aggregates.PositiveDuration(aggregates.D(30 * time.Second))})
	h.waitEvent(aggregates.MeasurementStream(id), aggregates.TypeMeasurementClaimed, nil)
	if err := x.stop(); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(aggregates.MeasurementStream(id), aggregates.TypeMeasurementUncertain, nil)

	// A claim after the lease expired is refused: never retried.
	if _, err := h.send("ClaimMeasurement", aggregates.ClaimMeasurement{MeasurementID: aggregates.ID(id), ExecutorID: "gpu1", LeaseUntil: time.Now().Add(time.Minute)}); client.CodeOf(err) != aggregates.CodeAlreadyClaimed {
		t.Fatalf("a second claim: %v, want %s", err, aggregates.CodeAlreadyClaimed)
	}
	// A fresh executor reads the log from 0 and sees the request; it goes
	// on with a new one and leaves the uncertain one alone.
	h.start(h.config("gpu1", key))
	h.result(h.request(aggregates.RequestMeasurement{Argv: []string{"true"}}), key)
	h.must("RecordMeasurement", signedResult(t, id, "gpu1", argv, key))
	want := []string{aggregates.TypeMeasurementRequested, aggregates.TypeMeasurementClaimed, aggregates.TypeMeasurementUncertain, aggregates.TypeMeasurementRecorded}
	if diff := cmp.Diff(want, h.stream(aggregates.MeasurementStream(id))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestExecutor_RenewsItsLease: a run longer than the lease keeps it by
// renewing, and its result is not late.
func TestExecutor_RenewsItsLease(t *testing.T) {
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	release, argv := h.gate()
	cfg := h.config("gpu1", key)
	cfg.Lease = 300 * time.Millisecond
	h.start(cfg)
	id := h.request(aggregates.RequestMeasurement{Argv: argv})
	h.waitEvent(aggregates.MeasurementStream(id), aggregates.TypeMeasurementLeaseRenewed, nil)
	h.waitEvent(aggregates.MeasurementStream(id), aggregates.TypeMeasurementLeaseRenewed, func(e events.Event) bool { return e.Version >= 3 })
	touch(t, release)
	if r := h.result(id, key); r.Outcome != aggregates.ResultExited || r.StdoutExcerpt != "released\n" {
		t.Fatalf("got %s %q", r.Outcome, r.StdoutExcerpt)
	}
	for _, typ := range h.stream(aggregates.MeasurementStream(id)) {
		if typ == aggregates.TypeMeasurementUncertain {
			t.Fatal("a renewed lease expired")
		}
	}
}

// TestExecutor_TwoRaceForOneRequest: two executors on one host see the
// same request; exactly one claims and reports it. Then the race itself,
// made certain: claims sent at once through HTTP, exactly one wins and
// every other is refused lease_held.
func TestExecutor_TwoRaceForOneRequest(t *testing.T) {
	h := newHarness(t, nil, "present")
	keys := map[string]ed25519.PrivateKey{"gpu1": h.register("gpu1"), "gpu2": h.register("gpu2")}
	for id, k := range keys {
		h.start(h.config(id, k))
	}
	id := h.request(aggregates.RequestMeasurement{Argv: []string{"true"}})
	claim := h.waitEvent(aggregates.MeasurementStream(id), aggregates.TypeMeasurementClaimed, nil)
	var winner aggregates.MeasurementClaimed
	if err := json.Unmarshal(claim.Data, &winner); err != nil {
		t.Fatal(err)
	}
	h.result(id, keys[winner.ExecutorID])
	// No claim is appended after a result (measurement_already_recorded),
	// so counting now is final.
	n := 0
	for _, typ := range h.stream(aggregates.MeasurementStream(id)) {
		if typ == aggregates.TypeMeasurementClaimed {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d claims", n)
	}

}

// TestNode_ConcurrentClaims: the race itself, made certain: claims of
// several executors sent at once through HTTP; exactly one wins, every
// other is refused lease_held.
func TestNode_ConcurrentClaims(t *testing.T) {
	h := newHarness(t, nil, "present")
	const racers = 8
	for i := range racers {
		h.register("racer" + strconv.Itoa(i))
	}
	id := h.request(aggregates.RequestMeasurement{Argv: []string{"true"}})
	codes := make([]string, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(aggregates.ClaimMeasurement{MeasurementID: aggregates.ID(id), ExecutorID: aggregates.ID("racer" + strconv.Itoa(i)), LeaseUntil: time.Now().Add(time.Minute)})
			_, err := h.c.Command(t.Context(), wire.CommandIn{Command: "ClaimMeasurement", ID: uuid.NewString(), Data: b})
			codes[i] = "won"
			if err != nil {
				codes[i] = client.CodeOf(err)
			}
		}()
	}
	wg.Wait()
	won := 0
	for _, c := range codes {
		switch c {
		case "won":
			won++
		case aggregates.CodeLeaseHeld:
		default:
			t.Errorf("a claim answered %q", c)
		}
	}
	if won != 1 {
		t.Fatalf("%d claims won: %v", won, codes)
	}
}

// TestExecutor_Registration: an executor whose key is not registered waits;
// registering it under an approval (with the executor's own Register, as
// `greffe executor register` does) lets it work. Without an approval the
// registration is refused with the gate's code.
func TestExecutor_Registration(t *testing.T) {
	h := newHarness(t, nil, "present")
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	cfg := h.config("gpu1", key)
	x, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := x.KeyStatus(t.Context()); err != nil || st != executor.KeyNotRegistered {
		t.Fatalf("status %s %v", st, err)
	}
	if err := x.Register(t.Context(), "no-such-approval"); client.CodeOf(err) != aggregates.CodeApprovalMissing {
		t.Fatalf("register without approval: %v", err)
	}
	h.start(cfg)
	id := h.request(aggregates.RequestMeasurement{Argv: []string{"true"}})
	h.must("GrantApproval", aggregates.GrantApproval{ApprovalID: "reg-gpu1", Approver: "owner", Action: aggregates.ActionActivation,
		Subject: aggregates.ShortText(aggregates.ExecutorStream("gpu1")), Uses: 1, ExpiresAt: time.Now().Add(time.Hour)})
	if err := x.Register(t.Context(), "reg-gpu1"); err != nil {
		t.Fatal(err)
	}
	if r := h.result(id, key); r.Outcome != aggregates.ResultExited {
		t.Fatalf("got %s", r.Outcome)
	}
	if st, err := x.KeyStatus(t.Context()); err != nil || st != executor.KeyRegistered {
		t.Fatalf("status %s %v", st, err)
	}
}

// TestExecutor_ResumesFromItsState: a restarted executor resumes from its
// state file and picks up what was requested while it was away.
func TestExecutor_ResumesFromItsState(t *testing.T) {
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	cfg := h.config("gpu1", key)
	cfg.StateFile = filepath.Join(t.TempDir(), "executor.state")
	x := h.start(cfg)
	first := h.request(aggregates.RequestMeasurement{Argv: []string{"true"}})
	h.result(first, key)
	if err := x.stop(); err != nil {
		t.Fatal(err)
	}
	var st struct{ From uint64 }
	b, err := os.ReadFile(cfg.StateFile)
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("state %s: %v", b, err)
	}
	claim := h.waitEvent(aggregates.MeasurementStream(first), aggregates.TypeMeasurementClaimed, nil)
	if st.From <= claim.Position {
		t.Fatalf("resumes from %d, before its settled request's claim at %d", st.From, claim.Position)
	}
	second := h.request(aggregates.RequestMeasurement{Argv: []string{"true"}})
	h.start(cfg)
	h.result(second, key)
}

// TestExecutor_Admission: the admission screens of a runtime start read
// the executor's signed measurement: admitted on a fresh one within the
// screens, refused above the GPU ceiling, missing or stale refuse.
func TestExecutor_Admission(t *testing.T) {
	stale := aggregates.DefaultPolicy()
	stale.Admission.MeasurementFreshness = aggregates.D(time.Nanosecond) // every measurement is stale by the time it is read
	cases := []struct {
		name     string
		gpu      string
		policy   *aggregates.Policy
		decision string // "" when DecideAdmission is refused
		code     string // the failed screen, or the refusal
	}{
		{"a fresh measurement within the screens admits", "present", nil, aggregates.AdmissionAdmitted, ""},
		{"GPU memory above the ceiling refuses", "busy", nil, aggregates.AdmissionRefused, aggregates.CodeGPUAllocationAboveCeiling},
		{"GPU memory unknown refuses", "unified", nil, aggregates.AdmissionRefused, aggregates.CodeGPUDiagnosticsMissing},
		{"no GPU refuses", "absent", nil, aggregates.AdmissionRefused, aggregates.CodeGPUDiagnosticsMissing},
		{"a stale measurement refuses", "present", &stale, "", aggregates.CodeMeasurementStale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.policy, tc.gpu)
			key := h.register("gpu1")
			h.start(h.config("gpu1", key))
			// The provider is proven live by the executor's own probe.
			endpoint := openAI(t, 200, `{"object":"list","data":[{"id":"qwen3-coder:30b"}]}`)
			h.declare("spark", endpoint, tag)
			h.must("GrantApproval", aggregates.GrantApproval{ApprovalID: "act", Approver: "owner", Action: aggregates.ActionActivation,
				Subject: aggregates.ShortText(aggregates.ProviderStream("spark")), Uses: 1, ExpiresAt: time.Now().Add(time.Hour)})
			h.must("ActivateProvider", aggregates.ActivateProvider{Name: "spark", ApprovalID: "act"})
			probe := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementProbe, Provider: "spark", Argv: []string{aggregates.ProbeModels, endpoint}})
			h.result(probe, key)
			h.must("SubmitMission", aggregates.SubmitMission{MissionID: "m1", TaskClass: "code", Mode: aggregates.ModeProposal, DeclaredProvider: "spark",
				AllowedFiles: []string{"bin/*.sh"}, AcceptanceChecks: []aggregates.AcceptanceCheck{{ID: "c01", Argv: []string{"bash", "t.sh"}}}, StartsRuntime: true})
			h.must("DecideRoute", aggregates.DecideRoute{MissionID: "m1"})

			if _, err := h.send("DecideAdmission", aggregates.DecideAdmission{MissionID: "m1", MeasurementID: "never"}); client.CodeOf(err) != aggregates.CodeMeasurementMissing {
				t.Fatalf("a missing measurement: %v", err)
			}
			snap := h.request(aggregates.RequestMeasurement{Argv: []string{"true"}, Purpose: "admission screens", MissionID: "m1"})
			h.result(snap, key)
			_, err := h.send("DecideAdmission", aggregates.DecideAdmission{MissionID: "m1", MeasurementID: aggregates.ID(snap)})
			if tc.decision == "" {
				if client.CodeOf(err) != tc.code {
					t.Fatalf("got %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e := h.waitEvent(aggregates.MissionStream("m1"), aggregates.TypeAdmissionDecided, nil)
			var d aggregates.AdmissionDecided
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, s := range d.Screens {
				if !s.Passed {
					failed = append(failed, s.Code)
				}
			}
			want := []any{tc.decision, []string(nil), snap}
			if tc.code != "" {
				want[1] = []string{tc.code}
				if tc.gpu == "busy" {
					want[1] = []string{tc.code, aggregates.CodeResidentModelPresent}
				}
				if tc.gpu == "absent" {
					want[1] = []string{tc.code, aggregates.CodeResidentModelsUnknown}
				}
			}
			if diff := cmp.Diff(want, []any{d.Decision, failed, d.MeasurementID}); diff != "" {
				t.Errorf("admission (-want +got):\n%s", diff)
			}
			h.must("GrantApproval", aggregates.GrantApproval{ApprovalID: "start", Approver: "owner", Action: aggregates.ActionStartup,
				Subject: aggregates.ShortText(aggregates.ProviderStream("spark")), Uses: 1, ExpiresAt: time.Now().Add(time.Hour)})
			_, err = h.send("StartAttempt", aggregates.StartAttempt{MissionID: "m1", ApprovalID: "start"})
			switch {
			case tc.decision == aggregates.AdmissionAdmitted && err != nil:
				t.Fatalf("an admitted start: %v", err)
			case tc.decision == aggregates.AdmissionRefused && client.CodeOf(err) != aggregates.CodeAdmissionRefused:
				t.Fatalf("a refused admission's start: %v", err)
			}
		})
	}
}

// TestConfig_Validate: every problem at once.
func TestConfig_Validate(t *testing.T) {
	_, err := executor.New(executor.Config{Lease: -time.Second, Concurrency: 100})
	var ve *config.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, executor.ErrInvalidConfig) {
		t.Fatalf("got %v", err)
	}
	want := []string{"client is required", `executor_id "": 1 to 128 bytes without spaces`, `host "": 1 to 128 bytes without spaces`,
		"key is 0 bytes; an ed25519 private key is 64", "lease is -1s; must be positive", "concurrency is 100; 1 to 64"}
	if diff := cmp.Diff(want, ve.Problems); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The host policy's problems are the config's, under "policy.".
	h := newHarness(t, nil, "present")
	cfg := h.config("gpu1", h.register("gpu1"))
	cfg.Policy = executor.HostPolicy{HashPaths: []string{"models"}, ProbeHosts: []string{"x:0"}}
	_, err = executor.New(cfg)
	want = []string{`policy.hash_paths[0] "models": not an absolute path`, `policy.probe_hosts[0] "x:0": port "0": want 1 to 65535`}
	if !errors.As(err, &ve) {
		t.Fatalf("got %v", err)
	}
	if diff := cmp.Diff(want, ve.Problems); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestVerifyRecorded: a stored result verifies against the keys its
// executor had at its position, even after the key is revoked later; a
// measurement without a result is ErrNotRecorded.
func TestVerifyRecorded(t *testing.T) {
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	argv := []string{"true"}
	id := h.request(aggregates.RequestMeasurement{Argv: argv})
	if _, err := executor.VerifyRecorded(t.Context(), h.c, id); !errors.Is(err, executor.ErrNotRecorded) {
		t.Fatalf("before its result: %v", err)
	}
	if _, err := executor.VerifyRecorded(t.Context(), h.c, "never-requested"); !errors.Is(err, executor.ErrNotRecorded) {
		t.Fatalf("never requested: %v", err)
	}
	h.must("ClaimMeasurement", aggregates.ClaimMeasurement{MeasurementID: aggregates.ID(id), ExecutorID: "gpu1", LeaseUntil: time.Now().Add(time.Minute)})
	h.must("RecordMeasurement", signedResult(t, id, "gpu1", argv, key))
	kid := events.KeyID(key.Public().(ed25519.PublicKey))
	h.must("RevokeExecutorKey", aggregates.RevokeExecutorKey{ExecutorID: "gpu1", KeyID: aggregates.ShortText(kid), Reason: "rotated"})
	v, err := executor.VerifyRecorded(t.Context(), h.c, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{[]string{kid}, id, false}, []any{v.KeyIDs, v.Result.MeasurementID, v.Late}); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestExecutor_LeaseWithinThePolicy: on a node granting only 1 s of lease
// grace, the executor asks for no more (else every claim would be refused
// lease_invalid).
func TestExecutor_LeaseWithinThePolicy(t *testing.T) {
	pol := aggregates.DefaultPolicy()
	pol.Measurement.LeaseGrace = aggregates.D(time.Second)
	h := newHarness(t, &pol, "present")
	key := h.register("gpu1")
	h.start(h.config("gpu1", key))
	id := h.request(aggregates.RequestMeasurement{Argv: []string{"true"}, Timeout: aggregates.PositiveDuration(aggregates.D(2 * time.Second))})
	if r := h.result(id, key); r.Outcome != aggregates.ResultExited {
		t.Fatalf("got %s", r.Outcome)
	}
}

// TestExecutor_HangingNvidiaSMI: a wedged nvidia-smi is bounded and
// recorded as such; the measurement still completes, with no GPU reading
// (so it admits nothing).
func TestExecutor_HangingNvidiaSMI(t *testing.T) {
	h := newHarness(t, nil, "hang")
	key := h.register("gpu1")
	cfg := h.config("gpu1", key)
	cfg.SnapshotTimeout = 300 * time.Millisecond
	h.start(cfg)
	r := h.result(h.request(aggregates.RequestMeasurement{Argv: []string{"true"}}), key)
	got := []any{r.Outcome, r.Before.GPUStatus, r.After.GPUStatus, r.GPU == nil, r.ResidentModelsObserved}
	if diff := cmp.Diff([]any{aggregates.ResultExited, aggregates.GPUTimeout, aggregates.GPUTimeout, true, false}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestExecutor_ExecutorToken: with bearer tokens, an executor's token
// claims, renews and records, and may not register keys (a writer's job).
func TestExecutor_ExecutorToken(t *testing.T) {
	const writer, exec = "writer-token-0123456789", "executor-token-0123456789"
	// The harness grants approvals and sends writers' commands with one
	// token: since issue #20 that is the admin's (a writer grants none).
	tokens, err := api.NewTokens([]api.Token{{Name: "owner", Role: api.RoleAdmin, Token: writer}, {Name: "gpu1", Role: api.RoleExecutor, Token: exec}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, "present", node.Config{API: api.Config{Tokens: tokens}}, writer)
	key := h.register("gpu1")
	release, argv := h.gate()
	cfg := h.config("gpu1", key)
	cfg.Client, cfg.Lease = client.New(h.node.URL(), exec), 300*time.Millisecond
	x, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ae *wire.Error
	if err := x.Register(t.Context(), "any"); !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("an executor token registering a key: %v", err)
	}
	h.start(cfg)
	id := h.request(aggregates.RequestMeasurement{Argv: argv})
	h.waitEvent(aggregates.MeasurementStream(id), aggregates.TypeMeasurementLeaseRenewed, nil)
	touch(t, release)
	if r := h.result(id, key); r.Outcome != aggregates.ResultExited {
		t.Fatalf("got %s", r.Outcome)
	}
}
