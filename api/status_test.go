package api

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// kinds are the four outcomes.
var kinds = []events.Kind{events.KindRefused, events.KindFailed, events.KindUncertain, events.KindCorrupt}

// TestStatuses_Docs holds the one status table (statuses) to docs/API.md:
// every code the document gives a status, in its tables ("| `code` | 409
// |") or in its lists ("`not_leader` (503; …)"), has that status, whatever
// the kind it comes with; a code given two ("503 or 409") has both, one
// per kind. Below the API errors carry a kind and a code, never a status,
// so this is the one place statuses can drift from the contract.
func TestStatuses_Docs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)`(?: / `([a-z_]+)`)? \\| ([0-9]{3}) \\|")
	inline := regexp.MustCompile("`([a-z_]+)` \\(([0-9]{3})(?:\\s+or\\s+([0-9]{3}))?")
	documented := map[string][]int{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		s, _ := strconv.Atoi(m[3])
		for _, code := range m[1:3] {
			if code != "" && !slices.Contains(documented[code], s) {
				documented[code] = append(documented[code], s)
			}
		}
	}
	for _, m := range inline.FindAllStringSubmatch(string(doc), -1) {
		for _, v := range m[2:] {
			if s, err := strconv.Atoi(v); err == nil && !slices.Contains(documented[m[1]], s) {
				documented[m[1]] = append(documented[m[1]], s)
			}
		}
	}
	if len(documented) < 50 {
		t.Fatalf("found only %d documented statuses: the parse missed them", len(documented))
	}
	for code, want := range documented {
		var got []int
		for _, k := range kinds {
			if s := statusOf(k, code); !slices.Contains(got, s) {
				got = append(got, s)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if len(want) == 1 {
			// One status, whatever the kind: the code has a row of its own.
			if s, ok := statuses[statusKey{code, anyKind}]; !ok || s != want[0] {
				t.Errorf("%s: docs/API.md says %d, the table %v", code, want[0], got)
			}
			continue
		}
		if !slices.Equal(intersect(got, want), want) {
			t.Errorf("%s: docs/API.md says %v, the table gives %v over the kinds", code, want, got)
		}
	}
}

func intersect(a, b []int) []int {
	var out []int
	for _, v := range b {
		if slices.Contains(a, v) {
			out = append(out, v)
		}
	}
	return out
}

// TestStatuses_Kinds: a code without a row takes its kind's status: a
// gate's refusal is a 422 (docs/GATES.md), whatever its code; and the
// codes whose status depends on their kind get each.
func TestStatuses_Kinds(t *testing.T) {
	for _, tc := range []struct {
		kind events.Kind
		code string
		want int
	}{
		{events.KindRefused, aggregates.CodeApprovalMissing, http.StatusUnprocessableEntity},
		{events.KindRefused, aggregates.CodeLeaseHeld, http.StatusUnprocessableEntity},
		{events.KindFailed, "a_new_failure", http.StatusServiceUnavailable},
		{events.KindUncertain, "a_new_uncertainty", http.StatusServiceUnavailable},
		{events.KindCorrupt, "a_new_corruption", http.StatusInternalServerError},
		{events.KindRefused, wire.CodeReplicationFailed, http.StatusConflict},
		{events.KindFailed, wire.CodeReplicationFailed, http.StatusServiceUnavailable},
		{events.KindFailed, commands.CodeConcurrencyConflict, http.StatusConflict},
		{events.KindRefused, commands.CodeInvalidCommand, http.StatusBadRequest},
	} {
		if got := statusOf(tc.kind, tc.code); got != tc.want {
			t.Errorf("statusOf(%v, %s) = %d, want %d", tc.kind, tc.code, got, tc.want)
		}
	}
}

// TestStatuses_EveryDeclaredCode: every code the API layer declares has a
// row (its errors carry no kind, so the kind's row cannot stand in).
func TestStatuses_EveryDeclaredCode(t *testing.T) {
	for _, code := range []string{events.CodeMalformedJSON, events.CodeUnknownField, wire.CodeBodyTooLarge, wire.CodeBodyTimeout, wire.CodeInvalidQuery,
		wire.CodeUnauthorized, wire.CodeForbidden, wire.CodeMethodNotAllowed, wire.CodeUnsupportedMedia, wire.CodeInternal, wire.CodeUnavailable, wire.CodeCorrupt,
		wire.CodeBackupInProgress, wire.CodeBackupKeysAdminOnly, wire.CodeNotClustered, wire.CodeLeaderChanged, wire.CodeLeaderUnreachable, wire.CodeSignatureInvalid} {
		if _, ok := statuses[statusKey{code, anyKind}]; !ok {
			t.Errorf("%s has no row in the status table", code)
		}
	}
}
