package cliusage

import (
	"strings"
	"testing"
)

func TestDoubleDash(t *testing.T) {
	for in, want := range map[string]string{
		"flag provided but not defined: -bogus":                   "flag provided but not defined: --bogus",
		`invalid value "x" for flag -log.level: bad`:              `invalid value "x" for flag --log.level: bad`,
		"flag provided but not defined: --bogus":                  "flag provided but not defined: --bogus",
		"--admin: empty URL":                                      "--admin: empty URL",
		`unknown command "status-x"`:                              `unknown command "status-x"`,
		"flag needs an argument: -admin":                          "flag needs an argument: --admin",
		"a-b is not a flag; neither is 1-2 nor x -1 (a negative)": "a-b is not a flag; neither is 1-2 nor x -1 (a negative)",
	} {
		if got := DoubleDash(in); got != want {
			t.Errorf("DoubleDash(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFail(t *testing.T) {
	var b strings.Builder
	if code := Fail(&b, "xlbctl", `unknown command "x"`); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if want := "xlbctl: unknown command \"x\"\nRun 'xlbctl --help' for usage.\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
