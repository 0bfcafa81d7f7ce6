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

// file is one non-test Go file of the tree.
type file struct {
	pkg     string // directory relative to the module root, e.g. "pkg/status"
	path    string
	imports []string
	ast     *ast.File
}

// sources parses every non-test, non-generated Go file under cmd, pkg and
// internal.
func sources(t *testing.T) []file {
	t.Helper()
	var out []file
	fset := token.NewFileSet()
	for _, root := range []string{"cmd", "pkg", "internal"} {
		err := filepath.WalkDir(filepath.Join("..", "..", root), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_bpfel.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(filepath.Join("..", ".."), filepath.Dir(path))
			fl := file{pkg: filepath.ToSlash(rel), path: path, ast: f}
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				fl.imports = append(fl.imports, p)
			}
			out = append(out, fl)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) < 50 {
		t.Fatalf("found only %d source files; run from internal/archrules", len(out))
	}
	return out
}

// within reports whether pkg is one of dirs or below one of them.
func within(pkg string, dirs ...string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return pkg == d || strings.HasPrefix(pkg, d+"/") })
}

// selectors lists pkgName.Name selector expressions in f whose package
// identifier is local (the import's name in f).
func selectors(f *ast.File, local string) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok && id.Name == local {
				out = append(out, s.Sel.Name)
			}
		}
		return true
	})
	return out
}

// Only pkg/dataplane talks to the kernel's BPF interface (and the test
// network's XDP_PASS helper loads its own program).
func TestOnlyDataplaneLoadsBPF(t *testing.T) {
	for _, f := range sources(t) {
		if within(f.pkg, "pkg/dataplane", "internal/testnet") {
			continue
		}
		for _, im := range f.imports {
			if strings.HasPrefix(im, "github.com/cilium/ebpf") {
				t.Errorf("%s imports %s: only pkg/dataplane may use cilium/ebpf", f.path, im)
			}
		}
	}
}

// Only the instance, the process and the maintenance loop hold the data
// path: status, metrics and the rest read the snapshot (DESIGN §8).
func TestWhoHoldsTheDataplane(t *testing.T) {
	for _, f := range sources(t) {
		if within(f.pkg, "pkg/dataplane", "pkg/instance", "pkg/daemon", "pkg/maintenance") {
			continue
		}
		if slices.Contains(selectors(f.ast, "dataplane"), "Dataplane") {
			t.Errorf("%s refers to dataplane.Dataplane: only pkg/instance, pkg/daemon and pkg/maintenance may hold the data path", f.path)
		}
	}
}

// pkg/daemon (publish.go) is the only snapshot writer.
func TestOnlyTheDaemonPublishes(t *testing.T) {
	for _, f := range sources(t) {
		if within(f.pkg, "pkg/snapshot") {
			continue
		}
		writes := false
		ast.Inspect(f.ast, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if s, ok := c.Fun.(*ast.SelectorExpr); ok && (s.Sel.Name == "Publish" || s.Sel.Name == "Update") && slices.Contains(f.imports, module+"pkg/snapshot") {
					writes = true
				}
			}
			return true
		})
		if writes && !strings.HasSuffix(f.path, filepath.Join("pkg", "daemon", "publish.go")) {
			t.Errorf("%s calls Publish or Update and imports pkg/snapshot: pkg/daemon/publish.go is the only snapshot writer", f.path)
		}
	}
}

// Data flows one way: nothing imports the process, and production code
// never imports the test harnesses.
func TestImportDirection(t *testing.T) {
	for _, f := range sources(t) {
		for _, im := range f.imports {
			rel, ok := strings.CutPrefix(im, module)
			if !ok {
				continue
			}
			switch {
			case rel == "pkg/daemon" && f.pkg != "cmd/xlb":
				t.Errorf("%s imports pkg/daemon: only cmd/xlb may", f.path)
			case (within(rel, "test") || rel == "internal/testnet") && !within(f.pkg, "internal/testnet", "pkg/dataplane/dptest"):
				t.Errorf("%s imports the test harness %s", f.path, rel)
			case within(f.pkg, "pkg/status", "pkg/metrics", "cmd/xlbctl") && within(rel, "pkg/instance", "pkg/hostnet", "pkg/backend"):
				t.Errorf("%s imports %s: status, metrics and xlbctl read the snapshot or the status API only", f.path, rel)
			}
		}
	}
}

// Only pkg/maintenance deletes flow entries: through the reaper (Reap),
// which re-checks every entry in the kernel; TakeFlow is for tests.
func TestOnlyMaintenanceDeletes(t *testing.T) {
	for _, f := range sources(t) {
		if within(f.pkg, "pkg/dataplane", "pkg/maintenance") {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if s, ok := c.Fun.(*ast.SelectorExpr); ok && (s.Sel.Name == "Reap" || s.Sel.Name == "TakeFlow") {
					t.Errorf("%s calls %s: only pkg/maintenance deletes flow entries", f.path, s.Sel.Name)
				}
			}
			return true
		})
	}
}
