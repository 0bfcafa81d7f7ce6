package archrules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/xlbproject/xlb/"

// pkg is one package of the tree: its non-test files, parsed.
type pkg struct {
	dir     string // relative to the module root, e.g. "pkg/status"
	files   map[string]*ast.File
	imports map[string]string // import path -> local name, over all files
	types   map[string]bool   // top-level type names it declares
}

// internal reports the package's imports of this module, relative paths.
func (p *pkg) internal() []string {
	var out []string
	for im := range p.imports {
		if rel, ok := strings.CutPrefix(im, module); ok {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

// tree parses every non-test Go file under cmd, pkg and internal (the
// generated bindings included: they declare types).
func tree(t *testing.T) map[string]*pkg {
	t.Helper()
	out := map[string]*pkg{}
	fset := token.NewFileSet()
	root := filepath.Join("..", "..")
	for _, top := range []string{"cmd", "pkg", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			dir := filepath.ToSlash(rel)
			p := out[dir]
			if p == nil {
				p = &pkg{dir: dir, files: map[string]*ast.File{}, imports: map[string]string{}, types: map[string]bool{}}
				out[dir] = p
			}
			p.files[filepath.ToSlash(path)] = f
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				name := filepath.Base(path)
				if im.Name != nil {
					name = im.Name.Name
				}
				p.imports[path] = name
			}
			for _, decl := range f.Decls {
				if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.TYPE {
					for _, s := range g.Specs {
						p.types[s.(*ast.TypeSpec).Name.Name] = true
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) < 15 {
		t.Fatalf("found only %d packages; run from internal/archrules", len(out))
	}
	return out
}

// within reports whether dir is one of dirs or below one of them.
func within(dir string, dirs ...string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return dir == d || strings.HasPrefix(dir, d+"/") })
}

// calls visits every call of a method or function named by a selector in
// p's files: x.Name(...).
func (p *pkg) calls(visit func(file string, x ast.Expr, name string)) {
	for path, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if s, ok := c.Fun.(*ast.SelectorExpr); ok {
					visit(path, s.X, s.Sel.Name)
				}
			}
			return true
		})
	}
}

// The read side: what operators see is built from the snapshot only.
var readSide = map[string][]string{
	// package: the module packages it may import
	"cmd/xlbctl":      {"internal/cliusage", "pkg/buildinfo", "pkg/config", "pkg/status/api"},
	"pkg/status":      {"pkg/buildinfo", "pkg/snapshot", "pkg/status/api", "pkg/weblisten"},
	"pkg/status/api":  {},
	"pkg/metrics":     {"pkg/buildinfo", "pkg/dataplane", "pkg/maintenance", "pkg/snapshot", "pkg/status/api", "pkg/weblisten"},
	"pkg/snapshot":    {"pkg/backend", "pkg/config", "pkg/configwatch", "pkg/dataplane", "pkg/maintenance", "pkg/sched", "pkg/status/api"},
	"pkg/configwatch": {"pkg/config"},
}

// Only pkg/dataplane talks to the kernel's BPF interface (and the test
// network's XDP_PASS helper loads its own program; internal/genlimits and
// internal/gentypes read the BPF object's BTF to write Go code).
func TestOnlyDataplaneLoadsBPF(t *testing.T) {
	for _, p := range tree(t) {
		if within(p.dir, "pkg/dataplane", "internal/testnet", "internal/genlimits", "internal/gentypes") {
			continue
		}
		for im := range p.imports {
			if strings.HasPrefix(im, "github.com/cilium/ebpf") {
				t.Errorf("%s imports %s: only pkg/dataplane may use cilium/ebpf", p.dir, im)
			}
		}
	}
}

// The leaves: the config schema checks a file against the data path's
// limits without importing the data path or the maintenance loop; the
// limits import nothing of the module; pinned state (reading pins,
// migrating them between layouts) knows the pinned structs, not the data
// path's code.
var leaves = map[string][]string{
	// package: the module packages it may import
	"pkg/config":         {"pkg/limits", "pkg/sched"},
	"pkg/limits":         {},
	"pkg/sched":          {"pkg/limits"},
	"pkg/dataplane/pins": {"pkg/limits"},
}

// pkg/config, pkg/limits, pkg/sched and pkg/dataplane/pins import only
// what their row of leaves lists.
func TestLeafImports(t *testing.T) {
	pkgs := tree(t)
	for dir, allowed := range leaves {
		p := pkgs[dir]
		if p == nil {
			t.Errorf("%s: no such package (update leaves)", dir)
			continue
		}
		for _, im := range p.internal() {
			if !slices.Contains(allowed, im) {
				t.Errorf("%s imports %s; it may import only %v (docs/ARCHITECTURE.md)", dir, im, allowed)
			}
		}
	}
}

// Status, metrics, the snapshot, the config watch and xlbctl import only
// what their row of readSide lists.
func TestReadSideImports(t *testing.T) {
	pkgs := tree(t)
	for dir, allowed := range readSide {
		p := pkgs[dir]
		if p == nil {
			t.Errorf("%s: no such package (update readSide)", dir)
			continue
		}
		for _, im := range p.internal() {
			if !slices.Contains(allowed, im) {
				t.Errorf("%s imports %s; it may import only %v (docs/ARCHITECTURE.md)", dir, im, allowed)
			}
		}
	}
}

// The read side uses the data path's and the maintenance loop's types,
// never their functions, and takes no callback that would produce their
// values: status and metrics never touch BPF maps (DESIGN §8).
func TestReadSideUsesTypesOnly(t *testing.T) {
	pkgs := tree(t)
	producers := []string{"pkg/dataplane", "pkg/maintenance"}
	for dir := range readSide {
		p := pkgs[dir]
		for _, prod := range producers {
			local, ok := p.imports[module+prod]
			if !ok {
				continue
			}
			types := pkgs[prod].types
			p.calls(func(file string, x ast.Expr, name string) {
				if id, ok := x.(*ast.Ident); ok && id.Name == local && !types[name] {
					t.Errorf("%s calls %s.%s: the read side uses %s's types only", file, local, name, prod)
				}
			})
			for path, f := range p.files {
				// function types in type positions (fields, parameters,
				// interface methods, type declarations): not the
				// signature of a declared function or a literal
				own := map[*ast.FuncType]bool{}
				ast.Inspect(f, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.FuncDecl:
						own[n.Type] = true
					case *ast.FuncLit:
						own[n.Type] = true
					}
					return true
				})
				ast.Inspect(f, func(n ast.Node) bool {
					ft, ok := n.(*ast.FuncType)
					if !ok || own[ft] || ft.Results == nil {
						return true
					}
					ast.Inspect(ft.Results, func(m ast.Node) bool {
						if s, ok := m.(*ast.SelectorExpr); ok {
							if id, ok := s.X.(*ast.Ident); ok && id.Name == local {
								t.Errorf("%s: a function type returning %s.%s: the read side takes the snapshot, not a source of %s values", path, local, s.Sel.Name, prod)
							}
						}
						return true
					})
					return true
				})
			}
		}
	}
}

// Only the instance, the process and the maintenance loop hold the data
// path.
func TestWhoHoldsTheDataplane(t *testing.T) {
	for _, p := range tree(t) {
		if within(p.dir, "pkg/dataplane", "pkg/instance", "pkg/daemon", "pkg/maintenance") {
			continue
		}
		local, ok := p.imports[module+"pkg/dataplane"]
		if !ok {
			continue
		}
		for path, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				if s, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := s.X.(*ast.Ident); ok && id.Name == local && (s.Sel.Name == "Dataplane" || s.Sel.Name == "Load") {
						t.Errorf("%s refers to %s.%s: only pkg/instance, pkg/daemon and pkg/maintenance hold the data path", path, local, s.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// pkg/daemon's publish.go is the only snapshot writer.
func TestOnlyPublishWrites(t *testing.T) {
	writers := []string{"Publish", "Update", "AddSample", "SetCounters"}
	for _, p := range tree(t) {
		if _, ok := p.imports[module+"pkg/snapshot"]; !ok || p.dir == "pkg/snapshot" {
			continue
		}
		p.calls(func(file string, _ ast.Expr, name string) {
			if slices.Contains(writers, name) && file != "../../pkg/daemon/publish.go" {
				t.Errorf("%s calls %s in a package that imports pkg/snapshot: pkg/daemon/publish.go is the only snapshot writer", file, name)
			}
		})
	}
}

// Only pkg/maintenance deletes flow entries, and only through the reaper,
// which re-checks each entry in the kernel. The raw map and program
// handles and the direct flow writes exist for tests and the packet
// fixtures (pkg/dataplane/dptest) only.
func TestOnlyTheReaperDeletes(t *testing.T) {
	raw := []string{"TakeFlow", "PutFlow", "PutFlows", "FlowMap", "SNATCursorMap", "Program"}
	for _, p := range tree(t) {
		if within(p.dir, "pkg/dataplane") {
			continue
		}
		p.calls(func(file string, _ ast.Expr, name string) {
			switch {
			case slices.Contains(raw, name):
				t.Errorf("%s calls %s: raw flow-map and program access is for tests only", file, name)
			case name == "Reap" && p.dir != "pkg/maintenance":
				t.Errorf("%s calls Reap: only pkg/maintenance deletes flow entries", file)
			}
		})
	}
}

// Data flows one way: only cmd/xlb imports the process, and production
// code never imports the test harnesses (test/, internal/testnet,
// internal/kubefake, internal/webtest, dptest, the benchmark floor,
// pkg/bgp/birdtest).
func TestImportDirection(t *testing.T) {
	harnesses := []string{"internal/testnet", "internal/kubefake", "pkg/dataplane/dptest", "pkg/bgp/birdtest", "internal/webtest"}
	for _, p := range tree(t) {
		for _, im := range p.internal() {
			switch {
			case im == "pkg/daemon" && p.dir != "cmd/xlb":
				t.Errorf("%s imports pkg/daemon: only cmd/xlb may", p.dir)
			case (within(im, "test") || within(im, harnesses...) || within(im, "pkg/dataplane/floor")) && !within(p.dir, harnesses...):
				t.Errorf("%s imports the test harness %s", p.dir, im)
			}
		}
	}
}
