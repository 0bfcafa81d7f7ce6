package config

import (
	"strings"
	"testing"
)

// minimal is the smallest valid config: six lines, so a field appended to it
// is on line 7.
const minimal = `ports:
  - local_port: 80
provider:
  static:
    backends:
      - ip: 198.51.100.11
`

// parseT parses src as "t.yaml".
func parseT(t *testing.T, src string) (*Config, []string, error) {
	t.Helper()
	return Parse([]byte(src), "t.yaml")
}

// mustParse parses src and fails the test on any error or warning.
func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c, warnings, err := parseT(t, src)
	if err != nil {
		t.Fatalf("Parse: unexpected error:\n%v\nsource:\n%s", err, src)
	}
	if len(warnings) != 0 {
		t.Fatalf("Parse: unexpected warnings %q", warnings)
	}
	return c
}

// wantError parses src and requires exactly the error text want (one
// problem per line).
func wantError(t *testing.T, src, want string) {
	t.Helper()
	c, _, err := parseT(t, src)
	if err == nil {
		t.Fatalf("Parse: no error, want:\n%s\nsource:\n%s", want, src)
	}
	if c != nil {
		t.Errorf("Parse returned a config along with an error")
	}
	if got := err.Error(); got != strings.TrimSpace(want) {
		t.Fatalf("Parse error:\n got: %s\nwant: %s\nsource:\n%s", got, want, src)
	}
}
