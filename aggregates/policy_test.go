package aggregates_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/aggregates"
)

// TestParsePolicy: a policy file overrides only the fields it names, and a
// file that names an unknown field, has a wrong type or breaks Validate is
// refused with the field's path, wrapping ErrInvalidPolicy.
func TestParsePolicy(t *testing.T) {
	def := aggregates.DefaultPolicy()
	twoCorrections := aggregates.DefaultPolicy()
	twoCorrections.Budgets.Corrections = 2
	twoCorrections.ProbeFreshness = aggregates.D(time.Minute)
	tests := []struct {
		name    string
		file    string
		want    aggregates.Policy
		wantErr string // substring; empty: no error
	}{
		{name: "empty file", file: "", want: def},
		{name: "empty object", file: "{}", want: def},
		{name: "overrides", file: `{"budgets": {"corrections": 2}, "probe_freshness": "1m"}`, want: twoCorrections},
		{name: "unknown field", file: `{"budgets": {"correction": 2}}`, wantErr: "policy.budgets.correction: unknown field"},
		{name: "wrong case", file: `{"Budgets": {}}`, wantErr: "policy.Budgets"},
		{name: "wrong type", file: `{"budgets": {"corrections": "two"}}`, wantErr: "policy.budgets.corrections: must be an integer, got a string"},
		{name: "invalid value", file: `{"budgets": {"attempts": -1}}`, wantErr: "budgets.attempts is -1; must be >= 0"},
		{name: "not an object", file: `[1]`, wantErr: "policy: must be an object, got an array"},
		{name: "not JSON", file: `{"budgets":`, wantErr: "policy.budgets: is not JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := aggregates.ParsePolicy([]byte(tc.file))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, aggregates.ErrInvalidPolicy) {
					t.Fatalf("err = %v, want ErrInvalidPolicy containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
		})
	}
}
