package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/xlbproject/xlb/internal/cliusage"
)

// command is one of xlb's command lines: its flags, parsed by Go's flag
// package (which takes -flag and --flag alike), and the usage it prints
// itself with the --flag spelling: on stdout for --help (exit 0), on
// stderr after a usage error (exit 2).
type command struct {
	name     string // "xlb check"
	synopsis string // the Usage lines, without "Usage:"
	about    string // what it does, a paragraph or more
	fs       *flag.FlagSet
	// aliases are flags kept for old command lines and not listed: a hot
	// upgrade starts the new binary with the old process's arguments.
	aliases map[string]string // alias -> flag it stands for
}

func newCommand(name, synopsis, about string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed by parse
	fs.Usage = func() {}
	return &command{name: name, synopsis: synopsis, about: about, fs: fs, aliases: map[string]string{}}
}

// alias makes old another spelling of the defined flag name.
func (c *command) alias(old, name string) {
	f := c.fs.Lookup(name)
	c.fs.Var(f.Value, old, "alias of --"+name)
	c.aliases[old] = name
}

// parse parses args. done says the caller returns code: 0 after --help
// (usage on stdout), 2 after a usage error (the error and a hint on
// stderr). maxArgs bounds the positional arguments.
func (c *command) parse(args []string, maxArgs int, stdout, stderr io.Writer) (code int, done bool) {
	err := c.fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.usage(stdout)
		return 0, true
	case err != nil:
		return c.fail(stderr, "%s", cliusage.DoubleDash(err.Error())), true
	case c.fs.NArg() > maxArgs:
		return c.fail(stderr, "unexpected argument %q", c.fs.Arg(maxArgs)), true
	}
	return 0, false
}

// fail prints a usage error and returns its exit code, 2.
func (c *command) fail(stderr io.Writer, format string, args ...any) int {
	return cliusage.Fail(stderr, c.name, fmt.Sprintf(format, args...))
}

// usage writes the synopsis, the description and every flag but the
// aliases, as --name VALUE with its help and default.
func (c *command) usage(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n%s\n", indent(c.synopsis, "  "))
	if c.about != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimRight(c.about, "\n"))
	}
	b.WriteString("\nFlags:\n")
	c.fs.VisitAll(func(f *flag.Flag) {
		if _, ok := c.aliases[f.Name]; ok {
			return
		}
		value, help := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%s", f.Name)
		if value != "" {
			fmt.Fprintf(&b, " %s", value)
		}
		b.WriteString("\n")
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			help += fmt.Sprintf(" (default: %s)", f.DefValue)
		}
		b.WriteString(indent(help, "      "))
		b.WriteString("\n")
	})
	b.WriteString("  -h, --help\n      show this help and exit\n")
	io.WriteString(w, b.String())
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// flagSet reports whether the named flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
