package aggregates

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/greffe/greffe/events"
)

// Builders of the histories the tests share, drawn from the seeds.

const (
	glm    = "glm-local"
	glmTag = "glm-4.7-flash:q4_K_M"
)

func declare(name, kind, profile, tag string) *DeclareProvider {
	return &DeclareProvider{Name: ID(name), Kind: ProviderKind(kind), Profile: ShortText(profile), Endpoint: "http://127.0.0.1:11434/v1",
		ModelTag: OptionalShortText(tag), Capabilities: []string{"chat", "code"}, TaskClasses: []string{"code"}}
}

func limits(name string) *DeclareProviderLimits {
	return &DeclareProviderLimits{Name: ID(name), ContextTokens: 32768, OutputTokens: 8192}
}

func grant(id, action, subject string, uses int) *GrantApproval {
	return &GrantApproval{ApprovalID: ID(id), Approver: "owner", Action: ApprovalAction(action), Subject: ShortText(subject), Uses: ApprovalUses(uses), ExpiresAt: t0.Add(30 * 24 * time.Hour)}
}

func activate(name, binding string) []step {
	return []step{
		grant("act-"+name, ActionActivation, ProviderStream(name), 1),
		&ActivateProvider{Name: ID(name), ApprovalID: OptionalID("act-" + name), BindingID: OptionalID(binding)},
	}
}

// probe is a probe as a writer states it (RecordProbe): recorded, never
// proof. signedProbe is the executor's.
func probe(name, kind, outcome string, models ...string) *RecordProbe {
	return &RecordProbe{Name: ID(name), Kind: ProbeKind(kind), Outcome: ProbeOutcome(outcome), Models: models, Latency: NonNegativeDuration(D(40 * time.Millisecond)), ObservedBy: "supervisor"}
}

// The principals of the role tests (a node without tokens sends as
// Anonymous, the ledger's default).
var (
	alice         = Principal{Name: "alice", Role: RoleWriter}
	carol         = Principal{Name: "carol", Role: RoleApprover}
	gpu1Principal = Principal{Name: gpu1, Role: RoleExecutor}
	gpu2Principal = Principal{Name: "gpu2", Role: RoleExecutor}
)

// The executor whose signed probes and hashes the tests record, and the
// check runner whose signed checks they record.
const (
	prober     = "prober"
	proberSeed = 7
	runner     = "ci-runner"
	runnerSeed = 8
)

// ensureKey registers executorKey(seed) for id with role (under its own
// approval) unless id has an unrevoked key of that role already.
func ensureKey(id string, seed byte, role string) ledgerStep {
	return func(l *ledger) []step {
		if len(l.state(ExecutorStream(id)).(Executor).ActiveKeys(role)) > 0 {
			return nil
		}
		approval := "reg-" + id
		return []step{
			grant(approval, ActionActivation, ExecutorStream(id), 1),
			&RegisterExecutorKey{ExecutorID: ID(id), Host: host, PublicKey: pubOf(executorKey(seed)), ApprovalID: OptionalID(approval), Role: KeyRole(role)},
		}
	}
}

// signedProbe records a probe of provider name as the executor prober
// runs it: a probe measurement of the provider's endpoint (and tag, for
// smoke), claimed and recorded with the prober's signature; its result
// derives the provider's ProbeRecorded.
func signedProbe(name, kind, outcome string, models ...string) ledgerStep {
	return func(l *ledger) []step {
		p := l.state(ProviderStream(name)).(Provider)
		argv := []string{kind, p.Endpoint}
		if kind == ProbeSmoke {
			argv = append(argv, p.ModelTag)
		}
		id := fmt.Sprintf("probe-%d", len(l.log))
		r := MeasurementResult{MeasurementID: id, ExecutorID: prober, Host: host, Argv: argv, StartedAt: l.at, EndedAt: l.at, Outcome: ResultCompleted,
			Probe: &ProbeReading{Kind: LiveProbeKind(kind), Endpoint: p.Endpoint, Outcome: ReadingOutcome(outcome), Models: models, Latency: NonNegativeDuration(D(40 * time.Millisecond))}}
		if outcome == ProbeRefused { // the prober's host policy refused it (issue #20)
			const refusal = "probe_host_not_allowed: the endpoint is not one of the host's probe_hosts; nothing was dialled (host policy: probe_hosts)"
			r.Outcome, r.ExitCode, r.Error, r.Probe.Error, r.Probe.Latency = ResultRefusedByHost, -1, refusal, refusal, NonNegativeDuration(Duration{})
		}
		return []step{
			ensureKey(prober, proberSeed, KeyRoleExecutor),
			&RequestMeasurement{MeasurementID: ID(id), Host: host, Argv: argv, Kind: MeasurementProbe, Provider: OptionalID(name), Timeout: PositiveDuration(D(15 * time.Second)), OutputCapBytes: 16 << 10},
			&ClaimMeasurement{MeasurementID: ID(id), ExecutorID: prober, LeaseUntil: l.at.Add(time.Minute)},
			signed(r, proberSeed),
		}
	}
}

// signedHashes records the hashes of arts (binding's) as the executor
// prober reads them: one hash measurement, signed, deriving one
// ArtifactHashed per file.
func signedHashes(binding string, arts []BindingArtifact) ledgerStep {
	return func(l *ledger) []step {
		id := fmt.Sprintf("hash-%d", len(l.log))
		var argv []string
		r := MeasurementResult{MeasurementID: id, ExecutorID: prober, Host: host, StartedAt: l.at, EndedAt: l.at, Outcome: ResultCompleted}
		for _, a := range arts {
			argv = append(argv, string(a.Role)+"="+string(a.Path))
			r.Artifacts = append(r.Artifacts, ArtifactReading{Path: string(a.Path), Role: string(a.Role), Size: int64(a.Size), MtimeNS: hashMtime, SHA256: string(a.SHA256)})
		}
		r.Argv = argv
		return []step{
			ensureKey(prober, proberSeed, KeyRoleExecutor),
			&RequestMeasurement{MeasurementID: ID(id), Host: host, Argv: argv, Kind: MeasurementHash, BindingID: OptionalID(binding), Timeout: PositiveDuration(D(15 * time.Second)), OutputCapBytes: 16 << 10},
			&ClaimMeasurement{MeasurementID: ID(id), ExecutorID: prober, LeaseUntil: l.at.Add(time.Minute)},
			signed(r, proberSeed),
		}
	}
}

// hashMtime is the mtime of every artifact the tests hash.
const hashMtime = 1_757_000_000_000_000_000

// readyLocal is a local provider that is activation-ready at the time of
// its last step.
func readyLocal(name, tag string) []step {
	return []step{
		declare(name, KindLocal, "local_ollama", tag),
		limits(name),
		activate(name, ""),
		signedProbe(name, ProbeModels, ProbeOK, tag),
	}
}

// readyConnected is a connected provider that is activation-ready.
func readyConnected(name, tag string) []step {
	d := declare(name, KindConnected, "remote_api", tag)
	d.Endpoint = "https://api.example.test/v1"
	return []step{d, limits(name), activate(name, ""), signedProbe(name, ProbeModels, ProbeOK, tag)}
}

// artifacts is a complete binding's artifact list for a llama.cpp server.
func artifacts() []BindingArtifact {
	return []BindingArtifact{
		{Path: "/models/qwen/weights.gguf", Size: 16 << 30, SHA256: Hex64(hexOf("weights")), Role: RoleWeights},
		{Path: "/opt/llama/llama-server", Size: 9 << 20, SHA256: Hex64(hexOf("server")), Role: RoleServer},
		{Path: "/opt/llama/libggml-cuda.so", Size: 80 << 20, SHA256: Hex64(hexOf("engine")), Role: RoleEngine},
		{Path: "/models/qwen/tokenizer.json", Size: 7 << 20, SHA256: Hex64(hexOf("tokenizer")), Role: RoleTokenizer},
		{Path: "/models/qwen/template.jinja", Size: 4 << 10, SHA256: Hex64(hexOf("template")), Role: RoleTemplate},
	}
}

func propose(id, provider, tag string, arts []BindingArtifact) *ProposeBinding {
	meta := map[string]string{"architecture": "qwen35", "quantization": "Q4_K_M"}
	p := &ProposeBinding{BindingID: ID(id), Provider: ID(provider), ModelTag: ShortText(tag), Family: "coder",
		ConfigSHA256: Hex64(hexOf("config")), SourceCommit: "7695859aa13afb248bdb4d36f9b2e95707db079d", TemplateSHA256: Hex64(hexOf("template")),
		ContextTokens: 65536, ModelMetadata: meta, Artifacts: arts}
	p.Identity = Digest(events.BindingIdentity(p.BindingContent()))
	return p
}

// hashArtifact is a hash as a writer states it (RecordArtifactHash):
// recorded, it verifies nothing. signedHashes is the executor's.
func hashArtifact(binding string, a BindingArtifact, verifier string) *RecordArtifactHash {
	return &RecordArtifactHash{BindingID: ID(binding), Path: a.Path, Size: a.Size, MtimeNS: hashMtime,
		SHA256: a.SHA256, Role: a.Role, VerifiedBy: "supervisor-1", VerifierRole: VerifierRole(verifier)}
}

// verifiedBinding proposes, hashes (the executor's signed hashes) and
// verifies a binding of arts.
func verifiedBinding(id, provider, tag string, arts []BindingArtifact) []step {
	return []step{propose(id, provider, tag, arts), signedHashes(id, arts), &VerifyBinding{BindingID: ID(id), VerifiedBy: "supervisor-1"}}
}

// readyBound is a llama.cpp provider activation-ready with a verified
// binding.
func readyBound(name, tag, binding string) []step {
	return []step{
		declare(name, KindLocal, "local_llama_cpp", tag),
		limits(name),
		verifiedBinding(binding, name, tag, artifacts()),
		activate(name, binding),
		signedProbe(name, ProbeModels, ProbeOK, tag),
	}
}

// checksFor returns n acceptance checks c01..cNN.
func checksFor(n int) []AcceptanceCheck {
	out := make([]AcceptanceCheck, n)
	for i, id := range checkIDs(n) {
		out[i] = AcceptanceCheck{ID: ID(id), Argv: []string{"bash", "tests/run_case.sh", id}}
	}
	return out
}

func submit(id string, n int, declared string) *SubmitMission {
	return &SubmitMission{MissionID: ID(id), TaskClass: "code", Mode: ModeProposal, DeclaredProvider: OptionalID(declared),
		AllowedFiles: []string{"bin/*.sh"}, AcceptanceChecks: checksFor(n)}
}

// started is a mission of n checks routed to a ready local provider with
// its first attempt running, and the check runner registered.
func started(id string, n int) []step {
	return []step{
		ensureKey(runner, runnerSeed, KeyRoleCheckRunner),
		readyLocal(glm, glmTag),
		submit(id, n, glm),
		&DecideRoute{MissionID: ID(id)},
		&StartAttempt{MissionID: ID(id)},
	}
}

func candidate(id, name string) *RecordCandidate {
	return &RecordCandidate{MissionID: ID(id), CandidateHash: OptionalHex64(hexOf(name)), PatchHash: OptionalHex64(hexOf("patch-" + name)), FilesChanged: []string{"bin/tool.sh"}}
}

// check is an independent run of an acceptance check by the check runner
// (registered by started), signed when it is decided. statedCheck is the
// same run as a writer states it.
func check(id, cand, checkID, outcome string) *runnerCheck {
	return &runnerCheck{CheckRun: CheckRun{MissionID: ID(id), CandidateHash: Hex64(hexOf(cand)), CheckID: ID(checkID),
		ArgvHash: Digest(events.ArgvHash([]string{"bash", "tests/run_case.sh", checkID})), Outcome: CheckOutcome(outcome),
		RunnerID: runner, Duration: NonNegativeDuration(D(2 * time.Second)), OutputBytes: 512}}
}

func statedCheck(id, cand, checkID, outcome string) *RecordCheck {
	return &RecordCheck{MissionID: ID(id), CandidateHash: Hex64(hexOf(cand)), CheckID: ID(checkID),
		ArgvHash: Digest(events.ArgvHash([]string{"bash", "tests/run_case.sh", checkID})), Outcome: CheckOutcome(outcome),
		Runner: "elora-supervisor", RunnerKind: RunnerIndependent, Duration: NonNegativeDuration(D(2 * time.Second)), OutputBytes: 512}
}

// runnerCheck is a check runner's run, signed with executorKey(runnerSeed)
// when it is decided, so a test may change a field of the run first. It
// is the RecordSignedCheck that carries it.
// Seed, when set, signs with executorKey(Seed) instead.
type runnerCheck struct {
	CheckRun `json:"-"` // the payload, not the command's fields
	Seed     byte       `json:"-"`
}

func (c *runnerCheck) signed() *RecordSignedCheck {
	payload, err := json.Marshal(c.CheckRun)
	if err != nil {
		panic(err)
	}
	seed := c.Seed
	if seed == 0 {
		seed = runnerSeed
	}
	env, err := events.SignData(context.Background(), CheckPayloadType, payload, executorKey(seed))
	if err != nil {
		panic(err)
	}
	return &RecordSignedCheck{MissionID: c.MissionID, RunnerID: c.RunnerID, Payload: payload, Envelope: *env}
}

func (c *runnerCheck) CommandName() string                  { return "RecordSignedCheck" }
func (c *runnerCheck) Validate() error                      { return Validate(c.signed()) }
func (c *runnerCheck) Streams(s States) []string            { return c.signed().Streams(s) }
func (c *runnerCheck) Decide(in Inputs) ([]NewEvent, error) { return c.signed().Decide(in) }

// checks records n independent runs on cand, the first pass of them
// passing and the rest failing.
func checks(id, cand string, n, pass int) []step {
	var s []step
	for i, c := range checkIDs(n) {
		o := CheckPass
		if i >= pass {
			o = CheckFail
		}
		s = append(s, check(id, cand, c, o))
	}
	return s
}

func fullCoverage(n int) map[string]string {
	cov := map[string]string{}
	for _, c := range checkIDs(n) {
		cov[c] = "independent pass of " + c
	}
	return cov
}

func accept(id, cand string, n int) *RecordReview {
	return &RecordReview{MissionID: ID(id), CandidateHash: Hex64(hexOf(cand)), Verdict: VerdictAccepted, Reviewer: "reviewer", Coverage: fullCoverage(n)}
}

func reserve(id, res string) *ReserveInference {
	return &ReserveInference{MissionID: ID(id), ReservationID: ID(res)}
}

func receipt(finish string) Receipt {
	return Receipt{Provider: glm, ModelTag: glmTag, RequestSHA256: Hex64(hexOf("request")), ResponseSHA256: OptionalHex64(hexOf("response")),
		TokensIn: 1200, TokensOut: 800, Duration: NonNegativeDuration(D(12 * time.Second)), FinishReason: FinishReason(finish)}
}

func settle(id, res, outcome, finish string) *SettleInference {
	r := receipt(finish)
	if outcome != OutcomeCompleted {
		r.ResponseSHA256, r.TokensOut = "", 0
	}
	return &SettleInference{MissionID: ID(id), ReservationID: ID(res), Outcome: InferenceOutcome(outcome), Receipt: r}
}

// Executors and signed measurements.

const (
	gpu1 = "gpu1"
	host = "spark-1"
)

// executorKey returns a deterministic ed25519 key for seed.
func executorKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func pubOf(k ed25519.PrivateKey) []byte { return []byte(k.Public().(ed25519.PublicKey)) }

// registered registers executorKey(seed) for executor id on host.
func registered(id string, seed byte) []step {
	return []step{
		grant("reg-"+id+"-"+string('a'+rune(seed)), ActionActivation, ExecutorStream(id), 1),
		&RegisterExecutorKey{ExecutorID: ID(id), Host: host, PublicKey: pubOf(executorKey(seed)), ApprovalID: OptionalID("reg-" + id + "-" + string('a'+rune(seed)))},
	}
}

var probeArgv = []string{"nvidia-smi", "--query-gpu=name,driver_version,memory.total,memory.used", "--format=csv"}

func u64(v uint64) *uint64 { return &v }

// resources is a measurement result that passes every admission screen.
func resources(id string) MeasurementResult {
	return MeasurementResult{MeasurementID: id, ExecutorID: gpu1, Host: host, Argv: probeArgv,
		StartedAt: t0, EndedAt: t0, ExitCode: 0, Outcome: ResultExited,
		StdoutSHA256: hexOf("stdout"), StdoutExcerpt: "NVIDIA GB10, 580.95, 122880 MiB, 4096 MiB",
		GPU:                    &GPUReading{Name: "NVIDIA GB10", Driver: "580.95", MemoryTotalBytes: 120 << 30, MemoryUsedBytes: 4 << 30},
		RAMAvailableBytes:      u64(8 << 30),
		ResidentModelsObserved: true}
}

// requestProbe requests a resource snapshot: a run of probeArgv (kind
// probe is an endpoint probe of a provider, see ParseProbeArgv).
func requestProbe(id string) *RequestMeasurement {
	return &RequestMeasurement{MeasurementID: ID(id), Host: host, Argv: probeArgv, Kind: MeasurementRun,
		Timeout: PositiveDuration(D(15 * time.Second)), OutputCapBytes: 16 << 10, Purpose: "admission screens"}
}

func claim(id, exec string) *ClaimMeasurement {
	return &ClaimMeasurement{MeasurementID: ID(id), ExecutorID: ID(exec), LeaseUntil: t0.Add(time.Minute)}
}

// signed returns a RecordMeasurement of r signed with executorKey(seed).
func signed(r MeasurementResult, seed byte) *RecordMeasurement {
	payload, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	env, err := events.SignData(context.Background(), MeasurementPayloadType, payload, executorKey(seed))
	if err != nil {
		panic(err)
	}
	return &RecordMeasurement{MeasurementID: ID(r.MeasurementID), ExecutorID: ID(r.ExecutorID), Payload: payload, Envelope: *env}
}

// measured requests, claims and records r (executor gpu1, key seed 1,
// which must be registered).
func measured(r MeasurementResult) []step {
	req := requestProbe(r.MeasurementID)
	req.Argv = r.Argv
	return []step{req, claim(r.MeasurementID, gpu1), signed(r, 1)}
}

func keyIDOf(seed byte) string { return events.KeyID(pubOf(executorKey(seed))) }

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
