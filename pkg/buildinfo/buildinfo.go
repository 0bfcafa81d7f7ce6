// Package buildinfo holds the version stamped into the binaries at build
// time (Makefile: -ldflags "-X ...Version=... -X ...Revision=...").
package buildinfo

import "runtime/debug"

// Version is the release version (git describe), "dev" when not stamped.
var Version = "dev"

// Revision is the VCS commit, read from the Go build info when not
// stamped; UnknownRevision when neither says.
var Revision = ""

// UnknownRevision is Revision when the build knows no commit.
const UnknownRevision = "unknown"

func init() {
	if Revision != "" {
		return
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				Revision = s.Value
			}
		}
	}
	if Revision == "" {
		Revision = UnknownRevision
	}
}
