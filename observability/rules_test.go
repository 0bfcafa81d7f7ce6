package observability

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Paths of the rules and their unit tests, from the module root.
const (
	rulesFile     = "observability/prometheus/xlb-alerts.yml"
	rulesTestFile = "observability/prometheus/xlb-alerts.test.yml"
)

// requiredAlerts are the alerts issue 16 asks for, by the name this file
// gives them: instance down or not ready, flow table above 85 %, SNAT
// exhaustion rising, invariant violations, maintenance stale, reload
// required for more than an hour, no routable backends, BGP peer down or
// not announcing while ready.
var requiredAlerts = []string{
	"XLBInstanceDown", "XLBNotReady", "XLBFlowTableNearlyFull", "XLBSNATPortExhaustion",
	"XLBFlowPairInvariantViolations", "XLBMaintenanceStale", "XLBConfigReloadRequired",
	"XLBNoRoutableBackends", "XLBBGPPeerDown", "XLBBGPNotAnnouncing",
}

// severities are the values of the severity label, from the rules file's
// header.
var severities = []string{"critical", "warning", "info"}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// ruleTests is the part of a promtool unit test file the tests read.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// loadYAML decodes a repository file into v, unknown fields allowed (the
// formats are Prometheus's, not ours).
func loadYAML(t *testing.T, path string, v any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(readRepoFile(t, path)), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// alertRules returns the alerting rules of the rules file in order.
func alertRules(t *testing.T) []rule {
	t.Helper()
	var rf ruleFile
	loadYAML(t, rulesFile, &rf)
	var out []rule
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no alerting rule", rulesFile)
	}
	return out
}

// promtool runs Debian's promtool (package prometheus, which make deps
// installs) from the module root and fails the test with its output when
// it fails. A missing promtool fails too: CI has it.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): apt-get install prometheus, or make deps", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPromtoolCheckRules(t *testing.T) {
	out := promtool(t, "check", "rules", "--lint=all", "--lint-fatal", rulesFile)
	t.Log(strings.TrimSpace(out))
}

func TestPromtoolTestRules(t *testing.T) {
	out := promtool(t, "test", "rules", rulesTestFile)
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules did not say SUCCESS:\n%s", out)
	}
	t.Log(strings.TrimSpace(out))
}

// TestRulesShape: the alerts the issue asks for exist, names are unique,
// each has a severity of the header's list, a summary, a description and a
// runbook_url into docs/observability.md.
func TestRulesShape(t *testing.T) {
	rules := alertRules(t)
	var names []string
	for _, r := range rules {
		if slices.Contains(names, r.Alert) {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		names = append(names, r.Alert)
		if !slices.Contains(severities, r.Labels["severity"]) {
			t.Errorf("%s: severity %q, want one of %v", r.Alert, r.Labels["severity"], severities)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		if want := "/docs/observability.md#" + strings.ToLower(r.Alert); !strings.HasSuffix(r.Annotations["runbook_url"], want) {
			t.Errorf("%s: runbook_url %q does not end in %s", r.Alert, r.Annotations["runbook_url"], want)
		}
	}
	for _, want := range requiredAlerts {
		if !slices.Contains(names, want) {
			t.Errorf("alert %s (issue 16) missing from %s", want, rulesFile)
		}
	}
}

// TestRulesUseExportedMetrics: every xlb_* name, label and closed label
// value in the rules (expressions and annotations) and in the unit
// tests' fixture series is one XLB exports, so neither the rules nor
// their fixtures drift from pkg/metrics.
func TestRulesUseExportedMetrics(t *testing.T) {
	inv := inventory(t)
	for _, r := range alertRules(t) {
		checkRefs(t, inv, r.Alert+" expr", r.Expr)
		checkGrouping(t, inv, r.Alert+" expr", r.Expr)
		for k, v := range r.Annotations {
			checkRefs(t, inv, r.Alert+" "+k, v)
		}
	}
	var rt ruleTests
	loadYAML(t, rulesTestFile, &rt)
	for _, tc := range rt.Tests {
		for _, s := range tc.InputSeries {
			if strings.HasPrefix(s.Series, "up{") {
				continue
			}
			if len(metricRefs(s.Series)) != 1 {
				t.Errorf("test %q: series %s is not an XLB metric", tc.Name, s.Series)
			}
			checkRefs(t, inv, "test "+tc.Name, s.Series)
		}
	}
}

// TestEveryAlertIsTested: each alert fires in at least one promtool test,
// and the unit tests load the rules file that sits next to them.
func TestEveryAlertIsTested(t *testing.T) {
	var rt ruleTests
	loadYAML(t, rulesTestFile, &rt)
	if want := filepath.Base(rulesFile); !slices.Equal(rt.RuleFiles, []string{want}) {
		t.Errorf("rule_files %v, want [%s]", rt.RuleFiles, want)
	}
	fired := map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			}
		}
	}
	for _, r := range alertRules(t) {
		if !fired[r.Alert] {
			t.Errorf("no promtool test expects %s to fire", r.Alert)
		}
	}
}
