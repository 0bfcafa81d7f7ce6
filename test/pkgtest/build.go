// Package pkgtest builds XLB's deb and rpm packages the way `make package`
// does (it runs that target) and inspects them: file lists, modes,
// conffiles, maintainer scripts, the systemd unit. The booted-host tests in
// test/hostlab install what Build returns.
package pkgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Packages is one `make package` result.
type Packages struct {
	Version string // package version without the release ("-1")
	Deb     string // absolute path of the .deb
	RPM     string // absolute path of the .rpm
}

// ModuleRoot is the repository root (where the Makefile and nfpm.yaml are).
func ModuleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("pkgtest: cannot locate the module root")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Build runs `make package PKG_VERSION=version PKG_OUT=dir` in the
// repository (an empty version means the make default: packaging/version.sh)
// and returns the two packages it produced in dir. The first call on a
// machine also builds the pinned nfpm into .cache/bin (about a minute).
func Build(dir, version string) (Packages, error) {
	root, err := ModuleRoot()
	if err != nil {
		return Packages{}, err
	}
	return BuildTree(root, dir, version)
}

// BuildTree is Build in another source tree (for example an older release
// exported with git archive), with extra make variables ("NAME=value"),
// such as NFPM=path to reuse this repository's nfpm.
func BuildTree(root, dir, version string, vars ...string) (Packages, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Packages{}, err
	}
	args := []string{"--no-print-directory", "-C", root, "package", "PKG_OUT=" + dir}
	if version != "" {
		args = append(args, "PKG_VERSION="+version)
	}
	args = append(args, vars...)
	cmd := exec.Command("make", args...)
	// A caller running under make (make test) must not hand its jobserver
	// or variables to this make.
	cmd.Env = withoutMakeEnv(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		return Packages{}, fmt.Errorf("make package: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "xlb_*.deb"))
	rpms, _ := filepath.Glob(filepath.Join(dir, "xlb-*.rpm"))
	if len(debs) != 1 || len(rpms) != 1 {
		return Packages{}, fmt.Errorf("make package: want one .deb and one .rpm in %s, found %v and %v", dir, debs, rpms)
	}
	p := Packages{Deb: debs[0], RPM: rpms[0]}
	// xlb_VERSION-1_ARCH.deb
	name := strings.TrimPrefix(filepath.Base(p.Deb), "xlb_")
	if i := strings.LastIndex(name, "-"); i > 0 {
		p.Version = name[:i]
	}
	if version != "" && p.Version != version {
		return Packages{}, fmt.Errorf("make package: built version %q, want %q", p.Version, version)
	}
	return p, nil
}

func withoutMakeEnv(env []string) []string {
	var out []string
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		switch name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GNUMAKEFLAGS":
			continue
		}
		out = append(out, e)
	}
	return out
}
