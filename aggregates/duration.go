package aggregates

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written in JSON as Go's duration string
// ("15s", "30m0s", "1.5s"). The string form parses back to the exact same
// number of nanoseconds, so event data round-trips. The zero value is 0s.
type Duration struct{ time.Duration }

// D returns d as a Duration.
func D(d time.Duration) Duration { return Duration{d} }

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// UnmarshalJSON reads a duration string such as "15s"; numbers are refused
// so that no one has to guess a unit.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"15s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"15s\": %w", err)
	}
	d.Duration = v
	return nil
}

// The schema of every duration: what time.ParseDuration reads (signs and
// units): durationPattern for any sign, positivePattern for a positive
// one (no sign but "+", and some digit of some part not 0). That a
// duration is at least 0 (NonNegativeDuration) the schema leaves to
// Validate, since "-0s" is 0.
const (
	durationUnit    = `(ns|us|µs|μs|ms|s|m|h)`
	durationPart    = `[0-9]*(\.[0-9]*)?` + durationUnit
	nonZeroPart     = `([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)` + durationUnit
	durationPattern = `^[-+]?(0|(` + durationPart + `)+)$`
	positivePattern = `^\+?(` + durationPart + `)*` + nonZeroPart + `(` + durationPart + `)*$`
)

func durationSchema(pattern string) map[string]any {
	return map[string]any{"type": "string", "pattern": pattern,
		"description": "a Go duration string such as \"15s\" or \"1h30m\"; numbers are refused, so that no one guesses a unit"}
}

// jsonSchema describes a Duration of any sign; a field with a bound is one
// of the types below.
func (Duration) jsonSchema() map[string]any { return durationSchema(durationPattern) }

// NonNegativeDuration is a Duration of 0 or more: how long something took
// (a latency, a run).
type NonNegativeDuration Duration

// MarshalJSON writes the duration string.
func (d NonNegativeDuration) MarshalJSON() ([]byte, error) { return Duration(d).MarshalJSON() }

// UnmarshalJSON reads a duration string such as "15s".
func (d *NonNegativeDuration) UnmarshalJSON(b []byte) error { return (*Duration)(d).UnmarshalJSON(b) }

func (d NonNegativeDuration) check(path string) error {
	if d.Duration < 0 {
		return invalid(path, "is %s; must be >= 0", d.Duration)
	}
	return nil
}
func (NonNegativeDuration) jsonSchema() map[string]any { return durationSchema(durationPattern) }

// PositiveDuration is a Duration of more than 0: a time limit or an
// interval.
type PositiveDuration Duration

// MarshalJSON writes the duration string.
func (d PositiveDuration) MarshalJSON() ([]byte, error) { return Duration(d).MarshalJSON() }

// UnmarshalJSON reads a duration string such as "15s".
func (d *PositiveDuration) UnmarshalJSON(b []byte) error { return (*Duration)(d).UnmarshalJSON(b) }

func (d PositiveDuration) check(path string) error {
	if d.Duration <= 0 {
		return invalid(path, "is %s; must be positive", d.Duration)
	}
	return nil
}
func (PositiveDuration) jsonSchema() map[string]any { return durationSchema(positivePattern) }
