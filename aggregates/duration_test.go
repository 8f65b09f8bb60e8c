package aggregates

import (
	"regexp"
	"testing"
	"time"
)

// TestPositiveDuration_Pattern holds the duration schemas' patterns to the
// rules: of the strings time.ParseDuration reads, durationPattern matches
// all and positivePattern those above 0. A string ParseDuration refuses
// ("s") the decoder refuses before any rule, and the patterns may be
// looser there.
func TestPositiveDuration_Pattern(t *testing.T) {
	re := regexp.MustCompile(positivePattern)
	any := regexp.MustCompile(durationPattern)
	for _, s := range []string{
		"0", "0s", "+0s", "-0s", "00s", "0.0s", ".0s", "0.s", "0h0m0s", "0ms0ns",
		"1s", "+1s", "-1s", "1.5s", ".5s", "5.s", "0.001ms", "1h30m", "0h1m", "1h0m0s", "10ns", "1us", "1µs", "1μs",
		"001s", "0.10s", "-1h", "1", "s", "1x", "",
	} {
		d, err := time.ParseDuration(s)
		if err != nil {
			continue
		}
		if got := re.MatchString(s); got != (d > 0) {
			t.Errorf("%q: positivePattern matches %v; ParseDuration reads %v", s, got, d)
		}
		if !any.MatchString(s) {
			t.Errorf("%q: durationPattern does not match; ParseDuration reads %v", s, d)
		}
	}
}
