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

// ProviderStream returns "provider-<name>".
func ProviderStream(name string) string { return ProviderPrefix + name }

// BindingStream returns "binding-<id>".
func BindingStream(id string) string { return BindingPrefix + id }

// ApprovalStream returns "approval-<id>".
func ApprovalStream(id string) string { return ApprovalPrefix + id }

// MissionStream returns "mission-<id>".
func MissionStream(id string) string { return MissionPrefix + id }

// MeasurementStream returns "measurement-<id>".
func MeasurementStream(id string) string { return MeasurementPrefix + id }

// ClaimStream returns "claim-<id>".
func ClaimStream(id string) string { return ClaimPrefix + id }

// ExecutorStream returns "executor-<id>".
func ExecutorStream(id string) string { return ExecutorPrefix + id }

// MaxIDLen bounds the id part of a stream name, in bytes, so that every
// stream name stays below events.MaxStreamNameLen (200) with the longest
// prefix ("measurement-", 12 bytes).
const MaxIDLen = 128
