package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/pkg/buildinfo"
)

// singleDash finds a flag spelled with one dash ("-config"), as Go's flag
// package prints them; only -h (beside --help) may appear.
var singleDash = regexp.MustCompile(`(^|[\s\[,(])-[a-gi-z][\w.-]*`)

// --help prints the usage on stdout with the --flag spelling and exits 0,
// for xlb and every subcommand; nothing goes to stderr.
func TestHelpOnStdout(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		flags []string
	}{
		{[]string{"--help"}, []string{"--config FILE", "--log.level LEVEL", "--log.format FORMAT", "--version"}},
		{[]string{"-h"}, []string{"--config FILE"}},
		{[]string{"help"}, []string{"--log.level LEVEL"}},
		{[]string{"check", "--help"}, []string{"--config FILE", "--env-file FILE"}},
		{[]string{"reload", "--help"}, []string{"--pid PID", "--timeout DURATION"}},
		{[]string{"mount-bpffs", "--help"}, []string{"--config FILE"}},
		{[]string{"detach", "--help"}, []string{"--config FILE", "--state-dir DIR"}},
		{[]string{"capabilities", "--help"}, nil},
	} {
		var out, errs bytes.Buffer
		code := run(tc.args, &out, &errs)
		help := out.String()
		if code != 0 || errs.Len() != 0 || !strings.HasPrefix(help, "Usage:\n  xlb") || !strings.Contains(help, "  -h, --help\n") {
			t.Errorf("xlb %s: exit %d, stderr %q, stdout\n%s", strings.Join(tc.args, " "), code, errs.String(), help)
			continue
		}
		for _, f := range tc.flags {
			if !strings.Contains(help, "\n  "+f+"\n") {
				t.Errorf("xlb %s: no line %q in\n%s", strings.Join(tc.args, " "), f, help)
			}
		}
		if m := singleDash.FindString(help); m != "" {
			t.Errorf("xlb %s: single-dash flag %q in\n%s", strings.Join(tc.args, " "), m, help)
		}
		// The old spellings stay accepted but are not shown.
		if strings.Contains(help, "log-level") || strings.Contains(help, "log-format") {
			t.Errorf("xlb %s: an alias is listed:\n%s", strings.Join(tc.args, " "), help)
		}
	}
}

// A usage error names the flag with two dashes on stderr and exits 2.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "xlb: flag provided but not defined: --bogus\n"},
		{[]string{"--config"}, "xlb: flag needs an argument: --config\n"},
		{[]string{"stray"}, "xlb: unexpected argument \"stray\"\n"},
		{[]string{"--log.level", "loud"}, "xlb: --log.level: want debug, info, warn or error, got \"loud\"\n"},
		{[]string{"--log.format", "xml"}, "xlb: --log.format: want logfmt or json, got \"xml\"\n"},
		{[]string{"--log-format", "xml"}, "xlb: --log.format: want logfmt or json, got \"xml\"\n"},
		{[]string{"check", "a", "b"}, "xlb check: unexpected argument \"b\"\n"},
		{[]string{"check", "--config", "a", "b"}, "xlb check: unexpected argument \"b\" (the config is --config a)\n"},
		{[]string{"reload", "--pid", "x"}, "xlb reload: invalid value \"x\" for flag --pid: parse error\n"},
		{[]string{"reload", "--pid", "1", "extra"}, "xlb reload: unexpected argument \"extra\"\n"},
		{[]string{"capabilities", "x"}, "xlb capabilities: unexpected argument \"x\"\n"},
	} {
		var out, errs bytes.Buffer
		code := run(tc.args, &out, &errs)
		first, rest, _ := strings.Cut(errs.String(), "\n")
		if code != 2 || first+"\n" != tc.want || !strings.HasPrefix(rest, "Run 'xlb") || out.Len() != 0 {
			t.Errorf("xlb %s: exit %d, stdout %q, stderr %q; want exit 2, %q", strings.Join(tc.args, " "), code, out.String(), errs.String(), tc.want)
		}
	}
}

// --log.level and --log.format are node_exporter's; --log-level and
// --log-format, the old spellings, set the same values (a hot upgrade
// runs the new binary with the old process's arguments).
func TestLogFlagsAndAliases(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		level, format string
	}{
		{nil, "info", "logfmt"},
		{[]string{"--log.level=debug", "--log.format=json"}, "debug", "json"},
		{[]string{"--log-level", "warn", "--log-format", "text"}, "warn", "text"},
	} {
		var f daemonFlags
		if code, done := daemonCommand(&f).parse(tc.args, 0, &bytes.Buffer{}, &bytes.Buffer{}); done {
			t.Fatalf("%v: exit %d", tc.args, code)
		}
		if f.level != tc.level || f.format != tc.format {
			t.Errorf("%v: level %q format %q, want %q %q", tc.args, f.level, f.format, tc.level, tc.format)
		}
	}
}

// --version prints prometheus/common/version's text: version, branch,
// revision, Go version.
func TestVersion(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"--version"}, &out, &errs); code != 0 || errs.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs.String())
	}
	first := "xlb, version " + buildinfo.Version + " (branch: " + buildinfo.Branch + ", revision: " + buildinfo.Revision + ")\n"
	if !strings.HasPrefix(out.String(), first) || !strings.Contains(out.String(), "\n  go version:       "+buildinfo.GoVersion+"\n") {
		t.Errorf("--version:\n%s", out.String())
	}
}
