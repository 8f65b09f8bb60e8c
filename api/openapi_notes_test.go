package api

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"

	"github.com/greffe/greffe/aggregates"
)

// Extracting openapi_notes.json from the source (openapi.go): the Go doc
// comments of the reflected types, every error code with its constant's
// comment, and what each command's decider may refuse with and append,
// read from the deciders' code by a static walk (commandNotes).

// module is the module's import path.
const module = "github.com/greffe/greffe"

// codeFiles are the packages whose Code… constants are the API's codes.
var codeDirs = []string{"events", "wire", "commands", "projections", "replicator", "aggregates"}

// extractNotes reads the notes from the source tree; root is the module's
// folder.
func extractNotes(t *testing.T, root string) OpenAPINotes {
	t.Helper()
	n := OpenAPINotes{Comments: map[string]string{}, Codes: map[string]string{}}
	r := &jsonschema.Reflector{}
	for _, d := range []string{"aggregates", "events", "wire", "commands", "api"} {
		if err := addComments(r, root, d); err != nil {
			t.Fatal(err)
		}
	}
	// Keep only the comments the document reads.
	used := map[string]bool{}
	full := OpenAPINotes{Comments: r.CommentMap, Codes: map[string]string{}, Commands: map[string]CommandNotes{}}
	if _, err := buildOpenAPI(full, func(k string) { used[k] = true }); err != nil {
		t.Fatal(err)
	}
	for k, v := range r.CommentMap {
		if used[k] && v != "" {
			n.Comments[k] = v
		}
	}
	for _, d := range codeDirs {
		if err := addCodes(n.Codes, filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	if len(n.Codes) < 100 {
		t.Fatalf("found only %d codes: the parse missed them", len(n.Codes))
	}
	n.Commands = commandNotes(t, root)
	for name, cn := range n.Commands {
		// Codes the walk finds that are not answered (admission screens,
		// recorded in AdmissionDecided) are not the command's refusals.
		cn.Codes = slices.DeleteFunc(cn.Codes, func(c string) bool { _, ok := n.Codes[c]; return !ok })
		n.Commands[name] = cn
	}
	return n
}

// addComments adds the doc comments of one package folder (not its
// subfolders) to r's comment map, keyed by the package's import path.
func addComments(r *jsonschema.Reflector, root, dir string) error {
	tmp, err := os.MkdirTemp("", "greffe-comments")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// AddGoComments walks subfolders too and keys comments by base joined
	// with the folder walked: copy the package's non-test files alone
	// under the folder name it is imported by.
	dst := filepath.Join(tmp, dir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	if err := os.Chdir(tmp); err != nil {
		return err
	}
	defer os.Chdir(wd)
	return r.AddGoComments(module, dir, jsonschema.WithFullComment())
}

// addCodes adds the string constants named Code… of the package in dir,
// each with its comment ("CodeX: " dropped). Admission screen codes are
// recorded in AdmissionDecided, never answered: left out.
func addCodes(codes map[string]string, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST || strings.Contains(g.Doc.Text(), "Screen failure codes") {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !strings.HasPrefix(name.Name, "Code") {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue // an alias of another package's code
					}
					code, _ := strconv.Unquote(lit.Value)
					doc := vs.Doc.Text()
					if doc == "" {
						doc = vs.Comment.Text()
					}
					if doc == "" && len(g.Specs) == 1 {
						doc = g.Doc.Text()
					}
					doc = strings.TrimPrefix(strings.TrimSpace(doc), name.Name+":")
					doc = strings.Join(strings.Fields(doc), " ")
					if old, ok := codes[code]; !ok || old == "" {
						codes[code] = doc
					}
				}
			}
		}
	}
	return nil
}

// commandNotes reads, for each command of the catalogue, the codes and
// event types its Decide may produce: every Code… constant referenced by
// the code Decide reaches (functions and concrete methods of aggregates,
// and the events package's), and every Type… constant given as the Type
// of a NewEvent literal in it. It over-approximates (a branch that cannot
// run still counts); TestOpenAPI_CommandNotesObserved (fixtures) checks
// that every refusal and event the fixtures produce is listed.
func commandNotes(t *testing.T, root string) map[string]CommandNotes {
	t.Helper()
	fset := token.NewFileSet()
	pkg, info, files := typeCheck(t, fset, filepath.Join(root, "aggregates"))
	bodies := map[*types.Func]*ast.BlockStmt{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				if fn, ok := info.Defs[fd.Name].(*types.Func); ok {
					bodies[fn] = fd.Body
				}
			}
		}
	}
	out := map[string]CommandNotes{}
	for _, spec := range aggregates.Catalogue() {
		obj := pkg.Scope().Lookup(strings.TrimPrefix(fmt.Sprintf("%T", spec.New()), "*aggregates."))
		if obj == nil {
			t.Fatalf("%s: no type in aggregates", spec.Name)
		}
		ms := types.NewMethodSet(types.NewPointer(obj.Type()))
		sel := ms.Lookup(pkg, "Decide")
		if sel == nil {
			t.Fatalf("%s: no Decide method", spec.Name)
		}
		codes, evs := map[string]bool{}, map[string]bool{}
		seen := map[*types.Func]bool{}
		queue := []*types.Func{sel.Obj().(*types.Func)}
		for len(queue) > 0 {
			fn := queue[0]
			queue = queue[1:]
			if seen[fn] {
				continue
			}
			seen[fn] = true
			body := bodies[fn.Origin()]
			if body == nil {
				continue
			}
			ast.Inspect(body, func(nd ast.Node) bool {
				switch x := nd.(type) {
				case *ast.Ident:
					switch o := info.Uses[x].(type) {
					case *types.Const:
						if strings.HasPrefix(o.Name(), "Code") && o.Val().Kind() == constant.String {
							codes[constValue(o)] = true
						}
					case *types.Func:
						if o.Pkg() == pkg {
							queue = append(queue, o)
						}
					}
				case *ast.CompositeLit:
					if tv, ok := info.Types[x]; ok && types.TypeString(tv.Type, nil) == module+"/aggregates.NewEvent" {
						for _, el := range x.Elts {
							kv, ok := el.(*ast.KeyValueExpr)
							if !ok {
								continue
							}
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Type" {
								if c, ok := info.Types[kv.Value]; ok && c.Value != nil {
									evs[strings.Trim(c.Value.ExactString(), `"`)] = true
								}
							}
						}
					}
				}
				return true
			})
		}
		cn := CommandNotes{Codes: keysOf(codes), Events: keysOf(evs)}
		out[spec.Name] = cn
	}
	return out
}

func constValue(c *types.Const) string {
	s, _ := strconv.Unquote(c.Val().ExactString())
	return s
}

func keysOf(m map[string]bool) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// typeCheck parses and type-checks the non-test files of the package in
// dir, importing its dependencies from the build cache's export data (go
// list -export), so that calls resolve to their functions and methods.
func typeCheck(t *testing.T, fset *token.FileSet, dir string) (*types.Package, *types.Info, []*ast.File) {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".")
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		p, e, _ := strings.Cut(sc.Text(), "\t")
		exports[p] = e
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		e, ok := exports[path]
		if !ok || e == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(e)
	})
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: imp}).Check(module+"/aggregates", fset, files, info)
	if err != nil {
		t.Fatalf("type-check aggregates: %v", err)
	}
	return pkg, info, files
}

// sortedNames returns m's keys, sorted.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
