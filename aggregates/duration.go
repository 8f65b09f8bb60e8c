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
