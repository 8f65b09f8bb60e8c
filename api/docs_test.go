package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// notSent are codes declared but never answered by the HTTP API, so not in
// docs/API.md: stream_not_found (the log answers not_found; clients match
// both) and method_not_allowed (the mux answers 405 itself).
var notSent = map[string]bool{"stream_not_found": true, "method_not_allowed": true}

// TestDocs_ErrorCodes: every code the log, the HTTP layer and the cluster
// (wire) and the commands layer declare (their Code… constants) is in
// docs/API.md, so that a new code cannot ship undocumented.
func TestDocs_ErrorCodes(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, file := range []string{"../events/errors.go", "../wire/errors.go", "../wire/cluster.go", "../commands/errors.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue // iota: not a code
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !strings.HasPrefix(name.Name, "Code") || !ok || lit.Kind != token.STRING {
						continue
					}
					code, _ := strconv.Unquote(lit.Value)
					n++
					if !notSent[code] && !strings.Contains(string(doc), "`"+code+"`") {
						t.Errorf("%s: %s (%q) is not in docs/API.md", file, name.Name, code)
					}
				}
			}
		}
	}
	if n < 40 {
		t.Fatalf("found only %d codes: the parse missed them", n)
	}
}
