package aggregates

import (
	"strings"

	"github.com/google/uuid"
	"github.com/greffe/greffe/events"
)

// Evidence is what one event cited as evidence resolved to. Only three
// kinds verify, each signed by a registered key (issue #20): a passing
// check signed by an independent check runner (RecordSignedCheck), a
// measurement whose signature verifies against its executor's keys and
// that measured something (not refused_by_host), and an
// ok models/smoke probe derived from an executor's signed probe that
// listed the configured tag exactly. What a writer merely stated (a check,
// a probe) never verifies.
type Evidence struct {
	// EventID is the evidence event's id, as the claim names it.
	EventID uuid.UUID `json:"event_id"`
	// Ref is where the event is in the log.
	Ref EventRef `json:"ref"`
	// Kind is what kind of evidence the event is (its type).
	Kind string `json:"kind"`
	// Verified says whether the evidence verified.
	Verified bool `json:"verified"`
	// Reason says why it verified or not.
	Reason string `json:"reason"`
	// Covers is what verified evidence covers (claim_scope.go); absent
	// from claims accepted before issue #15.
	Covers []Coverage `json:"covers,omitempty"`
}

// Evidence kinds.
const (
	EvidenceCheck       = "check"
	EvidenceMeasurement = "measurement"
	EvidenceProbe       = "probe"
	EvidenceOther       = "other"
)

// EvidenceExecutor returns the executor whose keys verify e, when e is a
// recorded measurement: the caller folds "executor-<id>" and passes its
// Lookup to ResolveEvidence.
func EvidenceExecutor(e *events.Event) (string, bool) {
	if e.Type != TypeMeasurementRecorded || !strings.HasPrefix(e.Stream, MeasurementPrefix) {
		return "", false
	}
	var r MeasurementResult
	if events.DecodeStored(e.Data, &r) != nil || r.ExecutorID == "" {
		return "", false
	}
	return r.ExecutorID, true
}

// ResolveEvidence says what stored event e proves. keys verifies a
// measurement's signature (nil leaves a measurement unverified); it should
// be the Lookup of the executor named by EvidenceExecutor, folded as of
// now, so that a key revoked since no longer vouches for anything.
func ResolveEvidence(e *events.Event, keys events.KeyLookup) Evidence {
	ev := Evidence{EventID: e.ID, Ref: RefOf(e), Kind: EvidenceOther}
	switch {
	case e.Type == TypeCheckRecorded && strings.HasPrefix(e.Stream, MissionPrefix):
		ev.Kind = EvidenceCheck
		var d CheckRecorded
		switch {
		case events.DecodeStored(e.Data, &d) != nil:
			ev.Reason = "the check's data does not decode"
		case d.Outcome != CheckPass:
			ev.Reason = "the check's outcome is " + d.Outcome + ", not pass"
		case d.RunnerKind != RunnerIndependent:
			ev.Reason = "the check was run by the worker, not an independent runner"
		case !d.Signed():
			ev.Reason = "the check was stated by a writer, not signed by an independent check runner's registered key"
		default:
			ev.Verified, ev.Reason = true, "independent pass of check "+d.CheckID+" on candidate "+d.CandidateHash
			ev.Covers = []Coverage{{Subject: ClaimSubject{Kind: SubjectMission, ID: ID(d.MissionID)}, Case: d.CheckID, At: d.At}}
		}
	case e.Type == TypeMeasurementRecorded && strings.HasPrefix(e.Stream, MeasurementPrefix):
		ev.Kind = EvidenceMeasurement
		switch {
		case keys == nil:
			ev.Reason = "the measurement's signature was not checked"
		case e.Envelope == nil || e.Envelope.PayloadType != MeasurementPayloadType:
			ev.Reason = "the measurement carries no measurement envelope"
		default:
			var r MeasurementResult
			if _, err := events.VerifyEnvelope(e.Data, e.Envelope, keys); err != nil {
				ev.Reason = "the measurement's signature does not verify: " + err.Error()
			} else if err := events.DecodeStored(e.Data, &r); err != nil {
				ev.Reason = "the measurement's data does not decode"
			} else if r.Outcome == ResultRefusedByHost {
				// Signed, but of a refusal: the host measured nothing of what
				// was asked, so it proves nothing about it.
				ev.Reason = "the measurement was refused by its host's policy (" + ResultRefusedByHost + "): nothing was measured"
			} else {
				ev.Verified, ev.Reason = true, "signed measurement"
				ev.Covers = []Coverage{{Subject: ClaimSubject{Kind: SubjectHost, ID: ID(r.Host)}, Case: r.MeasurementID, At: r.EndedAt.UTC()}}
			}
		}
	case e.Type == TypeProbeRecorded && strings.HasPrefix(e.Stream, ProviderPrefix):
		ev.Kind = EvidenceProbe
		var d ProbeRecorded
		switch {
		case events.DecodeStored(e.Data, &d) != nil:
			ev.Reason = "the probe's data does not decode"
		case d.Kind == ProbeDoctor:
			ev.Reason = "a doctor probe does not prove the model is live"
		case !d.Signed():
			ev.Reason = "the probe was stated by a writer, not derived from an executor's signed probe measurement"
		case d.Outcome != ProbeOK:
			ev.Reason = "the probe's outcome is " + d.Outcome
		case !d.ExactTagListed:
			ev.Reason = "the probe did not list the configured tag exactly"
		default:
			ev.Verified, ev.Reason = true, d.Kind+" probe listed "+d.ExpectedTag+" exactly"
			ev.Covers = []Coverage{{Subject: ClaimSubject{Kind: SubjectProvider, ID: ID(d.Provider)}, ModelTag: d.ExpectedTag, At: d.ObservedAt.UTC()}}
		}
	default:
		ev.Reason = "a " + e.Type + " event is not evidence a claim can rest on"
	}
	return ev
}
