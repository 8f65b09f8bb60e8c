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

// TestLint_Purity enforces ARCHITECTURE.md's rule for this package: the
// gates are pure. Imports are the standard library, uuid and events (whose
// DecodeJSON is the strict decoder of command data); no clock, randomness,
// file system, network or process access.
func TestLint_Purity(t *testing.T) {
	allowedModules := map[string]bool{"github.com/google/uuid": true, "github.com/greffe/greffe/events": true}
	bannedImports := []string{"os", "net", "math/rand", "crypto/rand", "syscall", "io/ioutil", "unsafe", "os/exec", "log", "log/slog", "runtime", "plugin"}
	bannedCalls := map[string][]string{
		"time": {"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"},
		"uuid": {"New", "NewRandom", "NewString", "NewUUID", "NewV7", "Must"},
	}
	fset, files := sourceFiles(t)
	for name, f := range files {
		local := map[string]string{} // local name -> import path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			if strings.Contains(first, ".") && !allowedModules[p] {
				t.Errorf("%s imports %s: only the standard library, uuid and events are allowed", name, p)
			}
			for _, b := range bannedImports {
				if p == b || strings.HasPrefix(p, b+"/") {
					t.Errorf("%s imports %s: the gates do no I/O, read no clock and draw no randomness", name, p)
				}
			}
			ln := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				ln = imp.Name.Name
			}
			local[ln] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			path := local[id.Name]
			key := path[strings.LastIndex(path, "/")+1:]
			for _, banned := range bannedCalls[key] {
				if sel.Sel.Name == banned && (path == "time" || path == "github.com/google/uuid") {
					t.Errorf("%s: %s.%s: time comes in the command and ids from the commands layer", fset.Position(sel.Pos()), id.Name, banned)
				}
			}
			return true
		})
	}
}

// TestLint_FileNames: no catch-all files (STYLE.md).
func TestLint_FileNames(t *testing.T) {
	_, files := sourceFiles(t)
	for name := range files {
		base := strings.TrimSuffix(name, ".go")
		for _, banned := range []string{"util", "utils", "common", "helpers", "misc", "shared", "base", "types"} {
			if base == banned {
				t.Errorf("%s: name files for what they hold", name)
			}
		}
	}
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
		if n == "lint_test.go" {
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
