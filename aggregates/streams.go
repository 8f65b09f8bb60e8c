package aggregates

import "github.com/greffe/greffe/events"

// Stream prefixes of the aggregates. They are the events package's reserved
// prefixes: the raw append API refuses them, so only these deciders (through
// the commands layer) write there.
const (
	ProviderPrefix    = "provider-"
	BindingPrefix     = "binding-"
	ApprovalPrefix    = "approval-"
	MissionPrefix     = "mission-"
	MeasurementPrefix = "measurement-"
	ClaimPrefix       = "claim-"
	ExecutorPrefix    = events.KeyStreamPrefix // key events count only there
)

// The stream of an aggregate is its prefix and its id: a string, or a
// command's ID or OptionalID (values.go).

// ProviderStream returns "provider-<name>".
func ProviderStream[T ~string](name T) string { return ProviderPrefix + string(name) }

// BindingStream returns "binding-<id>".
func BindingStream[T ~string](id T) string { return BindingPrefix + string(id) }

// ApprovalStream returns "approval-<id>".
func ApprovalStream[T ~string](id T) string { return ApprovalPrefix + string(id) }

// MissionStream returns "mission-<id>".
func MissionStream[T ~string](id T) string { return MissionPrefix + string(id) }

// MeasurementStream returns "measurement-<id>".
func MeasurementStream[T ~string](id T) string { return MeasurementPrefix + string(id) }

// ClaimStream returns "claim-<id>".
func ClaimStream[T ~string](id T) string { return ClaimPrefix + string(id) }

// ExecutorStream returns "executor-<id>".
func ExecutorStream[T ~string](id T) string { return ExecutorPrefix + string(id) }

// MaxIDLen bounds the id part of a stream name, in bytes, so that every
// stream name stays below events.MaxStreamNameLen (200) with the longest
// prefix ("measurement-", 12 bytes).
const MaxIDLen = 128
