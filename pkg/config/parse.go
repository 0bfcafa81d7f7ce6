package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Load reads and parses the config file at path; see Parse. A file that
// cannot be read yields the os error, wrapped.
func Load(path string) (*Config, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path)
}

// Parse parses one xlb.yaml document (DESIGN §1), fills in defaults and
// validates it. source names the file in messages.
//
// On success it returns the effective Config. The warnings
// (orphan_ttl_secs below its minimum, an admin or metrics port below
// 1024, a router id that is a service address) are for the caller to log; they
// are returned whether or not the file is valid. On failure the error is
// Errors: every problem found, one per line, sorted by line, each naming
// the source, the line and the field path.
func Parse(data []byte, source string) (*Config, []string, error) {
	p := newProblems(source)
	root := parseDocument(data, p)
	if root == nil {
		return nil, nil, p.err()
	}
	d := newDecoder(p)
	d.pos[""] = root.Line
	c := Default()
	if root.Kind == yaml.MappingNode {
		d.decodeConfig(root, c)
		validate(c, d)
	}
	if err := p.err(); err != nil {
		return nil, p.warnings, err
	}
	return c, p.warnings, nil
}

// parseDocument returns the root node of the only YAML document in data,
// or nil after recording why there is none.
func parseDocument(data []byte, p *problems) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		p.errorAt(0, "", "empty config")
		return nil
	}
	if err != nil {
		syntaxError(err, p)
		return nil
	}
	root := resolve(doc.Content[0])
	if isNull(root) {
		p.errorAt(0, "", "empty config")
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		syntaxError(err, p)
		return nil
	case len(next.Content) > 0 && !isNull(next.Content[0]):
		p.errorAt(next.Line, "", "found a second YAML document; a config file holds exactly one")
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.errorAt(root.Line, "", "the top level must be a mapping of fields, got %s", describe(root))
	}
	return root
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError records a YAML parse error, moving yaml.v3's
// "yaml: line N: ..." into our "SOURCE:N: ..." form.
func syntaxError(err error, p *problems) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p.errorAt(line, "", "YAML syntax error: %s", m[2])
		return
	}
	p.errorAt(0, "", "YAML syntax error: %s", strings.TrimPrefix(msg, "yaml: "))
}
