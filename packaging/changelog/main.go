// Command changelog turns packaging/changelog.yml into the changelog of one
// package build: the chglog YAML that nfpm renders as the .deb's
// /usr/share/doc/xlb/changelog.Debian.gz and the .rpm's %changelog, whose
// first entry is the version being built (Debian policy 4.4: the newest
// changelog entry names the package's version). packaging/package.mk runs
// it once per `make package`:
//
//	go run ./packaging/changelog -in packaging/changelog.yml -out STAGE/changelog.yml \
//	    -version 1.2.3 -release 1 -date UNIXTIME -packager 'Name <address>'
//
// The rules (Render) are in render.go. It exits 1 with the reason when the
// source is invalid or a release version has no entry, 2 on a usage error.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("changelog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "packaging/changelog.yml", "source changelog `FILE`")
	out := fs.String("out", "", "chglog YAML `FILE` to write for nfpm")
	version := fs.String("version", "", "package `VERSION` without the release (packaging/version.sh)")
	release := fs.String("release", "1", "package `RELEASE` (nfpm.yaml's release)")
	date := fs.Int64("date", 0, "`UNIXTIME` of a snapshot entry (the commit time, SOURCE_DATE_EPOCH)")
	packager := fs.String("packager", "", "`NAME <address>` of a snapshot entry")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || *version == "" || *packager == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "changelog: -out, -version and -packager are required; no arguments")
		return 2
	}
	src, err := os.ReadFile(*in)
	if err != nil {
		fmt.Fprintf(stderr, "changelog: %v\n", err)
		return 1
	}
	entries, err := Parse(src)
	if err != nil {
		fmt.Fprintf(stderr, "changelog: %s: %v\n", *in, err)
		return 1
	}
	build := Build{Version: *version, Release: *release, Date: time.Unix(*date, 0).UTC(), Packager: *packager}
	rendered, err := Render(entries, build)
	if err != nil {
		fmt.Fprintf(stderr, "changelog: %s: %v\n", *in, err)
		return 1
	}
	data, err := Marshal(rendered)
	if err == nil {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "changelog: %v\n", err)
		return 1
	}
	return 0
}
