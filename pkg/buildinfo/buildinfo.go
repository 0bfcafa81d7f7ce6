// Package buildinfo holds what the binaries were built from, stamped at
// build time (Makefile, packaging/package.mk: -ldflags "-X
// ...buildinfo.Version=... -X ...Revision=... -X ...Branch=..."), in the
// fields of github.com/prometheus/common/version, which init fills in from
// here: `xlb --version` prints version.Print's text and xlb_build_info
// carries the labels of client_golang's version collector (version,
// revision, branch, goversion, goos, goarch, tags).
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/common/version"
)

// Version is the release version (git describe), "dev" when not stamped.
var Version = "dev"

// Revision is the VCS commit, read from the Go build info when not
// stamped; UnknownRevision when neither says.
var Revision = ""

// Branch is the VCS branch built from; UnknownBranch when not stamped
// (the Go build info does not record it).
var Branch = ""

// BuildUser and BuildDate say who built the binary and when (user@host,
// RFC 3339) when stamped, Unknown otherwise (the package builds leave them
// out: reproducible builds).
var (
	BuildUser = Unknown
	BuildDate = Unknown
)

// GoVersion is the Go release the binary was built with (runtime.Version).
var GoVersion = runtime.Version()

// UnknownRevision is Revision when the build knows no commit.
const UnknownRevision = "unknown"

// UnknownBranch is Branch when the build was not stamped with one.
const UnknownBranch = "unknown"

// Unknown is BuildUser and BuildDate when not stamped.
const Unknown = "unknown"

func init() {
	if Revision == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					Revision = s.Value
				}
			}
		}
	}
	if Revision == "" {
		Revision = UnknownRevision
	}
	if Branch == "" {
		Branch = UnknownBranch
	}
	version.Version, version.Revision, version.Branch = Version, Revision, Branch
	version.BuildUser, version.BuildDate, version.GoVersion = BuildUser, BuildDate, GoVersion
}

// Print is the --version text of program, prometheus/common/version's
// layout:
//
//	xlb, version 1.4.0 (branch: main, revision: 8cd3c70...)
//	  build user:       builder@ci
//	  build date:       2026-12-02T07:00:00Z
//	  go version:       go1.26.8
//	  platform:         linux/amd64
//	  tags:             unknown
func Print(program string) string { return version.Print(program) }

// Tags is the Go build tags the binary was built with (version.GetTags),
// "unknown" when the build info does not record them.
func Tags() string { return version.GetTags() }
