package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"
	"github.com/invopop/jsonschema"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
)

// EventDataTypes maps every domain event type to the Go type of its data:
// the deciders' events (aggregates), the executor keys' (events) and the
// commands layer's refusal record. MeasurementRecorded's data is the
// executor's signed payload, stored verbatim, and CheckRunSigned's the
// check runner's. TestOpenAPI_EventTypes
// fails when a Type… constant is missing here. The map is new on each
// call.
func EventDataTypes() map[string]any {
	return map[string]any{
		aggregates.TypeApprovalGranted:         aggregates.ApprovalGranted{},
		aggregates.TypeApprovalConsumed:        aggregates.ApprovalConsumed{},
		aggregates.TypeApprovalRevoked:         aggregates.ApprovalRevoked{},
		aggregates.TypeArtifactHashed:          aggregates.ArtifactHashed{},
		aggregates.TypeBindingProposed:         aggregates.BindingProposed{},
		aggregates.TypeBindingVerified:         aggregates.BindingVerified{},
		aggregates.TypeBindingRejected:         aggregates.BindingRejected{},
		aggregates.TypeBindingInvalidated:      aggregates.BindingInvalidated{},
		aggregates.TypeClaimProposed:           aggregates.ClaimProposed{},
		aggregates.TypeClaimAccepted:           aggregates.ClaimAccepted{},
		aggregates.TypeClaimRefused:            aggregates.ClaimRefused{},
		aggregates.TypeMeasurementRequested:    aggregates.MeasurementRequested{},
		aggregates.TypeMeasurementClaimed:      aggregates.MeasurementClaimed{},
		aggregates.TypeMeasurementRecorded:     aggregates.MeasurementResult{},
		aggregates.TypeMeasurementUncertain:    aggregates.MeasurementUncertain{},
		aggregates.TypeMeasurementLeaseRenewed: aggregates.MeasurementLeaseRenewed{},
		aggregates.TypeMeasurementApproved:     aggregates.MeasurementApproved{},
		aggregates.TypeMissionSubmitted:        aggregates.MissionSubmitted{},
		aggregates.TypeRouteDecided:            aggregates.RouteDecided{},
		aggregates.TypeAdmissionDecided:        aggregates.AdmissionDecided{},
		aggregates.TypeAttemptStarted:          aggregates.AttemptStarted{},
		aggregates.TypeAttemptStopped:          aggregates.AttemptStopped{},
		aggregates.TypeInferenceReserved:       aggregates.InferenceReserved{},
		aggregates.TypeInferenceSettled:        aggregates.InferenceSettled{},
		aggregates.TypeReservationReconciled:   aggregates.ReservationReconciled{},
		aggregates.TypeCandidateProduced:       aggregates.CandidateProduced{},
		aggregates.TypeCheckRecorded:           aggregates.CheckRecorded{},
		aggregates.TypeCheckRunSigned:          aggregates.CheckRun{},
		aggregates.TypeReviewRecorded:          aggregates.ReviewRecorded{},
		aggregates.TypeCorrectionRequested:     aggregates.CorrectionRequested{},
		aggregates.TypeMissionStopped:          aggregates.MissionStopped{},
		aggregates.TypeResultDelivered:         aggregates.ResultDelivered{},
		aggregates.TypePatchIntegrated:         aggregates.PatchIntegrated{},
		aggregates.TypeProviderDeclared:        aggregates.ProviderDeclared{},
		aggregates.TypeProviderLimitsDeclared:  aggregates.ProviderLimitsDeclared{},
		aggregates.TypeProviderActivated:       aggregates.ProviderActivated{},
		aggregates.TypeProviderMadeDormant:     aggregates.ProviderMadeDormant{},
		aggregates.TypeProbeRecorded:           aggregates.ProbeRecorded{},
		aggregates.TypeProbeScheduleApproved:   aggregates.ProbeScheduleApproved{},
		aggregates.TypeProbeScheduleEnded:      aggregates.ProbeScheduleEnded{},
		aggregates.TypeScheduledProbeRequested: aggregates.ScheduledProbeRequested{},
		events.TypeExecutorKeyRegistered:       events.KeyRegisteredData{},
		events.TypeExecutorKeyRevoked:          events.KeyRevokedData{},
		commands.TypeCommandRefused:            commands.CommandRefused{},
	}
}

// WireEvent is an event as the API writes it (events.Event's MarshalJSON,
// docs/API.md): the shape events.Event encodes by hand, which reflection
// cannot read from the type. TestOpenAPI_WireEvent validates encoded
// events against it.
type WireEvent struct {
	// Position is the event's index in the global log, from 0.
	Position uint64 `json:"position"`
	// Stream is the stream the event belongs to.
	Stream string `json:"stream" jsonschema:"minLength=1,maxLength=200"`
	// Version is the event's index in its stream, from 0.
	Version uint64 `json:"version"`
	// ID is the event's UUID: its idempotency key.
	ID uuid.UUID `json:"id"`
	// Type is the event's type (a domain event's data follows its schema).
	Type string `json:"type" jsonschema:"minLength=1,maxLength=200"`
	// Data is the event's data, a JSON object, as stored.
	Data map[string]any `json:"data"`
	// Metadata is the event's metadata, a JSON object, as stored.
	Metadata map[string]any `json:"metadata"`
	// RecordedAt is when the node recorded it (RFC 3339, nanoseconds, UTC).
	RecordedAt time.Time `json:"recorded_at"`
	// CorrelationID groups events (a command's correlation id).
	CorrelationID string `json:"correlation_id,omitempty" jsonschema:"maxLength=256"`
	// CausationID names what caused it (a command's id).
	CausationID string `json:"causation_id,omitempty" jsonschema:"maxLength=256"`
	// Actor is the authenticated principal that wrote it.
	Actor string `json:"actor,omitempty"`
	// Envelope carries DSSE signatures over Data, when signed.
	Envelope *events.Envelope `json:"envelope,omitempty"`
	// LeafHash is the event's Merkle leaf hash, SHA-256(0x00 ‖ encoding), base64.
	LeafHash []byte `json:"leaf_hash"`
}

// HealthOut is the answer of GET /healthz (api/log_handlers.go).
type HealthOut struct {
	// Status is ok, or store_failed once the store refuses writes.
	Status string `json:"status" jsonschema:"enum=ok,enum=store_failed"`
	// Head is the log's size.
	Head uint64 `json:"head"`
	// Error says why the store failed.
	Error string `json:"error,omitempty"`
}

// ProjectionOut is the answer of GET /v1/projections/{name}: the rows of
// a read model (docs/COMMANDS.md, Projections), sorted by key.
type ProjectionOut struct {
	// Name is the projection's name.
	Name string `json:"name"`
	// Position is the log size the rows were folded to.
	Position uint64 `json:"position"`
	// At is the time timed rows were judged at.
	At *time.Time `json:"at,omitempty"`
	// Rows are the model's rows, each with its key.
	Rows []map[string]any `json:"rows"`
}

// wireMapper gives the schema of the types whose JSON is written by hand
// (a MarshalJSON reflection cannot read). The domain's value types
// describe themselves (aggregates.SchemaOf) and are the builder's mapper.
func wireMapper(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeFor[uuid.UUID]():
		return &jsonschema.Schema{Type: "string", Format: "uuid"}
	case reflect.TypeFor[events.Event]():
		return &jsonschema.Schema{Ref: "#/$defs/WireEvent"}
	case reflect.TypeFor[events.Expected]():
		return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
			{Type: "string", Enum: []any{"any", "no_stream", "exists"}},
			{Type: "integer", Minimum: json.Number("0"), Maximum: json.Number(maxExpected)},
			{Type: "string", Pattern: "^(0|[1-9][0-9]{0,18})$"},
		}, Description: "the stream's expected version: any, no_stream, exists, or a version from 0 to 2^62, as a number or a string"}
	case reflect.TypeFor[json.RawMessage]():
		return &jsonschema.Schema{Type: "object"}
	}
	return nil
}

// valueSchema is the schema a value type of aggregates gives of itself
// (aggregates.SchemaOf), converted to the generator's type; nil when t is
// none. A list of structs names its element by "$ref"; the element's own
// schema is reflected by the caller (schemaBuilder.mapper).
func valueSchema(t reflect.Type) (*jsonschema.Schema, error) {
	ts, ok := aggregates.SchemaOf(t)
	if !ok {
		return nil, nil
	}
	raw, err := json.Marshal(ts.JSON)
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", t, err)
	}
	s := new(jsonschema.Schema)
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("schema of %s: %w", t, err)
	}
	return s, nil
}

// maxExpected is events.MaxExpectedVersion, 2^62.
const maxExpected = "4611686018427387904"

// commandRouteRoles returns the roles POST /v1/commands admits besides
// admin: every role that sends some command (aggregates.SenderRoles).
func commandRouteRoles() []Role {
	var out []Role
	for _, r := range aggregates.SenderRoles() {
		if Role(r) != RoleAdmin {
			out = append(out, Role(r))
		}
	}
	return out
}

// commandRoles returns the roles that may send the command name: the
// catalogue's rule (aggregates.CommandRoles).
func commandRoles(name string) []Role {
	var out []Role
	for _, r := range aggregates.CommandRoles(name) {
		out = append(out, Role(r))
	}
	return out
}
