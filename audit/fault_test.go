package audit

import (
	"os"
	"strings"
	"testing"
)

// TestFaultKinds_Documented: every fault kind is a stable code listed in
// docs/AUDIT.md (the table auditors read), once.
func TestFaultKinds_Documented(t *testing.T) {
	doc, err := os.ReadFile("../docs/AUDIT.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, k := range Kinds() {
		if seen[k] {
			t.Errorf("fault kind %q listed twice", k)
		}
		seen[k] = true
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("fault kind %q is not in docs/AUDIT.md", k)
		}
	}
	if len(seen) != 30 {
		t.Errorf("%d fault kinds; a new kind needs a test that triggers it and a row in docs/AUDIT.md", len(seen))
	}
}
