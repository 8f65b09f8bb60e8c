package aggregates

import (
	"testing"
)

func TestBinding_Decide(t *testing.T) {
	arts := artifacts()
	noTemplate := arts[:4]
	hashAll := func(id string, as []BindingArtifact, verifier string) []step {
		var s []step
		for _, a := range as {
			s = append(s, hashArtifact(id, a, verifier))
		}
		return s
	}
	mismatched := append([]BindingArtifact(nil), arts...)
	mismatched[0].SHA256 = Hex64(hexOf("other weights"))
	badID := propose("b1", "qwen", "qwen3.8:27b", arts)
	badID.Identity = Digest("sha256:" + hexOf("not the identity"))
	changed := hashArtifact("b1", arts[0], VerifierSupervisor)
	changed.SHA256 = Hex64(hexOf("other weights"))

	runGWT(t, []gwt{
		{
			name: "propose",
			when: propose("b1", "qwen", "qwen3.8:27b", arts[:1]),
			want: []NewEvent{{Stream: "binding-b1", Type: TypeBindingProposed, Data: BindingProposed{
				BindingID: "b1", Provider: "qwen", ModelTag: "qwen3.8:27b", Family: "coder", ConfigSHA256: hexOf("config"),
				SourceCommit: "7695859aa13afb248bdb4d36f9b2e95707db079d", TemplateSHA256: hexOf("template"), ContextTokens: 65536,
				ModelMetadata: map[string]string{"architecture": "qwen35", "quantization": "Q4_K_M"}, Artifacts: arts[:1],
				Identity: string(propose("b1", "qwen", "qwen3.8:27b", arts[:1]).Identity), At: t0}}},
		},
		{
			name:  "propose twice",
			given: []step{propose("b1", "qwen", "qwen3.8:27b", arts)},
			when:  propose("b1", "qwen", "qwen3.8:27b", arts),
			code:  CodeBindingExists,
		},
		{
			name: "verify an unknown binding",
			when: &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			code: CodeBindingUnknown,
		},
		{
			name:  "verify without the template artifact",
			given: []step{propose("b1", "qwen", "qwen3.8:27b", noTemplate), signedHashes("b1", noTemplate)},
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			code:  CodeBindingRoleMissing,
		},
		{
			name:  "verify with an artifact never hashed",
			given: []step{propose("b1", "qwen", "qwen3.8:27b", arts), signedHashes("b1", arts[:4])},
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			code:  CodeArtifactNotVerified,
		},
		{
			name:  "verify with artifacts hashed only by the worker",
			given: []step{propose("b1", "qwen", "qwen3.8:27b", arts), hashAll("b1", arts, VerifierWorker)},
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			code:  CodeArtifactNotVerified,
		},
		{
			// Issue #20: a writer's hashes verify nothing, whatever
			// verifier they name.
			name:  "verify with artifacts a writer hashed as a supervisor",
			given: []step{propose("b1", "qwen", "qwen3.8:27b", arts), hashAll("b1", arts, VerifierSupervisor)},
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			code:  CodeArtifactNotVerified,
		},
		{
			name:  "a writer's hash after the executor's is the newest, and verifies nothing",
			given: []step{propose("b1", "qwen", "qwen3.8:27b", arts), signedHashes("b1", arts), hashArtifact("b1", arts[0], VerifierSupervisor)},
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			code:  CodeArtifactNotVerified,
		},
		{
			name:  "verify with a hash that differs from the proposal",
			given: []step{propose("b1", "qwen", "qwen3.8:27b", arts), signedHashes("b1", mismatched)},
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			code:  CodeArtifactMismatch,
		},
		{
			name:  "verify an identity that does not recompute",
			given: []step{badID, signedHashes("b1", arts)},
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			code:  CodeIdentityMismatch,
		},
		{
			name:  "verify",
			given: []step{propose("b1", "qwen", "qwen3.8:27b", arts), signedHashes("b1", arts)},
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "supervisor-1"},
			want: []NewEvent{{Stream: "binding-b1", Type: TypeBindingVerified, Data: BindingVerified{
				BindingID: "b1", Identity: string(propose("b1", "qwen", "qwen3.8:27b", arts).Identity), VerifiedBy: "supervisor-1", Principal: AnonymousName, At: t0}}},
		},
		{
			name:  "verify twice appends nothing",
			given: verifiedBinding("b1", "qwen", "qwen3.8:27b", arts),
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			want:  nil,
		},
		{
			name:  "a changed hash of a bound path invalidates",
			given: verifiedBinding("b1", "qwen", "qwen3.8:27b", arts),
			when:  changed,
			// A writer's changed hash still invalidates (fail closed).
			wantFn: func(l *ledger) []NewEvent {
				was := l.state(BindingStream("b1")).(Binding).VerifiedHashes[string(arts[0].Path)]
				now := ArtifactHashed{BindingID: "b1", Path: string(arts[0].Path), Size: int64(arts[0].Size), MtimeNS: changed.MtimeNS, SHA256: hexOf("other weights"),
					Role: RoleWeights, VerifiedBy: "supervisor-1", Principal: AnonymousName, VerifierRole: VerifierSupervisor, Stated: true, At: t0}
				if !was.Signed() {
					t.Fatalf("the binding was verified on %+v", was)
				}
				return []NewEvent{
					{Stream: "binding-b1", Type: TypeArtifactHashed, Data: now},
					{Stream: "binding-b1", Type: TypeBindingInvalidated, Data: BindingInvalidated{
						BindingID: "b1", Reason: InvalidatedArtifactChanged, Path: string(arts[0].Path), Was: &was, Now: &now, At: t0}},
				}
			},
		},
		{
			name:  "the same hash again changes nothing",
			given: verifiedBinding("b1", "qwen", "qwen3.8:27b", arts),
			when:  hashArtifact("b1", arts[0], VerifierSupervisor),
			want: []NewEvent{{Stream: "binding-b1", Type: TypeArtifactHashed, Data: ArtifactHashed{
				BindingID: "b1", Path: string(arts[0].Path), Size: int64(arts[0].Size), MtimeNS: 1_757_000_000_000_000_000, SHA256: string(arts[0].SHA256),
				Role: RoleWeights, VerifiedBy: "supervisor-1", Principal: AnonymousName, VerifierRole: VerifierSupervisor, Stated: true, At: t0}}},
		},
		{
			name:  "an invalidated binding is never verified again",
			given: []step{verifiedBinding("b1", "qwen", "qwen3.8:27b", arts), &InvalidateBinding{BindingID: "b1", Reason: InvalidatedRuntimeRestart}},
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			code:  CodeBindingInvalidated,
		},
		{
			name:  "a rejected binding is never verified",
			given: []step{propose("b1", "qwen", "qwen3.8:27b", arts), &RejectBinding{BindingID: "b1", Reason: "old binding format"}},
			when:  &VerifyBinding{BindingID: "b1", VerifiedBy: "s"},
			code:  CodeBindingRejected,
		},
		{
			name:  "reject",
			given: []step{propose("b1", "qwen", "qwen3.8:27b", arts)},
			when:  &RejectBinding{BindingID: "b1", Reason: "old binding format"},
			want: []NewEvent{{Stream: "binding-b1", Type: TypeBindingRejected, Data: BindingRejected{
				BindingID: "b1", Reason: "old binding format", At: t0}}},
		},
		{
			name:  "a verified binding is invalidated, not rejected",
			given: verifiedBinding("b1", "qwen", "qwen3.8:27b", arts),
			when:  &RejectBinding{BindingID: "b1", Reason: "r"},
			code:  CodeBindingAlreadyVerified,
		},
		{
			name:  "runtime restart",
			given: verifiedBinding("b1", "qwen", "qwen3.8:27b", arts),
			when:  &InvalidateBinding{BindingID: "b1", Reason: InvalidatedRuntimeRestart},
			want: []NewEvent{{Stream: "binding-b1", Type: TypeBindingInvalidated, Data: BindingInvalidated{
				BindingID: "b1", Reason: InvalidatedRuntimeRestart, At: t0}}},
		},
		{
			name: "invalidate an unknown binding",
			when: &InvalidateBinding{BindingID: "b1", Reason: "r"},
			code: CodeBindingUnknown,
		},
	})
}
