package api

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPI_Descriptions: every property of every schema the document
// holds — each command's data, each domain event's data, the types they
// hold and the request and response bodies — has a description, taken
// from the Go field's doc comment. A field added without a comment fails
// here once the notes are regenerated (-update), so the generated tables
// of docs/COMMANDS.md never have an empty "meaning".
func TestOpenAPI_Descriptions(t *testing.T) {
	doc, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var missing []string
	n := 0
	for name, s := range d.Components.Schemas {
		for f, p := range s.Properties {
			n++
			if desc, _ := p["description"].(string); strings.TrimSpace(desc) == "" {
				missing = append(missing, name+"."+f)
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s has no description: write a doc comment on its Go field (what it is, its unit, when it may be empty), then go test ./api -run TestOpenAPI -update", m)
	}
	// The commands and event types alone hold hundreds of fields: a
	// document that lost its schemas must not pass for described.
	if n < 600 {
		t.Fatalf("only %d properties in the document", n)
	}
	for _, name := range []string{"SubmitMission", "MissionSubmitted", "SettleInference", "Receipt"} {
		if len(d.Components.Schemas[name].Properties) == 0 {
			t.Errorf("no schema %s with properties", name)
		}
	}
}
