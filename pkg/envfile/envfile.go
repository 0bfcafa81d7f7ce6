// Package envfile reads environment files the way systemd reads a unit's
// EnvironmentFile= (systemd.exec(5); src/basic/env-file.c), so that a
// check of /etc/default/xlb sees the values xlb.service will get.
//
// The syntax: one NAME=VALUE assignment a line; blank lines and lines
// whose first non-blank character is '#' or ';' are comments; blanks
// around the name and before the value are dropped, and trailing blanks of
// an unquoted value; in an unquoted value a backslash takes the next
// character literally and a backslash at the end of a line continues the
// value on the next; 'single quotes' keep everything up to the next quote;
// in "double quotes" a backslash escapes only '"', '\\', '`' and '$' (and
// joins lines), elsewhere it stays. Quotes count only where a value (or
// the part after a closing quote) starts: "a" 'b c'd is "ab cd", blanks
// between the parts dropped, while a"b" is those four characters. A line without '=' and an assignment whose name is
// not a valid variable name are ignored, as systemd ignores them, and
// reported as Ignored.
package envfile

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Var is one assignment: Name, its Value after unquoting, and the 1-based
// Line it starts on.
type Var struct {
	Name, Value string
	Line        int
}

// Ignored is a line systemd would skip (Line, and why).
type Ignored struct {
	Line   int
	Reason string
}

// File is a parsed environment file: its assignments in file order (a
// name may repeat; the last one counts) and the lines systemd ignores.
type File struct {
	Vars    []Var
	Ignored []Ignored
}

// Lookup returns the value the last assignment of name gives, the line of
// that assignment, and whether there is one.
func (f *File) Lookup(name string) (value string, line int, ok bool) {
	for i := len(f.Vars) - 1; i >= 0; i-- {
		if f.Vars[i].Name == name {
			return f.Vars[i].Value, f.Vars[i].Line, true
		}
	}
	return "", 0, false
}

// Load reads and parses the file at path; a file that cannot be read is
// the os error, wrapped with the path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("env file: %w", err)
	}
	return Parse(string(data)), nil
}

// name is a valid environment variable name (systemd's env_name_is_valid
// for EnvironmentFile=: letters, digits and '_', not starting with a
// digit).
var name = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Parse parses the text of an environment file.
func Parse(text string) *File {
	p := parser{f: &File{}, line: 1}
	for _, c := range text {
		p.step(c)
		if c == '\n' {
			p.line++
		}
	}
	p.step('\n') // a last line without a newline
	return p.f
}

type state int

const (
	preKey state = iota
	key
	preValue
	value
	valueEscape
	singleQuote
	doubleQuote
	doubleQuoteEscape
	comment
	commentEscape
)

// parser is systemd's parse_env_file_internal state machine.
type parser struct {
	f     *File
	st    state
	line  int // current line
	start int // line the current assignment started on
	key   strings.Builder
	val   strings.Builder
	// keep is the value's length up to its last character that is not
	// an unquoted, unescaped blank: an unquoted value's trailing blanks
	// are dropped.
	keep int
}

const blanks = " \t\r"

func (p *parser) step(c rune) {
	nl := c == '\n' || c == '\r' // systemd's NEWLINE
	blank := strings.ContainsRune(blanks, c)
	switch p.st {
	case preKey:
		switch {
		case c == '#' || c == ';':
			p.st = comment
		case !nl && !blank:
			p.st, p.start = key, p.line
			p.key.WriteRune(c)
		}
	case key:
		switch {
		case nl:
			p.f.Ignored = append(p.f.Ignored, Ignored{p.start, fmt.Sprintf("%q has no '='", strings.TrimSpace(p.key.String()))})
			p.reset()
		case c == '=':
			p.st = preValue
		default:
			p.key.WriteRune(c)
		}
	case preValue:
		switch {
		case nl:
			p.push()
		case c == '\'':
			p.st = singleQuote
		case c == '"':
			p.st = doubleQuote
		case c == '\\':
			p.st = valueEscape
		case !blank:
			p.st = value
			p.add(c, true)
		}
	case value:
		switch {
		case nl:
			p.push()
		case c == '\\':
			p.st = valueEscape
		default:
			p.add(c, !blank)
		}
	case valueEscape:
		p.st = value
		if !nl {
			p.add(c, true)
		}
	case singleQuote:
		if c == '\'' {
			p.st = preValue
		} else {
			p.add(c, true)
		}
	case doubleQuote:
		switch c {
		case '"':
			p.st = preValue
		case '\\':
			p.st = doubleQuoteEscape
		default:
			p.add(c, true)
		}
	case doubleQuoteEscape:
		p.st = doubleQuote
		switch {
		case strings.ContainsRune("\"\\`$", c):
			p.add(c, true)
		case nl:
		default:
			p.add('\\', true)
			p.add(c, true)
		}
	case comment:
		switch {
		case c == '\\':
			p.st = commentEscape
		case nl:
			p.st = preKey
		}
	case commentEscape:
		p.st = comment
	}
}

// add appends c to the value; kept says it is not a droppable trailing
// blank.
func (p *parser) add(c rune, kept bool) {
	p.val.WriteRune(c)
	if kept {
		p.keep = p.val.Len()
	}
}

// push ends an assignment: its name without surrounding blanks, its value
// without an unquoted value's trailing blanks.
func (p *parser) push() {
	k := strings.Trim(p.key.String(), blanks)
	v := p.val.String()[:p.keep]
	if name.MatchString(k) {
		p.f.Vars = append(p.f.Vars, Var{Name: k, Value: v, Line: p.start})
	} else {
		p.f.Ignored = append(p.f.Ignored, Ignored{p.start, fmt.Sprintf("%q is not a valid variable name", k)})
	}
	p.reset()
}

func (p *parser) reset() {
	p.st = preKey
	p.key.Reset()
	p.val.Reset()
	p.keep = 0
}
