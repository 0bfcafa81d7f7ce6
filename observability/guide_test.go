package observability

import (
	"go/ast"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// guideFile is the observability guide, from the module root.
const guideFile = "docs/observability.md"

// guideSection returns the text of the guide's "## title" section, up to
// the next level-2 heading.
func guideSection(t *testing.T, guide, title string) string {
	t.Helper()
	_, rest, found := strings.Cut(guide, "\n## "+title+"\n")
	if !found {
		t.Fatalf("%s has no section %q", guideFile, "## "+title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// metricRow is one row of the metrics reference: | `name` | type | labels | ...
var metricRow = regexp.MustCompile("(?m)^\\| `(xlb_[a-z0-9_]+)` \\| ([a-z]+) \\| ([^|]*) \\|")

// backticked is a `word` in a table cell.
var backticked = regexp.MustCompile("`([^`]+)`")

// TestEveryMetricDocumented: the metrics reference has exactly one row for
// each family pkg/metrics exports, with its type and label names, and no
// row for anything else.
func TestEveryMetricDocumented(t *testing.T) {
	inv := inventory(t)
	ref := guideSection(t, readRepoFile(t, guideFile), "Metrics reference")
	seen := map[string]bool{}
	for _, m := range metricRow.FindAllStringSubmatch(ref, -1) {
		name, typ, labelCell := m[1], m[2], m[3]
		if seen[name] {
			t.Errorf("%s has two rows", name)
		}
		seen[name] = true
		f, ok := inv[name]
		if !ok {
			t.Errorf("%s is documented but XLB does not export it", name)
			continue
		}
		if typ != f.typeName() {
			t.Errorf("%s is documented as a %s, exported as a %s", name, typ, f.typeName())
		}
		var labels []string
		for _, l := range backticked.FindAllStringSubmatch(labelCell, -1) {
			labels = append(labels, l[1])
		}
		slices.Sort(labels)
		if !slices.Equal(labels, f.labels) {
			t.Errorf("%s is documented with labels %v, exported with %v", name, labels, f.labels)
		}
	}
	for _, name := range sortedKeys(inv) {
		if !seen[name] {
			t.Errorf("%s is exported by pkg/metrics but has no row in %s (## Metrics reference)", name, guideFile)
		}
	}
}

// TestGuideNamesExist: every xlb_* name the guide mentions anywhere, with
// its labels and closed label values, is one XLB exports.
func TestGuideNamesExist(t *testing.T) {
	inv := inventory(t)
	checkRefs(t, inv, guideFile, readRepoFile(t, guideFile))
}

// TestEveryAlertDocumented: each alert of the rules has its "### Name"
// section in the guide's Alerts section (its runbook_url anchor), and
// every such section is an alert.
func TestEveryAlertDocumented(t *testing.T) {
	alerts := guideSection(t, readRepoFile(t, guideFile), "Alerts")
	var headings []string
	for _, m := range regexp.MustCompile(`(?m)^### (\S+)$`).FindAllStringSubmatch(alerts, -1) {
		headings = append(headings, m[1])
	}
	var names []string
	for _, r := range alertRules(t) {
		names = append(names, r.Alert)
		if !slices.Contains(headings, r.Alert) {
			t.Errorf("alert %s has no section ### %s in %s", r.Alert, r.Alert, guideFile)
		}
	}
	for _, h := range headings {
		if !slices.Contains(names, h) {
			t.Errorf("%s has a section ### %s, which is not an alert of %s", guideFile, h, rulesFile)
		}
	}
}

// TestReadinessReasonsDocumented: every readiness reason of
// pkg/status/api (the constants of type Reason) has a row in the guide's
// Readiness table, and every row is one of them.
func TestReadinessReasonsDocumented(t *testing.T) {
	reasons := readinessReasons(t)
	if len(reasons) < 8 {
		t.Fatalf("found %d readiness reasons in pkg/status/api, expected at least 8: %v", len(reasons), reasons)
	}
	section := guideSection(t, readRepoFile(t, guideFile), "Readiness")
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(section, -1) {
		rows = append(rows, m[1])
	}
	for _, r := range reasons {
		if !slices.Contains(rows, r) {
			t.Errorf("readiness reason %s has no row in %s (## Readiness)", r, guideFile)
		}
	}
	for _, r := range rows {
		if !slices.Contains(reasons, r) {
			t.Errorf("%s documents readiness reason %s, which pkg/status/api does not define", guideFile, r)
		}
	}
}

// readinessReasons parses pkg/status/api and returns the values of its
// constants declared with type Reason.
func readinessReasons(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, f := range parsePackage(t, "pkg/status/api") {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("pkg/status/api: a Reason constant is not a string literal")
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, s)
				}
			}
		}
	}
	return out
}
