package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite api/openapi_notes.json, docs/openapi.json and docs/COMMANDS.md's generated part")

// TestOpenAPI_Fresh: the embedded notes are what the source says, the
// checked-in docs/openapi.json is what the types generate with them, and
// the generated part of docs/COMMANDS.md is what the document says. Any
// difference fails; `go test ./api -run TestOpenAPI -update` rewrites the
// three (review the diff).
func TestOpenAPI_Fresh(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	notes := extractNotes(t, root)
	nb, err := json.MarshalIndent(notes, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	nb = append(nb, '\n')
	doc, err := BuildOpenAPI(notes)
	if err != nil {
		t.Fatal(err)
	}
	cmdPath := filepath.Join(root, "docs", "COMMANDS.md")
	oldCmds, err := os.ReadFile(cmdPath)
	if err != nil {
		t.Fatal(err)
	}
	newCmds, err := commandsDoc(oldCmds, doc, filepath.Join(root, "docs", "GATES.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		want []byte
	}{
		{"openapi_notes.json", nb},
		{filepath.Join(root, "docs", "openapi.json"), doc},
		{cmdPath, newCmds},
	} {
		if *update {
			if err := os.WriteFile(f.path, f.want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is stale: run go test ./api -run TestOpenAPI -update and review the diff\n%s", f.path, firstDiff(got, f.want))
		}
	}
}

// firstDiff shows the first line that differs.
func firstDiff(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b []byte
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if !bytes.Equal(a, b) {
			return "line " + itoaTest(i+1) + ":\n  have: " + string(a) + "\n  want: " + string(b)
		}
	}
	return ""
}

func itoaTest(i int) string { b, _ := json.Marshal(i); return string(b) }
