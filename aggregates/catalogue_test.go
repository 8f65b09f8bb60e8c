package aggregates

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCatalogue_Names(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Catalogue() {
		cmd := s.New()
		if cmd.CommandName() != s.Name {
			t.Errorf("%s: CommandName %q", s.Name, cmd.CommandName())
		}
		if seen[s.Name] {
			t.Errorf("%s listed twice", s.Name)
		}
		seen[s.Name] = true
		if reflect.TypeOf(cmd).Elem().Name() != s.Name {
			t.Errorf("%s is implemented by %T", s.Name, cmd)
		}
		// Every command reads at least its own stream, named with an
		// aggregate prefix, before anything is loaded.
		streams := cmd.Streams(States{})
		if len(streams) == 0 {
			t.Errorf("%s reads no stream", s.Name)
		}
		for _, st := range streams {
			if _, err := Initial(st); err != nil {
				t.Errorf("%s: %v", s.Name, err)
			}
		}
		// Empty data never decodes into a valid command: every command
		// names what it acts on.
		if _, err := DecodeCommand(s.Name, nil); err == nil {
			t.Errorf("%s: empty data decoded", s.Name)
		}
	}
}

func TestDecodeCommand(t *testing.T) {
	cases := []struct {
		name, command, data string
		path                string // "" for success
	}{
		{name: "valid", command: "SubmitMission", data: `{"mission_id":"m1","task_class":"code","mode":"proposal","allowed_files":["bin/*.sh"],
			"acceptance_checks":[{"id":"c01","argv":["bash","t.sh"]}],"budgets":{"corrections":0,"command_timeout":"10s"}}`},
		{name: "unknown field deep in an array", command: "SubmitMission", data: `{"mission_id":"m1","task_class":"code","mode":"proposal",
			"acceptance_checks":[{"id":"c01","argv":["bash"]},{"id":"c02","argvv":["bash"]}]}`, path: "data.acceptance_checks[1].argvv"},
		{name: "wrong type with its index", command: "SubmitMission", data: `{"mission_id":"m1","task_class":"code","mode":"proposal",
			"acceptance_checks":[{"id":"c01","argv":["bash",7]}]}`, path: "data.acceptance_checks[0].argv[1]"},
		{name: "keys are matched exactly, not case-insensitively", command: "GrantApproval", data: `{"Approval_ID":"a"}`, path: "data.Approval_ID"},
		{name: "duplicate key", command: "RevokeApproval", data: `{"approval_id":"a","approval_id":"b","reason":"r"}`, path: "data.approval_id"},
		{name: "a duration is a string", command: "SubmitMission", data: `{"mission_id":"m1","budgets":{"command_timeout":15}}`, path: "data.budgets.command_timeout"},
		{name: "a bad time", command: "GrantApproval", data: `{"approval_id":"a","expires_at":"tomorrow"}`, path: "data.expires_at"},
		{name: "a bad uuid", command: "ProposeClaim", data: `{"claim_id":"k","statement":"s","evidence":["nope"]}`, path: "data.evidence[0]"},
		{name: "an integer out of range", command: "GrantApproval", data: `{"uses":1e99}`, path: "data.uses"},
		{name: "null for a string", command: "RevokeApproval", data: `{"approval_id":null}`, path: "data.approval_id"},
		{name: "not an object", command: "RevokeApproval", data: `[1]`, path: "data"},
		{name: "not JSON", command: "RevokeApproval", data: `{"approval_id":`, path: "data.approval_id"},
		{name: "validation names the field", command: "SubmitMission", data: `{"mission_id":"m1","task_class":"code","mode":"proposal",
			"acceptance_checks":[{"id":"c01","argv":["bash"]},{"id":"c01","argv":["bash"]}]}`, path: "data.acceptance_checks[1].id"},
		{name: "a proposal without checks", command: "SubmitMission", data: `{"mission_id":"m1","task_class":"code","mode":"proposal"}`, path: "data.acceptance_checks"},
		{name: "an enumeration", command: "RecordProbe", data: `{"name":"p","kind":"ping","outcome":"ok","observed_by":"s"}`, path: "data.kind"},
		{name: "a negative budget", command: "SubmitMission", data: `{"mission_id":"m1","task_class":"code","mode":"direct_reply","budgets":{"attempts":-1}}`, path: "data.budgets.attempts"},
		{name: "a field inside the signed payload", command: "RecordMeasurement", data: `{"measurement_id":"x","executor_id":"e",
			"payload":"` + b64(`{"measurement_id":"x","gpu":{"nam":"GB10"}}`) + `","envelope":{"payloadType":"t","signatures":[{"keyid":"k","sig":"AA=="}]}}`, path: "data.payload.gpu.nam"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := DecodeCommand(tc.command, []byte(tc.data))
			if tc.path == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cmd.CommandName() != tc.command {
					t.Fatalf("decoded %s", cmd.CommandName())
				}
				return
			}
			var ie *InvalidCommandError
			if !errors.As(err, &ie) {
				t.Fatalf("want *InvalidCommandError at %s, got %v", tc.path, err)
			}
			if ie.Path != tc.path || ie.Command != tc.command {
				t.Fatalf("path %q command %q (%s), want %q", ie.Path, ie.Command, ie.Reason, tc.path)
			}
			var refusal *Refusal
			if errors.As(err, &refusal) {
				t.Fatal("a malformed command must not look like a refusal (422)")
			}
		})
	}
}

func TestDecodeCommand_Values(t *testing.T) {
	cmd, err := DecodeCommand("SubmitMission", []byte(`{"mission_id":"m1","task_class":"code","mode":"proposal","allowed_files":["bin/*.sh"],
		"acceptance_checks":[{"id":"c01","argv":["bash","t.sh"]}],"budgets":{"corrections":0,"command_timeout":"10s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	want := &SubmitMission{MissionID: "m1", TaskClass: "code", Mode: ModeProposal, AllowedFiles: []string{"bin/*.sh"},
		AcceptanceChecks: []AcceptanceCheck{{ID: "c01", Argv: []string{"bash", "t.sh"}}},
		Budgets:          BudgetRequest{Corrections: (*Count)(&zero), CommandTimeout: &PositiveDuration{10 * time.Second}}}
	if diff := cmp.Diff(want, cmd); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDecodeCommand_Unknown(t *testing.T) {
	_, err := DecodeCommand("LaunchEverything", []byte(`{}`))
	var ue *UnknownCommandError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "GrantApproval") {
		t.Fatalf("got %v", err)
	}
}

// TestDecide_Contract: Decide refuses to run on inputs the caller did not
// load, and a refused command never returns events.
func TestDecide_Contract(t *testing.T) {
	_, err := Decide(&RevokeApproval{ApprovalID: "a", Reason: "r"}, Inputs{At: t0, Policy: DefaultPolicy(), States: States{}})
	if !errors.Is(err, ErrStreamNotLoaded) {
		t.Fatalf("got %v", err)
	}
	_, err = Decide(&RevokeApproval{ApprovalID: "a", Reason: "r"}, Inputs{Policy: DefaultPolicy(), States: States{"approval-a": Approval{}}})
	if err == nil {
		t.Fatal("a decision without a time")
	}
	// The shape is DecodeCommand's to check, once: Decide runs the gates
	// of a valid command only.
	_, err = DecodeCommand("RevokeApproval", []byte(`{"approval_id":"a"}`))
	var ie *InvalidCommandError
	if !errors.As(err, &ie) || ie.Path != "data.reason" || ie.Command != "RevokeApproval" {
		t.Fatalf("got %v", err)
	}
}

func TestFold_Errors(t *testing.T) {
	l := newLedger(t)
	l.given(grant("a", ActionStartup, "provider-x", 1))
	evs := must(l.read("approval-a"))
	evs[0].Type = "ApprovalRenewed"
	_, err := Fold("approval-a", evs)
	var fe *FoldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrUnknownEventType) {
		t.Fatalf("got %v", err)
	}
	evs[0].Type, evs[0].Data = TypeApprovalGranted, []byte(`{"uses":"many"}`)
	if _, err := Fold("approval-a", evs); !errors.As(err, &fe) {
		t.Fatalf("got %v", err)
	}
	if _, err := Initial("refusals"); err == nil {
		t.Fatal("refusals is no aggregate")
	}
}

func TestPolicy(t *testing.T) {
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
	p := DefaultPolicy()
	p.Budgets.Attempts = -1
	p.ProbeFreshness = Duration{}
	p.Admission.MinAvailableRAMBytes = 0
	err := p.Validate()
	if !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("got %v", err)
	}
	for _, f := range []string{"budgets.attempts", "probe_freshness", "admission.min_available_ram_bytes"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%q not reported in %v", f, err)
		}
	}
	b := DefaultPolicy().Budgets
	want := Budgets{InferenceRequests: 8, ErrorRecoveryCycles: 2, Attempts: 2, Corrections: 1,
		CommandTimeout: D(15 * time.Second), AttemptTimeout: D(30 * time.Minute), OutputBytesPerCommand: 16 << 10}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	a := DefaultPolicy().Admission
	if a.MinAvailableRAMBytes != 6<<30 || a.MaxGPUAllocationBytes != 11776<<20 {
		t.Errorf("admission defaults %+v", a)
	}
}
