package config

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a config file. Its text is
// "SOURCE:LINE: PATH: MESSAGE", e.g.
// `xlb.yaml:7: ports[1].local_port: must be between 1 and 65535, got 0`.
// The line is omitted when it is 0 (a problem of the whole file, such as
// "empty config"); the path is omitted when the problem is not about one
// field (a YAML syntax error, an unknown top-level field).
type Error struct {
	// Source is the file name given to Load or Parse.
	Source string
	// Line is 1-based; 0 when the problem has no position.
	Line int
	// Path names the field, e.g. "provider.static.backends[2].ip"; "" for
	// the document itself.
	Path string
	// Msg says what is wrong.
	Msg string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one config file, sorted by line. Parse
// and Load return it (as error) whenever the file is rejected, so all
// problems are reported at once; its text has one problem per line.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As reach each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// problems collects errors and warnings for one file. Paths are resolved to
// lines through pos, which the decoder fills with the line of every field
// it saw; a field the file did not set borrows the line of its nearest
// ancestor that it did set.
type problems struct {
	source   string
	pos      map[string]int
	errs     Errors
	warnings []string
}

func newProblems(source string) *problems {
	return &problems{source: source, pos: map[string]int{}}
}

// lineOf returns the recorded line of path or of its nearest recorded
// ancestor ("" is the document).
func (p *problems) lineOf(path string) int {
	for {
		if l, ok := p.pos[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}

// errorf records an error about path at path's line.
func (p *problems) errorf(path, format string, args ...any) {
	p.errorAt(p.lineOf(path), path, format, args...)
}

// errorAt records an error about path at an explicit line.
func (p *problems) errorAt(line int, path, format string, args ...any) {
	p.errs = append(p.errs, &Error{Source: p.source, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// warnf records a warning about path, formatted like an Error.
func (p *problems) warnf(path, format string, args ...any) {
	e := &Error{Source: p.source, Line: p.lineOf(path), Path: path, Msg: fmt.Sprintf(format, args...)}
	p.warnings = append(p.warnings, e.Error())
}

// err returns the sorted errors, or nil when there are none.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
	return p.errs
}

// childPath joins a field name onto a path: "admin" + "port" = "admin.port".
func childPath(parent, field string) string {
	if parent == "" {
		return field
	}
	return parent + "." + field
}

// indexPath appends a sequence index: "ports" + 1 = "ports[1]".
func indexPath(parent string, i int) string {
	return fmt.Sprintf("%s[%d]", parent, i)
}

// parentPath strips the last field or index from path.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}
