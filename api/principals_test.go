package api_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/wire"
)

// Issue #20, "Principals, not free text": each attack is tried as an
// attacker would, over HTTP with bearer tokens against a real store, the
// real commands handler and the real projections; the setup that an
// attacker cannot do is done by the admin token ("root").

// The tokens of the principals tests: one per role, two executors.
const (
	rootToken  = "root-token-0123456789"
	aliceToken = "alice-writer-token-0123456789"
	carolToken = "carol-approver-token-0123456789"
	gpu1Token  = "gpu1-executor-token-0123456789"
	gpu2Token  = "gpu2-executor-token-0123456789"
)

// principalsHost is the GPU host of both executors.
const principalsHost = "spark-9"

type principalsNode struct {
	t     *testing.T
	base  string
	store *pebblelog.Store
	// keys holds the executors' (and the check runner's) private keys.
	keys map[string]ed25519.PrivateKey
}

// newPrincipalsNode starts a node with the tokens of every role.
func newPrincipalsNode(t *testing.T) *principalsNode {
	t.Helper()
	tokens, err := api.NewTokens([]api.Token{
		{Name: "root", Role: api.RoleAdmin, Token: rootToken},
		{Name: "alice", Role: api.RoleWriter, Token: aliceToken},
		{Name: "carol", Role: api.RoleApprover, Token: carolToken},
		{Name: "gpu1", Role: api.RoleExecutor, Token: gpu1Token},
		{Name: "gpu2", Role: api.RoleExecutor, Token: gpu2Token},
	})
	if err != nil {
		t.Fatal(err)
	}
	base, store := domainNode(t, tokens, nil)
	return &principalsNode{t: t, base: base, store: store, keys: map[string]ed25519.PrivateKey{}}
}

// send sends one command with token and returns its answer: the events
// appended, or the error's status and code.
func (n *principalsNode) send(token, command string, data any) (wire.CommandOut, *wire.Error) {
	n.t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		n.t.Fatal(err)
	}
	out, err := client.New(n.base, token).Command(n.t.Context(), wire.CommandIn{Command: command, ID: uuid.NewString(), Data: b})
	if err == nil {
		return out, nil
	}
	var ce *wire.Error
	if !errors.As(err, &ce) {
		n.t.Fatalf("%s: %v", command, err)
	}
	return out, ce
}

// must sends a command that must be appended.
func (n *principalsNode) must(token, command string, data any) wire.CommandOut {
	n.t.Helper()
	out, ce := n.send(token, command, data)
	if ce != nil {
		n.t.Fatalf("%s: %d %s: %s", command, ce.Status, ce.Code, ce.Message)
	}
	return out
}

// refused sends a command that must be refused with status and code, and
// checks that nothing but the refusal was appended.
func (n *principalsNode) refused(token, command string, data any, status int, code string) {
	n.t.Helper()
	before := n.store.Head().Size
	_, ce := n.send(token, command, data)
	if ce == nil || ce.Status != status || ce.Code != code {
		n.t.Fatalf("%s: got %+v, want %d %s", command, ce, status, code)
	}
	if after := n.store.Head().Size; after != before+1 {
		n.t.Fatalf("%s: the log grew from %d to %d; a refusal appends its record only", command, before, after)
	}
	evs, err := n.store.ReadAll(n.t.Context(), events.ReadOptions{From: before, Limit: 1})
	if err != nil || len(evs) != 1 || evs[0].Stream != "refusals" {
		n.t.Fatalf("%s: what was appended: %v %v", command, evs, err)
	}
}

func (n *principalsNode) events(stream string) []events.Event {
	n.t.Helper()
	evs, err := n.store.ReadStream(n.t.Context(), stream, events.ReadOptions{})
	if err != nil && !errors.Is(err, events.ErrNotFound) {
		n.t.Fatal(err)
	}
	return evs
}

// row returns the projection's row whose key is key.
func (n *principalsNode) row(projection, key string, out any) {
	n.t.Helper()
	b, err := client.New(n.base, rootToken).Projection(n.t.Context(), projection, client.ProjectionQuery{Key: key, MinPosition: n.store.Head().Size})
	if err != nil {
		n.t.Fatal(err)
	}
	var o struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(b, &o); err != nil || len(o.Rows) != 1 {
		n.t.Fatalf("%s %s: %s %v", projection, key, b, err)
	}
	if err := json.Unmarshal(o.Rows[0], out); err != nil {
		n.t.Fatal(err)
	}
}

func (n *principalsNode) grant(token, id, approver, subject string) {
	n.t.Helper()
	n.must(token, "GrantApproval", aggregates.GrantApproval{ApprovalID: aggregates.ID(id), Approver: aggregates.ShortText(approver), Action: aggregates.ActionActivation,
		Subject: aggregates.ShortText(subject), Uses: 1, ExpiresAt: cmdT0.Add(time.Hour)})
}

// register registers a key for executor id under an approval the admin
// grants.
func (n *principalsNode) register(id string, seed byte) {
	n.t.Helper()
	key := ed25519.NewKeyFromSeed(bytesOf(seed, ed25519.SeedSize))
	n.keys[id] = key
	n.grant(rootToken, "reg-"+id, "root", aggregates.ExecutorStream(id))
	n.must(rootToken, "RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: aggregates.ID(id), Host: principalsHost,
		PublicKey: aggregates.Ed25519PublicKey(key.Public().(ed25519.PublicKey)), ApprovalID: aggregates.OptionalID("reg-" + id)})
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// measured requests a measurement (as the admin), has executor claim it
// (with its own token) and records result, signed with the executor's key.
func (n *principalsNode) measured(req aggregates.RequestMeasurement, executorToken, executor string, mod func(*aggregates.MeasurementResult)) wire.CommandOut {
	n.t.Helper()
	req.Host, req.Timeout, req.OutputCapBytes = principalsHost, aggregates.PositiveDuration(aggregates.D(time.Minute)), 4096
	n.must(rootToken, "RequestMeasurement", req)
	n.must(executorToken, "ClaimMeasurement", aggregates.ClaimMeasurement{MeasurementID: req.MeasurementID, ExecutorID: aggregates.ID(executor), LeaseUntil: cmdT0.Add(time.Minute)})
	r := aggregates.MeasurementResult{MeasurementID: string(req.MeasurementID), ExecutorID: executor, Host: principalsHost, Argv: req.Argv,
		StartedAt: cmdT0, EndedAt: cmdT0, Outcome: aggregates.ResultCompleted}
	if mod != nil {
		mod(&r)
	}
	return n.must(executorToken, "RecordMeasurement", n.signed(r, executor))
}

func (n *principalsNode) signed(r aggregates.MeasurementResult, executor string) aggregates.RecordMeasurement {
	n.t.Helper()
	payload, err := json.Marshal(r)
	if err != nil {
		n.t.Fatal(err)
	}
	env, err := events.SignData(context.Background(), aggregates.MeasurementPayloadType, payload, n.keys[executor])
	if err != nil {
		n.t.Fatal(err)
	}
	return aggregates.RecordMeasurement{MeasurementID: aggregates.ID(r.MeasurementID), ExecutorID: aggregates.ID(executor), Payload: payload, Envelope: *env}
}

const (
	principalsEndpoint = "http://127.0.0.1:9/v1"
	principalsTag      = "qwen3:8b"
)

// declared declares a configured provider (as the admin).
func (n *principalsNode) declared(name string) {
	n.t.Helper()
	n.must(rootToken, "DeclareProvider", aggregates.DeclareProvider{Name: aggregates.ID(name), Kind: aggregates.KindLocal, Profile: "local_ollama",
		Endpoint: principalsEndpoint, ModelTag: principalsTag, Capabilities: []string{"chat"}, TaskClasses: []string{"code"}})
	n.must(rootToken, "DeclareProviderLimits", aggregates.DeclareProviderLimits{Name: aggregates.ID(name), ContextTokens: 32768, OutputTokens: 4096})
}

// probed records a signed models probe of provider by gpu1 and returns
// the ProbeRecorded event it derived.
func (n *principalsNode) probed(provider, id string) wire.CommandEvent {
	n.t.Helper()
	out := n.measured(aggregates.RequestMeasurement{MeasurementID: aggregates.ID(id), Kind: aggregates.MeasurementProbe, Provider: aggregates.OptionalID(provider),
		Argv: []string{aggregates.ProbeModels, principalsEndpoint}}, gpu1Token, "gpu1", func(r *aggregates.MeasurementResult) {
		r.Probe = &aggregates.ProbeReading{Kind: aggregates.ProbeModels, Endpoint: principalsEndpoint, Outcome: aggregates.ProbeOK,
			Models: []string{principalsTag}, Latency: aggregates.NonNegativeDuration(aggregates.D(40 * time.Millisecond)), HTTPStatus: 200}
	})
	for _, e := range out.Events {
		if e.Type == aggregates.TypeProbeRecorded {
			return e
		}
	}
	n.t.Fatalf("the signed probe derived no ProbeRecorded: %+v", out.Events)
	return wire.CommandEvent{}
}

func liveState(n *principalsNode, provider string) (bool, string) {
	var r projections.ReadinessRow
	n.row("readiness", provider, &r)
	return r.LiveProven.Ready, r.LiveProven.State
}

// claimOn proposes a claim resting on ev about provider and tries to
// accept it (as the writer).
func (n *principalsNode) claimOn(id string, subject aggregates.ClaimSubject, tag string, ev uuid.UUID) *wire.Error {
	n.t.Helper()
	n.must(aliceToken, "ProposeClaim", aggregates.ProposeClaim{ClaimID: aggregates.ID(id), Statement: "it is live",
		Scope: aggregates.ClaimScope{Subjects: []aggregates.ClaimSubject{subject}, ModelTag: aggregates.OptionalShortText(tag)}, Evidence: []uuid.UUID{ev}})
	_, ce := n.send(aliceToken, "AcceptClaim", aggregates.AcceptClaim{ClaimID: aggregates.ID(id), Reviewer: "alice"})
	return ce
}

// TestAttack_WriterGrantsItselfAnApproval (finding 6): a writer's token
// sends GrantApproval "as owner" for the activation of an executor of its
// own, then registers that executor's key under it. Before issue #20 both
// were appended: a writer passed every approval gate. Now the grant is
// refused for the writer's role (403, role_not_allowed, the refusal
// recorded and nothing else), so the registration finds no approval.
func TestAttack_WriterGrantsItselfAnApproval(t *testing.T) {
	n := newPrincipalsNode(t)
	grant := aggregates.GrantApproval{ApprovalID: "evil", Approver: "owner", Action: aggregates.ActionActivation,
		Subject: aggregates.ShortText(aggregates.ExecutorStream("evil")), Uses: 1, ExpiresAt: cmdT0.Add(time.Hour)}
	n.refused(aliceToken, "GrantApproval", grant, http.StatusForbidden, aggregates.CodeRoleNotAllowed)
	if evs := n.events(aggregates.ApprovalStream("evil")); len(evs) != 0 {
		t.Fatalf("the writer's grant was recorded: %v", evs)
	}
	pub := ed25519.NewKeyFromSeed(bytesOf(7, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	n.refused(aliceToken, "RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: "evil", Host: principalsHost, PublicKey: aggregates.Ed25519PublicKey(pub), ApprovalID: "evil"},
		http.StatusUnprocessableEntity, aggregates.CodeApprovalMissing)
	if evs := n.events(aggregates.ExecutorStream("evil")); len(evs) != 0 {
		t.Fatalf("a key was registered under the writer's grant: %v", evs)
	}
	// Nor the other approval commands.
	n.declared("p1")
	n.refused(aliceToken, "ApproveProbeSchedule", aggregates.ApproveProbeSchedule{Provider: "p1", Host: principalsHost, Kind: aggregates.ProbeModels,
		Interval: aggregates.PositiveDuration(aggregates.D(time.Minute)), Timeout: aggregates.PositiveDuration(aggregates.D(10 * time.Second)), Approver: "owner"}, http.StatusForbidden, aggregates.CodeRoleNotAllowed)
}

// TestAttack_ApproverStatesAnotherApprover (finding 6): an approver's
// token grants "as owner": the stated approver is not the principal, so
// it is refused (approver_mismatch); so is a schedule approved in another
// name.
func TestAttack_ApproverStatesAnotherApprover(t *testing.T) {
	n := newPrincipalsNode(t)
	n.refused(carolToken, "GrantApproval", aggregates.GrantApproval{ApprovalID: "a1", Approver: "owner", Action: aggregates.ActionActivation,
		Subject: aggregates.ShortText(aggregates.ExecutorStream("gpu1")), Uses: 1, ExpiresAt: cmdT0.Add(time.Hour)}, http.StatusUnprocessableEntity, aggregates.CodeApproverMismatch)
	n.declared("p1")
	n.refused(carolToken, "ApproveProbeSchedule", aggregates.ApproveProbeSchedule{Provider: "p1", Host: principalsHost, Kind: aggregates.ProbeModels,
		Interval: aggregates.PositiveDuration(aggregates.D(time.Minute)), Timeout: aggregates.PositiveDuration(aggregates.D(10 * time.Second)), Approver: "owner"}, http.StatusUnprocessableEntity, aggregates.CodeApproverMismatch)
}

// TestPrincipals_ApproverGrants: the approver's own grant is recorded with
// the stated approver and the principal, and a writer registers a key
// under it; an approver sends no writer's command.
func TestPrincipals_ApproverGrants(t *testing.T) {
	n := newPrincipalsNode(t)
	n.grant(carolToken, "reg-gpu1", "carol", aggregates.ExecutorStream("gpu1"))
	evs := n.events(aggregates.ApprovalStream("reg-gpu1"))
	var d struct {
		Approver  string `json:"approver"`
		Principal string `json:"principal"`
	}
	if len(evs) != 1 || json.Unmarshal(evs[0].Data, &d) != nil || d.Approver != "carol" || d.Principal != "carol" || evs[0].Actor != "carol" {
		t.Fatalf("the grant: %+v %v", d, evs)
	}
	pub := ed25519.NewKeyFromSeed(bytesOf(1, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	n.must(aliceToken, "RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: "gpu1", Host: principalsHost, PublicKey: aggregates.Ed25519PublicKey(pub), ApprovalID: "reg-gpu1"})
	n.refused(carolToken, "DeclareProvider", aggregates.DeclareProvider{Name: "p2", Kind: aggregates.KindLocal, Profile: "local_ollama"},
		http.StatusForbidden, aggregates.CodeRoleNotAllowed)
}

// TestAttack_UnsignedProbeIsNotLive (finding 8): a writer records a probe
// naming the executor gpu1 as its observer. Before issue #20 it made the
// provider live_proven and a claim citing it was accepted. Now it is
// recorded as stated, the provider is not live, and the claim is refused;
// the executor's signed probe still makes it live and proves the claim.
func TestAttack_UnsignedProbeIsNotLive(t *testing.T) {
	n := newPrincipalsNode(t)
	n.declared("p1")
	out := n.must(aliceToken, "RecordProbe", aggregates.RecordProbe{Name: "p1", Kind: aggregates.ProbeModels, Outcome: aggregates.ProbeOK,
		Models: []string{principalsTag}, ObservedBy: "gpu1"})
	var d struct {
		Stated     bool   `json:"stated"`
		ObservedBy string `json:"observed_by"`
		Principal  string `json:"principal"`
	}
	// Stated, and the name it states beside the principal that sent it.
	if evs := n.events(aggregates.ProviderStream("p1")); json.Unmarshal(evs[len(evs)-1].Data, &d) != nil || !d.Stated || d.ObservedBy != "gpu1" || d.Principal != "alice" {
		t.Errorf("the writer's probe is not marked stated, beside its principal alice: %s", evs[len(evs)-1].Data)
	}
	if live, state := liveState(n, "p1"); live || state != aggregates.StateProbeUnsigned {
		t.Errorf("after a writer's probe: live_proven %v (%s)", live, state)
	}
	provider := aggregates.ClaimSubject{Kind: aggregates.SubjectProvider, ID: "p1"}
	if ce := n.claimOn("cl-stated", provider, principalsTag, out.Events[0].ID); ce == nil || ce.Code != aggregates.CodeClaimEvidenceUnverified {
		t.Errorf("a claim resting on the writer's probe: %+v", ce)
	}

	n.register("gpu1", 1)
	signed := n.probed("p1", "probe-1")
	if live, state := liveState(n, "p1"); !live || state != aggregates.ReadyLiveProven {
		t.Errorf("after the executor's signed probe: live_proven %v (%s)", live, state)
	}
	if ce := n.claimOn("cl-signed", provider, principalsTag, signed.ID); ce != nil {
		t.Errorf("a claim resting on the signed probe: %+v", ce)
	}
}

// missionWithCandidate gets mission m to a candidate on a live, activated
// provider (every step the admin's), and returns the candidate's hash.
func (n *principalsNode) missionWithCandidate(m string, checks ...string) string {
	n.t.Helper()
	n.declared("p1")
	n.grant(rootToken, "act-p1", "root", aggregates.ProviderStream("p1"))
	n.must(rootToken, "ActivateProvider", aggregates.ActivateProvider{Name: "p1", ApprovalID: "act-p1"})
	n.register("gpu1", 1)
	n.probed("p1", "probe-"+m)
	s := aggregates.SubmitMission{MissionID: aggregates.ID(m), TaskClass: "code", Mode: aggregates.ModeProposal, DeclaredProvider: "p1", AllowedFiles: []string{"bin/*.sh"}}
	for _, c := range checks {
		s.AcceptanceChecks = append(s.AcceptanceChecks, aggregates.AcceptanceCheck{ID: aggregates.ID(c), Argv: []string{"bash", "tests/" + c + ".sh"}})
	}
	n.must(rootToken, "SubmitMission", s)
	n.must(rootToken, "DecideRoute", aggregates.DecideRoute{MissionID: aggregates.ID(m)})
	n.must(rootToken, "StartAttempt", aggregates.StartAttempt{MissionID: aggregates.ID(m)})
	hash := fmt.Sprintf("%064x", 1)
	n.must(rootToken, "RecordCandidate", aggregates.RecordCandidate{MissionID: aggregates.ID(m), CandidateHash: aggregates.OptionalHex64(hash), PatchHash: aggregates.OptionalHex64(fmt.Sprintf("%064x", 2)), FilesChanged: []string{"bin/tool.sh"}})
	return hash
}

func checkOf(m, hash, c, outcome string, exit int) aggregates.RecordCheck {
	return aggregates.RecordCheck{MissionID: aggregates.ID(m), CandidateHash: aggregates.Hex64(hash), CheckID: aggregates.ID(c), ArgvHash: aggregates.Digest(events.ArgvHash([]string{"bash", "tests/" + c + ".sh"})),
		Outcome: aggregates.CheckOutcome(outcome), Runner: "supervisor", RunnerKind: aggregates.RunnerIndependent, ExitCode: exit, Duration: aggregates.NonNegativeDuration(aggregates.D(time.Second))}
}

// TestAttack_WriterIndependentCheck (finding 8): a writer records a pass
// with exit code 1 as "independent": refused as incoherent. A coherent
// pass it states as independent is recorded as stated and counts for
// nothing: the candidate stays unverified, a review accepting it is
// refused, and a claim citing it is refused.
func TestAttack_WriterIndependentCheck(t *testing.T) {
	n := newPrincipalsNode(t)
	hash := n.missionWithCandidate("m1", "c01")
	n.refused(aliceToken, "RecordCheck", checkOf("m1", hash, "c01", aggregates.CheckPass, 1), http.StatusUnprocessableEntity, aggregates.CodeCheckOutcomeIncoherent)
	out := n.must(aliceToken, "RecordCheck", checkOf("m1", hash, "c01", aggregates.CheckPass, 0))
	var row struct {
		Candidates []struct {
			Verified bool `json:"verified"`
		} `json:"candidates"`
	}
	n.row("missions", "m1", &row)
	if len(row.Candidates) != 1 || row.Candidates[0].Verified {
		t.Errorf("after a writer's stated independent pass: %+v", row)
	}
	_, ce := n.send(aliceToken, "RecordReview", aggregates.RecordReview{MissionID: "m1", CandidateHash: aggregates.Hex64(hash), Verdict: aggregates.VerdictAccepted,
		Reviewer: "alice", Coverage: map[string]string{"c01": "the pass"}})
	if ce == nil || ce.Code != aggregates.CodeChecksIncomplete {
		t.Errorf("a review accepting the candidate on a stated pass: %+v", ce)
	}
	mission := aggregates.ClaimSubject{Kind: aggregates.SubjectMission, ID: "m1"}
	if ce := n.claimOn("cl-check", mission, "", out.Events[0].ID); ce == nil || ce.Code != aggregates.CodeClaimEvidenceUnverified {
		t.Errorf("a claim resting on the stated pass: %+v", ce)
	}

	// A check runner's signed pass, relayed by the writer, counts.
	runnerKey := ed25519.NewKeyFromSeed(bytesOf(3, ed25519.SeedSize))
	n.grant(carolToken, "reg-ci", "carol", aggregates.ExecutorStream("ci"))
	n.must(rootToken, "RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: "ci", Host: "ci-host",
		PublicKey: aggregates.Ed25519PublicKey(runnerKey.Public().(ed25519.PublicKey)), ApprovalID: "reg-ci", Role: aggregates.KeyRoleCheckRunner})
	run := aggregates.CheckRun{MissionID: "m1", CandidateHash: aggregates.Hex64(hash), CheckID: "c01", ArgvHash: aggregates.Digest(events.ArgvHash([]string{"bash", "tests/c01.sh"})),
		Outcome: aggregates.CheckPass, RunnerID: "ci", Duration: aggregates.NonNegativeDuration(aggregates.D(time.Second))}
	payload, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.SignData(context.Background(), aggregates.CheckPayloadType, payload, runnerKey)
	if err != nil {
		t.Fatal(err)
	}
	signed := n.must(aliceToken, "RecordSignedCheck", aggregates.RecordSignedCheck{MissionID: "m1", RunnerID: "ci", Payload: payload, Envelope: *env})
	if len(signed.Events) != 2 || signed.Events[0].Type != aggregates.TypeCheckRunSigned || signed.Events[1].Type != aggregates.TypeCheckRecorded {
		t.Fatalf("the signed check: %+v", signed.Events)
	}
	n.row("missions", "m1", &row)
	if len(row.Candidates) != 1 || !row.Candidates[0].Verified {
		t.Errorf("after the runner's signed pass: %+v", row)
	}
	if ce := n.claimOn("cl-signed", mission, "", signed.Events[1].ID); ce != nil {
		t.Errorf("a claim resting on the signed pass: %+v", ce)
	}
}

// TestPrincipals_Tokens: the approver role is a token role; "anonymous",
// the principal of a node without tokens, is no token's name.
func TestPrincipals_Tokens(t *testing.T) {
	if _, err := api.NewTokens([]api.Token{{Name: "carol", Role: api.RoleApprover, Token: carolToken}}); err != nil {
		t.Errorf("an approver's token: %v", err)
	}
	_, err := api.NewTokens([]api.Token{{Name: aggregates.AnonymousName, Role: api.RoleWriter, Token: aliceToken}})
	if err == nil || !strings.Contains(err.Error(), "tokens[0].name") || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("a token named anonymous: %v", err)
	}
}

// TestAttack_WriterSupervisorHash (finding 8): a writer records every
// artifact of a binding as hashed "by the supervisor": the binding is
// not verified by it (artifact_not_verified); the executor's signed hash
// measurement verifies it.
func TestAttack_WriterSupervisorHash(t *testing.T) {
	n := newPrincipalsNode(t)
	arts := []aggregates.BindingArtifact{
		{Path: "/m/w.gguf", Size: 10, SHA256: aggregates.Hex64(fmt.Sprintf("%064x", 11)), Role: aggregates.RoleWeights},
		{Path: "/m/engine.so", Size: 20, SHA256: aggregates.Hex64(fmt.Sprintf("%064x", 12)), Role: aggregates.RoleEngine},
		{Path: "/m/server", Size: 30, SHA256: aggregates.Hex64(fmt.Sprintf("%064x", 13)), Role: aggregates.RoleServer},
		{Path: "/m/tokenizer.json", Size: 40, SHA256: aggregates.Hex64(fmt.Sprintf("%064x", 14)), Role: aggregates.RoleTokenizer},
		{Path: "/m/template.jinja", Size: 50, SHA256: aggregates.Hex64(fmt.Sprintf("%064x", 15)), Role: aggregates.RoleTemplate},
	}
	cfg, tmpl := fmt.Sprintf("%064x", 21), fmt.Sprintf("%064x", 22)
	propose := aggregates.ProposeBinding{BindingID: "b1", Provider: "p1", ModelTag: principalsTag, Family: "qwen",
		ConfigSHA256: aggregates.Hex64(cfg), SourceCommit: "abc", TemplateSHA256: aggregates.Hex64(tmpl), ContextTokens: 32768, Artifacts: arts}
	propose.Identity = aggregates.Digest(events.BindingIdentity(propose.BindingContent()))
	n.must(aliceToken, "ProposeBinding", propose)
	for _, a := range arts {
		n.must(aliceToken, "RecordArtifactHash", aggregates.RecordArtifactHash{BindingID: "b1", Path: a.Path, Size: a.Size, SHA256: a.SHA256,
			Role: a.Role, VerifiedBy: "supervisor", VerifierRole: aggregates.VerifierSupervisor})
	}
	_, ce := n.send(aliceToken, "VerifyBinding", aggregates.VerifyBinding{BindingID: "b1", VerifiedBy: "supervisor"})
	if ce == nil || ce.Code != aggregates.CodeArtifactNotVerified {
		t.Fatalf("a binding verified on the writer's hashes: %+v", ce)
	}

	n.register("gpu1", 1)
	var argv []string
	for _, a := range arts {
		argv = append(argv, string(a.Role)+"="+string(a.Path))
	}
	n.measured(aggregates.RequestMeasurement{MeasurementID: "hash-1", Kind: aggregates.MeasurementHash, BindingID: "b1", Argv: argv}, gpu1Token, "gpu1",
		func(r *aggregates.MeasurementResult) {
			for _, a := range arts {
				r.Artifacts = append(r.Artifacts, aggregates.ArtifactReading{Path: string(a.Path), Role: string(a.Role), Size: int64(a.Size), MtimeNS: 1, SHA256: string(a.SHA256)})
			}
		})
	n.must(aliceToken, "VerifyBinding", aggregates.VerifyBinding{BindingID: "b1", VerifiedBy: "supervisor"})
}

// TestAttack_ExecutorClaimsForAnother (finding 9): the executor gpu1's
// token claims a request in gpu2's name. Before issue #20 the claim was
// appended. Now it is refused (executor_principal_mismatch) and gpu2's own
// token claims it.
func TestAttack_ExecutorClaimsForAnother(t *testing.T) {
	n := newPrincipalsNode(t)
	n.register("gpu1", 1)
	n.register("gpu2", 2)
	n.must(rootToken, "RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: "run-1", Host: principalsHost, Kind: aggregates.MeasurementRun,
		Argv: []string{"nvidia-smi"}, Timeout: aggregates.PositiveDuration(aggregates.D(time.Minute)), OutputCapBytes: 4096})
	claim := aggregates.ClaimMeasurement{MeasurementID: "run-1", ExecutorID: "gpu2", LeaseUntil: cmdT0.Add(time.Minute)}
	n.refused(gpu1Token, "ClaimMeasurement", claim, http.StatusUnprocessableEntity, aggregates.CodeExecutorPrincipalMismatch)
	out := n.must(gpu2Token, "ClaimMeasurement", claim)
	if len(out.Events) != 1 || out.Events[0].Type != aggregates.TypeMeasurementClaimed {
		t.Fatalf("gpu2's own claim: %+v", out.Events)
	}
	n.refused(gpu1Token, "RenewMeasurementLease", aggregates.RenewMeasurementLease{MeasurementID: "run-1", ExecutorID: "gpu2", LeaseUntil: cmdT0.Add(90 * time.Second)},
		http.StatusUnprocessableEntity, aggregates.CodeExecutorPrincipalMismatch)
}
