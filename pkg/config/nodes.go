package config

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// decoder walks yaml.Nodes, recording the line of every field it meets and
// an error for every node of the wrong shape or type. A field whose value
// is null (`key:` or `key: ~`) counts as omitted.
type decoder struct {
	*problems
	// set holds the paths that have a non-null value in the file, even one
	// that failed to decode, so validation can tell "missing" from "wrong".
	set map[string]bool
	// bad holds the paths whose value failed to decode (wrong shape, type
	// or range); validation skips them and everything under them.
	bad map[string]bool
	// seqs holds the paths whose value is a sequence, so validation can
	// name an item (snat.ip[1]) where the field may be a scalar or a list.
	seqs map[string]bool
}

func newDecoder(p *problems) *decoder {
	return &decoder{problems: p, set: map[string]bool{}, bad: map[string]bool{}, seqs: map[string]bool{}}
}

// fail records an error for a value at path that could not be decoded.
func (d *decoder) fail(line int, path, format string, args ...any) {
	d.bad[path] = true
	d.errorAt(line, path, format, args...)
}

// failed says whether path or one of its parents failed to decode.
func (d *decoder) failed(path string) bool {
	for {
		if d.bad[path] {
			return true
		}
		if path == "" {
			return false
		}
		path = parentPath(path)
	}
}

// field is one known key of a mapping and the function that decodes its
// non-null value found at path.
type field struct {
	name   string
	decode func(n *yaml.Node, path string)
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's kind and value for "got ..." in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("string %q", n.Value)
		case "!!int":
			return "integer " + n.Value
		case "!!float":
			return "number " + n.Value
		case "!!bool":
			return "boolean " + n.Value
		case "!!null":
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unsupported node"
}

// mapping decodes a mapping node with the given known fields. Unknown,
// duplicate and merge (<<) keys are errors on the key's line.
func (d *decoder) mapping(n *yaml.Node, path string, fields []field) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "must be a mapping, got %s", describe(n))
		return
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.errorAt(k.Line, path, "field names must be plain strings, got %s", describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			d.errorAt(k.Line, path, "merge keys (<<) are not supported")
			continue
		}
		if l, dup := first[k.Value]; dup {
			d.errorAt(k.Line, path, "duplicate field %q (first set on line %d)", k.Value, l)
			continue
		}
		first[k.Value] = k.Line
		idx := indexOf(names, k.Value)
		if idx < 0 {
			d.errorAt(k.Line, path, "unknown field %q (%s)", k.Value, suggest(k.Value, names))
			continue
		}
		p := childPath(path, k.Value)
		d.pos[p] = k.Line
		if isNull(v) {
			continue
		}
		d.set[p] = true
		fields[idx].decode(v, p)
	}
}

// sequence returns the items of a sequence node, recording their lines.
func (d *decoder) sequence(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n.Line, path, "must be a sequence, got %s", describe(n))
		return nil, false
	}
	d.seqs[path] = true
	items := make([]*yaml.Node, len(n.Content))
	for i, it := range n.Content {
		items[i] = resolve(it)
		d.pos[indexPath(path, i)] = items[i].Line
	}
	return items, true
}

// str decodes any scalar as its literal text, as yaml.v3 does for string
// fields (`name: 2024` is the name "2024").
func (d *decoder) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n.Line, path, "must be a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// integer decodes an integer scalar within [lo, hi]; unit, when not empty,
// follows the bounds in the message. An unquoted integer literal beyond
// 64 bits (which YAML resolves to a float, a string for 0x, 0o and 0b
// forms, or an int that overflows int64) is reported as such, with the
// bounds.
func (d *decoder) integer(n *yaml.Node, path string, lo, hi int64, unit string) (int64, bool) {
	if n.Kind == yaml.ScalarNode && n.Style == 0 && integerLiteral.MatchString(n.Value) {
		var v int64
		if n.ShortTag() != "!!int" || n.Decode(&v) != nil {
			msg := fmt.Sprintf("must be between %d and %d%s, got %s, which overflows a 64-bit integer", lo, hi, unit, n.Value)
			if lo == math.MinInt64 && hi == math.MaxInt64 {
				msg = fmt.Sprintf("%s overflows a 64-bit integer", n.Value)
			}
			d.fail(n.Line, path, "%s", msg)
			return 0, false
		}
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.fail(n.Line, path, "must be an integer, got %s", describe(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		d.fail(n.Line, path, "integer %s is out of range", n.Value)
		return 0, false
	}
	if v < lo || v > hi {
		d.fail(n.Line, path, "must be between %d and %d%s, got %d", lo, hi, unit, v)
		return 0, false
	}
	return v, true
}

// integerLiteral matches the integer forms YAML reads (decimal, 0x, 0o,
// 0b, with '_' separators), of any size.
var integerLiteral = regexp.MustCompile(`^[-+]?([0-9][0-9_]*|0x[0-9a-fA-F_]+|0o[0-7_]+|0b[01_]+)$`)

// boolean decodes true or false (YAML 1.2's booleans; yes, no, on and
// off are not, as yaml.v3 reads them).
func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		d.fail(n.Line, path, "must be true or false, got %s", describe(n))
		return false, false
	}
	var v bool
	if err := n.Decode(&v); err != nil {
		d.fail(n.Line, path, "must be true or false, got %s", describe(n))
		return false, false
	}
	return v, true
}

// port decodes a TCP port, 1..65535 (DESIGN §1).
func (d *decoder) port(n *yaml.Node, path string) (uint16, bool) {
	v, ok := d.integer(n, path, 1, 65535, "")
	return uint16(v), ok
}

// addr decodes an IP address literal (no host names).
func (d *decoder) addr(n *yaml.Node, path string) (netip.Addr, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		d.fail(n.Line, path, "%q is not an IP address", s)
		return netip.Addr{}, false
	}
	return a, true
}

func indexOf(names []string, s string) int {
	for i, n := range names {
		if n == s {
			return i
		}
	}
	return -1
}

// suggest returns `did you mean "x"?` when exactly one known name is close
// to s (edit distance <= 2, or one contains the other), and the list of
// valid fields otherwise.
func suggest(s string, names []string) string {
	var close []string
	for _, n := range names {
		contains := len(s) >= 4 && (strings.Contains(n, s) || strings.Contains(s, n))
		if contains || editDistance(s, n) <= 2 {
			close = append(close, n)
		}
	}
	if len(close) == 1 {
		return fmt.Sprintf("did you mean %q?", close[0])
	}
	return "valid fields: " + strings.Join(names, ", ")
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
