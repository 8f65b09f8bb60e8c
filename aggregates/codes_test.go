package aggregates

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

// sourceFiles parses the package's non-test files.
func sourceFiles(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = f
	}
	if len(files) == 0 {
		t.Fatal("no source files")
	}
	return fset, files
}

// codes returns every refusal code constant (Code…) declared in the
// package's source, by constant name.
func codes(t *testing.T) map[string]string {
	_, files := sourceFiles(t)
	out := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						v, _ := strconv.Unquote(lit.Value)
						out[n.Name] = v
					}
				}
			}
		}
	}
	return out
}

// TestGates_Codes: every code is unique, snake_case, listed in
// docs/GATES.md and asserted by a test.
func TestGates_Codes(t *testing.T) {
	cs := codes(t)
	if len(cs) < 60 {
		t.Fatalf("found only %d codes", len(cs))
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "GATES.md"))
	if err != nil {
		t.Fatal(err)
	}
	var tests strings.Builder
	names, _ := filepath.Glob("*_test.go")
	for _, n := range names {
		if n == "codes_test.go" {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		tests.Write(b)
	}
	byValue := map[string]string{}
	for name, v := range cs {
		if other, dup := byValue[v]; dup {
			t.Errorf("%s and %s share the code %q: codes are never reused", name, other, v)
		}
		byValue[v] = name
		for _, c := range v {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
				t.Errorf("%s = %q is not snake_case", name, v)
				break
			}
		}
		if !strings.Contains(string(doc), "`"+v+"`") {
			t.Errorf("%s (%q) is not in docs/GATES.md", name, v)
		}
		if !strings.Contains(tests.String(), name) {
			t.Errorf("%s (%q) is asserted by no test", name, v)
		}
	}
}
