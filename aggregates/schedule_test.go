package aggregates

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// approveSchedule approves a models probe of name every interval on host.
func approveSchedule(name string, interval time.Duration) *ApproveProbeSchedule {
	return &ApproveProbeSchedule{Provider: ID(name), Host: host, Kind: ProbeModels, Interval: PositiveDuration(D(interval)), Timeout: PositiveDuration(D(5 * time.Second)), Approver: "owner"}
}

func TestProbeSchedule_Decide(t *testing.T) {
	const tag = "qwen3-coder:30b"
	provider := []step{declare("ollama", KindLocal, "local_ollama", tag), limits("ollama")}
	scheduled := []step{provider, registered(gpu1, 1), approveSchedule("ollama", time.Minute)}
	ask := func(id string) *RequestScheduledProbe {
		return &RequestScheduledProbe{Provider: "ollama", ExecutorID: gpu1, MeasurementID: ID(id)}
	}
	approved := ProbeScheduleApproved{Provider: "ollama", Host: host, Kind: ProbeModels, Interval: D(time.Minute), Timeout: D(5 * time.Second),
		Endpoint: "http://127.0.0.1:11434/v1", ModelTag: tag, Approver: "owner", Principal: AnonymousName, At: t0}
	firstProbe := []NewEvent{
		{Stream: "provider-ollama", Type: TypeScheduledProbeRequested, Data: ScheduledProbeRequested{Provider: "ollama", MeasurementID: "s1",
			ExecutorID: gpu1, Host: host, Seq: 1, At: t0}},
		{Stream: "measurement-s1", Type: TypeMeasurementRequested, Data: MeasurementRequested{MeasurementID: "s1", Host: host,
			Argv: []string{ProbeModels, "http://127.0.0.1:11434/v1"}, Kind: MeasurementProbe, Timeout: D(5 * time.Second),
			OutputCapBytes: scheduleOutputCap, Purpose: "probe schedule of ollama, slot 1", Provider: "ollama", At: t0}},
	}
	otherHost := []step{grant("reg-gpu2", ActionActivation, ExecutorStream("gpu2"), 1),
		&RegisterExecutorKey{ExecutorID: "gpu2", Host: "spark-2", PublicKey: pubOf(executorKey(2)), ApprovalID: "reg-gpu2"}}
	runGWT(t, []gwt{
		{name: "approve", given: provider, when: approveSchedule("ollama", time.Minute),
			want: []NewEvent{{Stream: "provider-ollama", Type: TypeProbeScheduleApproved, Data: approved}}},
		{name: "approving the same schedule again appends nothing", given: scheduled, when: approveSchedule("ollama", time.Minute)},
		{name: "an approver approves in another's name", given: []step{provider, as(carol)}, when: approveSchedule("ollama", time.Minute), code: CodeApproverMismatch},
		{name: "an approver approves in its own name", given: []step{provider, as(carol)},
			when: func() *ApproveProbeSchedule {
				c := approveSchedule("ollama", time.Minute)
				c.Approver = "carol"
				return c
			}(),
			wantFn: func(*ledger) []NewEvent {
				d := approved
				d.Approver, d.Principal = "carol", "carol"
				return []NewEvent{{Stream: "provider-ollama", Type: TypeProbeScheduleApproved, Data: d}}
			}},
		{name: "a writer approves a schedule", given: []step{provider, as(alice)},
			when: func() *ApproveProbeSchedule {
				c := approveSchedule("ollama", time.Minute)
				c.Approver = "alice"
				return c
			}(), code: CodeRoleNotAllowed},
		{name: "a writer ends a schedule", given: []step{scheduled, as(alice)}, when: &EndProbeSchedule{Provider: "ollama", Reason: "x"}, code: CodeRoleNotAllowed},
		{name: "an executor asks in another executor's name", given: []step{scheduled, as(gpu2Principal)}, when: ask("s1"), code: CodeExecutorPrincipalMismatch},
		{name: "an executor asks in its own name", given: []step{scheduled, as(gpu1Principal)}, when: ask("s1"), want: firstProbe},
		{name: "a schedule of an unknown provider", when: approveSchedule("ghost", time.Minute), code: CodeProviderUnknown},
		{name: "an interval under the policy's minimum", given: provider, when: func() *ApproveProbeSchedule {
			c := approveSchedule("ollama", 5*time.Second)
			c.Timeout = PositiveDuration(D(time.Second))
			return c
		}(), code: CodeScheduleIntervalOutOfBounds},
		{name: "an interval over the policy's maximum", given: provider, when: approveSchedule("ollama", time.Hour), code: CodeScheduleIntervalOutOfBounds},
		{name: "the maximum is at most the freshness window",
			given: []step{provider, setPolicy(func(p *Policy) { p.ProbeFreshness = D(2 * time.Minute) })},
			when:  approveSchedule("ollama", 3*time.Minute), code: CodeScheduleIntervalOutOfBounds},
		{name: "a probe timeout over the measurement bounds",
			given: []step{provider, setPolicy(func(p *Policy) { p.Measurement.MaxTimeout = D(time.Second) })},
			when:  approveSchedule("ollama", time.Minute), code: CodeMeasurementBoundsExceeded},
		{name: "a smoke schedule of a provider without a tag",
			given: []step{declare("notag", KindLocal, "local_ollama", "")},
			when:  &ApproveProbeSchedule{Provider: "notag", Host: host, Kind: ProbeSmoke, Interval: PositiveDuration(D(time.Minute)), Timeout: PositiveDuration(D(time.Second)), Approver: "owner"},
			code:  CodeNotConfigured},
		{name: "the first probe is due at approval", given: scheduled, when: ask("s1"), want: firstProbe},
		{name: "the next probe is not due before one interval", given: []step{scheduled, ask("s1"), advance(59 * time.Second)}, when: ask("s2"), code: CodeProbeNotDue},
		{name: "the next probe is due one interval later", given: []step{scheduled, ask("s1"), advance(time.Minute)}, when: ask("s2"),
			wantFn: func(l *ledger) []NewEvent {
				out, _ := l.decide(ask("s2"))
				if d := out[0].Data.(ScheduledProbeRequested); d.Seq != 2 {
					t.Errorf("seq %d, want 2", d.Seq)
				}
				return out
			}},
		{name: "a probe of a provider without a schedule", given: []step{provider, registered(gpu1, 1)}, when: ask("s1"), code: CodeScheduleUnknown},
		{name: "a probe of an ended schedule", given: []step{scheduled, &EndProbeSchedule{Provider: "ollama", Reason: "retired"}}, when: ask("s1"), code: CodeScheduleUnknown},
		{name: "ending a schedule that was never approved", given: provider, when: &EndProbeSchedule{Provider: "ollama", Reason: "x"}, code: CodeScheduleUnknown},
		{name: "ending an ended schedule appends nothing", given: []step{scheduled, &EndProbeSchedule{Provider: "ollama", Reason: "retired"}},
			when: &EndProbeSchedule{Provider: "ollama", Reason: "again"}},
		{name: "an executor of another host", given: []step{scheduled, otherHost},
			when: &RequestScheduledProbe{Provider: "ollama", ExecutorID: "gpu2", MeasurementID: "s1"}, code: CodeScheduleHostMismatch},
		{name: "an executor without a key", given: []step{provider, approveSchedule("ollama", time.Minute)}, when: ask("s1"), code: CodeExecutorKeyUnknown},
		{name: "a measurement id already used", given: []step{scheduled, requestOf("s1", MeasurementRun, probeArgv, "", "")}, when: ask("s1"), code: CodeMeasurementExists},
		{name: "a provider redeclared since the approval",
			given: []step{scheduled, func() *DeclareProvider {
				d := declare("ollama", KindLocal, "local_ollama", tag)
				d.Endpoint = "http://127.0.0.1:11999/v1"
				return d
			}()},
			when: ask("s1"), code: CodeProbeTargetMismatch},
	})
}

// TestProbeSchedule_Missed: a schedule whose probes stop being recorded
// makes a fresh provider stale with the reason "probe schedule missed
// since T"; the schedule's own recorded probe keeps it, a probe a writer
// recorded does not, and an ended schedule misses nothing.
func TestProbeSchedule_Missed(t *testing.T) {
	const tag = "qwen3-coder:30b"
	live := func(l *ledger) Readiness {
		p := l.state(ProviderStream("ollama")).(Provider)
		return ProviderReadiness(p, Binding{}, l.at, l.policy)
	}
	// scheduledProbe runs slot id of the schedule: request, claim, and a
	// signed result observed now.
	scheduledProbe := func(l *ledger, id string) {
		l.given(&RequestScheduledProbe{Provider: "ollama", ExecutorID: gpu1, MeasurementID: ID(id)},
			&ClaimMeasurement{MeasurementID: ID(id), ExecutorID: gpu1, LeaseUntil: l.at.Add(5 * time.Second)})
		r := probeResult(id, []string{ProbeModels, "http://127.0.0.1:11434/v1"},
			ProbeReading{Kind: ProbeModels, Endpoint: "http://127.0.0.1:11434/v1", Outcome: ProbeOK, Models: []string{tag}, Latency: NonNegativeDuration(D(time.Millisecond))})
		r.StartedAt, r.EndedAt = l.at, l.at // a run starts no earlier than its request
		l.given(signed(r, 1))
	}
	l := newLedger(t)
	l.given(readyLocal("ollama", tag), registered(gpu1, 1), approveSchedule("ollama", time.Minute))
	scheduledProbe(l, "s1")
	if r := live(l); !r.LiveProven.Ready || !r.ActivationReady.Ready {
		t.Fatalf("after the first scheduled probe: %+v", r.LiveProven)
	}
	ranAt := l.at
	// Within interval + interval + timeout of the last probe: not missed.
	l.given(advance(2*time.Minute + 4*time.Second))
	if r := live(l); !r.LiveProven.Ready {
		t.Fatalf("before the schedule is missed: %+v", r.LiveProven)
	}
	l.given(advance(time.Second))
	r := live(l)
	want := "probe schedule missed since " + ranAt.Add(time.Minute).Format(time.RFC3339)
	if r.LiveProven.Ready || r.LiveProven.State != StateStale || !strings.HasPrefix(r.LiveProven.Reason, want) {
		t.Fatalf("missed schedule: live %+v, want stale %q", r.LiveProven, want)
	}
	if r.ActivationReady.Ready || r.ActivationReady.State != StateStale || r.EligibleForAttempt.Ready {
		t.Errorf("a missed schedule leaves activation %+v, eligible %+v", r.ActivationReady, r.EligibleForAttempt)
	}
	if diff := cmp.Diff(l.last(TypeProbeRecorded), *r.LiveProven.Proof); diff != "" {
		t.Errorf("proof (-want +got):\n%s", diff)
	}
	// A probe another executor signed is fresh, but it is not the
	// schedule's; a probe a writer states proves nothing at all.
	l.given(signedProbe("ollama", ProbeModels, ProbeOK, tag), probe("ollama", ProbeModels, ProbeOK, tag))
	if r := live(l); r.LiveProven.State != StateStale {
		t.Errorf("a probe outside the schedule hid the missed schedule: %+v", r.LiveProven)
	}
	// The schedule's next probe is recorded: fresh again.
	scheduledProbe(l, "s2")
	if r := live(l); !r.LiveProven.Ready {
		t.Errorf("after the schedule ran again: %+v", r.LiveProven)
	}
	// An ended schedule misses nothing (the freshness window still rules).
	l.given(&EndProbeSchedule{Provider: "ollama", Reason: "retired"}, advance(3*time.Minute))
	if r := live(l); !r.LiveProven.Ready {
		t.Errorf("an ended schedule made the provider %+v", r.LiveProven)
	}
	// A failure keeps its state; the reason says the schedule was missed.
	l.given(approveSchedule("ollama", 2*time.Minute), signedProbe("ollama", ProbeModels, ProbeUnreachable, tag), advance(5*time.Minute))
	if r := live(l); r.LiveProven.State != StateProbeUnreach || !strings.Contains(r.LiveProven.Reason, "probe schedule missed since") {
		t.Errorf("an unreachable provider with a missed schedule: %+v", r.LiveProven)
	}
}

func TestProbeSchedule_Validate(t *testing.T) {
	ok := *approveSchedule("p", time.Minute)
	for _, tc := range []struct {
		name  string
		edit  func(*ApproveProbeSchedule)
		field string
	}{
		{"kind", func(c *ApproveProbeSchedule) { c.Kind = "doctor" }, "data.kind"},
		{"interval", func(c *ApproveProbeSchedule) { c.Interval = PositiveDuration(D(0)) }, "data.interval"},
		{"timeout not shorter than the interval", func(c *ApproveProbeSchedule) { c.Timeout = c.Interval }, "data.timeout"},
		{"approver", func(c *ApproveProbeSchedule) { c.Approver = "" }, "data.approver"},
		{"host", func(c *ApproveProbeSchedule) { c.Host = "" }, "data.host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := Validate(&c)
			ie, isInvalid := err.(*InvalidCommandError)
			if !isInvalid || ie.Path != tc.field {
				t.Fatalf("Validate = %v, want an invalid %s", err, tc.field)
			}
		})
	}
	if err := Validate(&ok); err != nil {
		t.Errorf("a valid schedule: %v", err)
	}
}
