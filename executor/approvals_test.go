package executor_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// Issue #20, finding 7, the other half: "the executor runs only what its
// own host's configuration allows ... or what an approval by a non-writer
// principal covers". These tests run a real node with bearer tokens (an
// approver carol, a writer wanda, an executor gpu1 whose token's name is
// its executor id) and a real executor following it over HTTP.

const (
	approverToken = "carol-approver-token-0123456789"
	writerToken   = "wanda-writer-token-0123456789"
	executorToken = "gpu1-executor-token-0123456789"
)

// principalsHarness is a harness whose node has the tokens above; its
// own client (h.c) is the writer's.
type principalsHarness struct {
	*harness
	approver *client.Client
}

func newPrincipalsHarness(t *testing.T) *principalsHarness {
	t.Helper()
	tokens, err := api.NewTokens([]api.Token{
		{Name: "carol", Role: api.RoleApprover, Token: approverToken},
		{Name: "wanda", Role: api.RoleWriter, Token: writerToken},
		{Name: "gpu1", Role: api.RoleExecutor, Token: executorToken},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, "present", node.Config{API: api.Config{Tokens: tokens}}, writerToken)
	return &principalsHarness{harness: h, approver: client.New(h.node.URL(), approverToken)}
}

// register registers a new key of gpu1 as the roles do it: the approver
// grants the activation, the writer registers the key.
func (h *principalsHarness) register() ed25519.PrivateKey {
	h.t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		h.t.Fatal(err)
	}
	approval := "reg-gpu1-" + uuid.NewString()[:8]
	h.approve("GrantApproval", aggregates.GrantApproval{ApprovalID: aggregates.ID(approval), Approver: "carol", Action: aggregates.ActionActivation,
		Subject: aggregates.ShortText(aggregates.ExecutorStream("gpu1")), Uses: 1, ExpiresAt: time.Now().Add(24 * time.Hour)})
	h.must("RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: "gpu1", Host: host, PublicKey: aggregates.Ed25519PublicKey(key.Public().(ed25519.PublicKey)), ApprovalID: aggregates.OptionalID(approval)})
	return key
}

// approve sends a command with the approver's token; it must be appended.
func (h *principalsHarness) approve(name string, data any) wire.CommandOut {
	h.t.Helper()
	out, err := h.approverSend(name, data)
	if err != nil {
		h.t.Fatalf("%s as the approver: %v", name, err)
	}
	return out
}

func (h *principalsHarness) approverSend(name string, data any) (wire.CommandOut, error) {
	h.t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.approver.Command(h.t.Context(), wire.CommandIn{Command: name, ID: uuid.NewString(), Data: b})
}

// executorConfig is gpu1 with its own token.
func (h *principalsHarness) executorConfig(key ed25519.PrivateKey) executor.Config {
	cfg := h.config("gpu1", key)
	cfg.Client = client.New(h.node.URL(), executorToken)
	return cfg
}

// seen requests a run the policy allows and waits for its result: once
// it is recorded, the executor (one worker, following the log in order)
// has decided every request made before it.
func (h *principalsHarness) seen(key ed25519.PrivateKey) {
	h.t.Helper()
	if r := h.result(h.request(aggregates.RequestMeasurement{Argv: []string{"true"}}), key); r.Outcome != aggregates.ResultExited {
		h.t.Fatalf("the sentinel run: %s %q", r.Outcome, r.Error)
	}
}

// refusedWith checks that err is a refusal of status and code.
func refusedWith(t *testing.T, err error, status int, code string) {
	t.Helper()
	var ce *wire.Error
	if !errors.As(err, &ce) || ce.Status != status || ce.Code != code {
		t.Fatalf("got %v, want %d %s", err, status, code)
	}
}

func absent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists (or cannot be read: %v): what was not approved ran", path, err)
	}
}

// TestApprovals_ApproverApprovesWhatThePolicyDoesNotList: a writer's run,
// hash and probe outside the host policy are held, not done (the run's
// marker file stays absent, the stream shows only the request); a
// writer's ApproveMeasurement is refused role_not_allowed (recorded);
// the approver's makes each run, signed and recorded: the approval stands
// in for runs, hash_paths and probe_hosts.
func TestApprovals_ApproverApprovesWhatThePolicyDoesNotList(t *testing.T) {
	h := newPrincipalsHarness(t)
	key := h.register()
	outside := t.TempDir() // under no hash_paths of the policy below
	weights := filepath.Join(outside, "w.gguf")
	if err := os.WriteFile(weights, []byte("weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	endpoint := openAI(t, 200, `{"object":"list","data":[{"id":"qwen3-coder:30b","object":"model"}]}`)
	h.declare("ollama", endpoint, tag)
	cfg := h.executorConfig(key)
	cfg.Policy.HashPaths = []string{filepath.Join(t.TempDir(), "models")}
	cfg.Policy.ProbeHosts = []string{"gpu-runtime.lan"} // not 127.0.0.1; loopback stays an allowed class
	h.start(cfg)

	marker := filepath.Join(t.TempDir(), "ran")
	run := h.request(aggregates.RequestMeasurement{Argv: []string{"touch", marker}})
	hash := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementHash, BindingID: "b-out", Argv: []string{"weights=" + weights}})
	probe := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementProbe, Provider: "ollama",
		Argv: []string{aggregates.ProbeModels, endpoint}, Timeout: aggregates.PositiveDuration(aggregates.D(2 * time.Second))})
	h.seen(key)
	for _, id := range []string{run, hash, probe} {
		if diff := cmp.Diff([]string{aggregates.TypeMeasurementRequested}, h.stream(aggregates.MeasurementStream(id))); diff != "" {
			t.Errorf("%s is held unclaimed (-want +got):\n%s", id, diff)
		}
	}
	absent(t, marker)
	if got := h.stream(aggregates.BindingStream("b-out")); len(got) != 0 {
		t.Errorf("a held hash wrote to its binding: %v", got)
	}

	// A writer approving its own request: the catalogue's gate, recorded.
	_, err := h.send("ApproveMeasurement", aggregates.ApproveMeasurement{MeasurementID: aggregates.ID(run)})
	refusedWith(t, err, http.StatusForbidden, aggregates.CodeRoleNotAllowed)
	h.waitEvent(commands.RefusalsStream, commands.TypeCommandRefused, func(e events.Event) bool {
		var d commands.CommandRefused
		return json.Unmarshal(e.Data, &d) == nil && d.Command == "ApproveMeasurement" && d.Code == aggregates.CodeRoleNotAllowed && d.Actor == "wanda"
	})
	h.seen(key)
	absent(t, marker)
	if diff := cmp.Diff([]string{aggregates.TypeMeasurementRequested}, h.stream(aggregates.MeasurementStream(run))); diff != "" {
		t.Errorf("after the writer's approval (-want +got):\n%s", diff)
	}

	// The approver's approval: each runs, under the approval.
	for _, id := range []string{run, hash, probe} {
		h.approve("ApproveMeasurement", aggregates.ApproveMeasurement{MeasurementID: aggregates.ID(id)})
	}
	r := h.result(run, key)
	if r.Outcome != aggregates.ResultExited || r.ExitCode != 0 {
		t.Fatalf("the approved run: %s %d %q", r.Outcome, r.ExitCode, r.Error)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the approved run did not run: %v", err)
	}
	e := h.waitEvent(aggregates.MeasurementStream(run), aggregates.TypeMeasurementApproved, nil)
	var ap aggregates.MeasurementApproved
	if err := json.Unmarshal(e.Data, &ap); err != nil || ap.Approver != "carol" || ap.Host != host || e.Actor != "carol" {
		t.Errorf("MeasurementApproved %+v (actor %q): %v", ap, e.Actor, err)
	}
	if types := h.stream(aggregates.MeasurementStream(run)); len(types) < 4 || types[1] != aggregates.TypeMeasurementApproved ||
		types[2] != aggregates.TypeMeasurementClaimed || types[len(types)-1] != aggregates.TypeMeasurementRecorded {
		t.Errorf("the approved run's stream: %v", types)
	}
	if r := h.result(hash, key); r.Outcome != aggregates.ResultCompleted || len(r.Artifacts) != 1 || r.Artifacts[0].SHA256 == "" {
		t.Errorf("the approved hash: %s %+v", r.Outcome, r.Artifacts)
	}
	h.waitEvent(aggregates.BindingStream("b-out"), aggregates.TypeArtifactHashed, nil)
	if r := h.result(probe, key); r.Outcome != aggregates.ResultCompleted || r.Probe == nil || r.Probe.Outcome != aggregates.ProbeOK {
		t.Errorf("the approved probe: %s %+v", r.Outcome, r.Probe)
	}
}

// TestApprovals_IgnoredByThePolicy: with ignore_approvals a run the policy
// does not list is refused_by_host at once, whether its approval came
// before the executor saw it or is sent after (then the node refuses it:
// measurement_already_claimed); nothing runs.
func TestApprovals_IgnoredByThePolicy(t *testing.T) {
	h := newPrincipalsHarness(t)
	key := h.register()
	marker := filepath.Join(t.TempDir(), "ran")
	// Approved before any executor runs: the approval is recorded...
	early := h.request(aggregates.RequestMeasurement{Argv: []string{"touch", marker}})
	h.approve("ApproveMeasurement", aggregates.ApproveMeasurement{MeasurementID: aggregates.ID(early)})
	cfg := h.executorConfig(key)
	cfg.Policy.IgnoreApprovals = true
	h.start(cfg)
	// ...and changes nothing.
	for _, id := range []string{early, h.request(aggregates.RequestMeasurement{Argv: []string{"touch", marker}})} {
		r := h.result(id, key)
		if r.Outcome != executor.OutcomeRefusedByHost || !strings.HasPrefix(r.Error, executor.CodeRunNotAllowed+": ") {
			t.Errorf("%s: %s %q", id, r.Outcome, r.Error)
		}
		if _, err := h.approverSend("ApproveMeasurement", aggregates.ApproveMeasurement{MeasurementID: aggregates.ID(id)}); id != early {
			refusedWith(t, err, http.StatusUnprocessableEntity, aggregates.CodeMeasurementAlreadyClaimed)
		} else {
			refusedWith(t, err, http.StatusUnprocessableEntity, aggregates.CodeMeasurementAlreadyApproved)
		}
	}
	absent(t, marker)
}

// TestApprovals_NotCovered: an approval never stands in for the address
// classes, allow_root_runs or a ".." in a hash path: such a request is
// refused_by_host at once, approved or not, and nothing is dialled, run
// or read.
func TestApprovals_NotCovered(t *testing.T) {
	h := newPrincipalsHarness(t)
	key := h.register()
	l := listenCounting(t)
	h.declare("meta", "http://169.254.169.254/v1", tag)
	h.declare("local", "http://127.0.0.1:"+l.port()+"/v1", tag)
	models := t.TempDir()
	dots := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementHash, BindingID: "b-dots",
		Argv: []string{"config=" + models + "/../etc/shadow"}})
	meta := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementProbe, Provider: "meta",
		Argv: []string{aggregates.ProbeModels, "http://169.254.169.254/v1"}, Timeout: aggregates.PositiveDuration(aggregates.D(2 * time.Second))})
	local := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementProbe, Provider: "local",
		Argv: []string{aggregates.ProbeModels, "http://127.0.0.1:" + l.port() + "/v1"}, Timeout: aggregates.PositiveDuration(aggregates.D(2 * time.Second))})
	for _, id := range []string{dots, meta, local} {
		h.approve("ApproveMeasurement", aggregates.ApproveMeasurement{MeasurementID: aggregates.ID(id)})
	}
	cfg := h.executorConfig(key)
	cfg.Policy = executor.HostPolicy{HashPaths: []string{models}, ProbeHosts: []string{"127.0.0.1"}} // loopback not allowed
	h.start(cfg)
	cases := []struct{ id, code, rule string }{
		{dots, executor.CodeHashPathNotAllowed, "hash_paths"},
		{meta, executor.CodeProbeAddressNotAllowed, "allow_metadata_probe_targets"},
		{local, executor.CodeProbeAddressNotAllowed, "allow_loopback_probe_targets"},
	}
	for _, tc := range cases {
		r := h.result(tc.id, key)
		if r.Outcome != executor.OutcomeRefusedByHost || !strings.HasPrefix(r.Error, tc.code+": ") || !strings.HasSuffix(r.Error, "(host policy: "+tc.rule+")") {
			t.Errorf("%s: %s %q; want %s (%s)", tc.id, r.Outcome, r.Error, tc.code, tc.rule)
		}
	}
	if got := h.stream(aggregates.BindingStream("b-dots")); len(got) != 0 {
		t.Errorf("a refused hash wrote to its binding: %v", got)
	}
	if n := l.reachedBy(t); n != 0 {
		t.Errorf("%d probe connections reached the loopback listener", n)
	}
	if os.Geteuid() == 0 {
		t.Log("running as root: the root case is TestHostPolicy_Runs/root_without_allow_root_runs (approvals honoured)")
	}
}

// TestApprovals_WhileTheExecutorIsDown: an approval the executor did not
// see arrive is followed all the same: replayed from position 0 by an
// executor started after the request and its approval, and after a
// restart from a state file saved past the held request.
func TestApprovals_WhileTheExecutorIsDown(t *testing.T) {
	h := newPrincipalsHarness(t)
	key := h.register()
	dir := t.TempDir()

	// Requested and approved before any executor runs; no state file.
	first := filepath.Join(dir, "first")
	id := h.request(aggregates.RequestMeasurement{Argv: []string{"touch", first}})
	h.approve("ApproveMeasurement", aggregates.ApproveMeasurement{MeasurementID: aggregates.ID(id)})
	cfg := h.executorConfig(key)
	x := h.start(cfg)
	if r := h.result(id, key); r.Outcome != aggregates.ResultExited || r.ExitCode != 0 {
		t.Fatalf("approved before the executor started: %s %q", r.Outcome, r.Error)
	}
	if _, err := os.Stat(first); err != nil {
		t.Fatal(err)
	}
	if err := x.stop(); err != nil {
		t.Fatal(err)
	}

	// Held by an executor keeping a state file, approved while it is down.
	cfg.StateFile = filepath.Join(dir, "gpu1.state")
	x = h.start(cfg)
	second := filepath.Join(dir, "second")
	held := h.request(aggregates.RequestMeasurement{Argv: []string{"touch", second}})
	h.seen(key)
	if err := x.stop(); err != nil {
		t.Fatal(err)
	}
	req := h.waitEvent(aggregates.MeasurementStream(held), aggregates.TypeMeasurementRequested, nil)
	b, err := os.ReadFile(cfg.StateFile)
	var st struct{ From uint64 }
	if err != nil || json.Unmarshal(b, &st) != nil || st.From <= req.Position {
		t.Fatalf("the state file (%s, %v) should resume past the held request at %d", b, err, req.Position)
	}
	absent(t, second)
	h.approve("ApproveMeasurement", aggregates.ApproveMeasurement{MeasurementID: aggregates.ID(held)})
	h.start(cfg)
	if r := h.result(held, key); r.Outcome != aggregates.ResultExited || r.ExitCode != 0 {
		t.Fatalf("approved while the executor was down: %s %q", r.Outcome, r.Error)
	}
	if _, err := os.Stat(second); err != nil {
		t.Fatal(err)
	}
	// Each ran once: one claim per stream.
	for _, m := range []string{id, held} {
		n := 0
		for _, typ := range h.stream(aggregates.MeasurementStream(m)) {
			if typ == aggregates.TypeMeasurementClaimed {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s was claimed %d times", m, n)
		}
	}
}

// TestAttack_WriterRevokesTheExecutorsKey: a writer's RevokeExecutorKey
// (a writer's command before issue #20) would stop every executor: it is
// refused role_not_allowed, over HTTP, and the executor keeps measuring;
// the approver's revocation stops it (ErrKeyRevoked).
func TestAttack_WriterRevokesTheExecutorsKey(t *testing.T) {
	h := newPrincipalsHarness(t)
	key := h.register()
	x := h.start(h.executorConfig(key))
	h.seen(key)
	revoke := aggregates.RevokeExecutorKey{ExecutorID: "gpu1", KeyID: aggregates.ShortText(events.KeyID(key.Public().(ed25519.PublicKey))), Reason: "a writer stops the GPU hosts"}
	_, err := h.send("RevokeExecutorKey", revoke)
	refusedWith(t, err, http.StatusForbidden, aggregates.CodeRoleNotAllowed)
	if diff := cmp.Diff([]string{events.TypeExecutorKeyRegistered}, h.stream(aggregates.ExecutorStream("gpu1"))); diff != "" {
		t.Errorf("the executor's stream after the writer's revocation (-want +got):\n%s", diff)
	}
	h.seen(key) // still measuring
	h.approve("RevokeExecutorKey", revoke)
	if err := x.wait(); !errors.Is(err, executor.ErrKeyRevoked) {
		t.Fatalf("after the approver's revocation the executor returned %v, want ErrKeyRevoked", err)
	}
}
