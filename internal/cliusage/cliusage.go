// Package cliusage holds the usage-error conventions xlb and xlbctl share:
// flags spelled --name in messages, and a usage error reported as one line
// and a hint, exit status 2.
package cliusage

import (
	"fmt"
	"io"
	"regexp"
)

// ExitUsage is the exit status of a usage error (both commands).
const ExitUsage = 2

// flagName finds flag names as Go's flag package writes them in errors
// ("flag provided but not defined: -x", "invalid value ... for flag -x").
var flagName = regexp.MustCompile(`(^|[ :])-([A-Za-z][\w.-]*)`)

// DoubleDash rewrites a flag package error to the --flag spelling.
func DoubleDash(msg string) string { return flagName.ReplaceAllString(msg, "$1--$2") }

// Fail writes "PROGRAM: MESSAGE" and "Run 'PROGRAM --help' for usage." to
// stderr and returns ExitUsage.
func Fail(stderr io.Writer, program, message string) int {
	fmt.Fprintf(stderr, "%s: %s\n", program, message)
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", program)
	return ExitUsage
}
