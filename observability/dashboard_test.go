package observability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// dashboardFile is the Grafana dashboard, from the module root.
const dashboardFile = "observability/grafana/xlb-dashboard.json"

// grafana10Schema is the dashboard schemaVersion of Grafana 10.0: a
// dashboard of this version or older imports into every Grafana from 10.0
// on (newer ones migrate it; 10.0 would not know a newer version).
const grafana10Schema = 38

// panelTypes are the panel plugins the dashboard may use: those built into
// Grafana 10, so an import needs no plugin.
var panelTypes = map[string]bool{
	"row": true, "stat": true, "gauge": true, "timeseries": true,
	"state-timeline": true, "heatmap": true, "table": true, "text": true, "bargauge": true,
}

// builtinVariables are Grafana's own variables a query may use.
var builtinVariables = map[string]string{
	"__rate_interval": "1m", "__interval": "1m", "__range": "1h",
}

// dashboard is the part of the dashboard JSON the lint reads.
type dashboard struct {
	ID            any     `json:"id"`
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name string `json:"name"`
			Expr string `json:"expr"`
		} `json:"list"`
	} `json:"annotations"`
	Requires []struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Version string `json:"version"`
	} `json:"__requires"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	GridPos gridPos `json:"gridPos"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

type gridPos struct{ X, Y, W, H int }

type variable struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Query json.RawMessage `json:"query"`
}

// query is a query variable's PromQL-ish text (a string or an object with
// a query field, depending on the editor that wrote it).
func (v variable) query() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

// loadDashboard parses the dashboard, failing on invalid JSON.
func loadDashboard(t *testing.T) (dashboard, any) {
	t.Helper()
	raw := []byte(readRepoFile(t, dashboardFile))
	if !json.Valid(raw) {
		t.Fatalf("%s is not valid JSON", dashboardFile)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d, tree
}

// allPanels flattens rows' nested panels into the list.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// TestDashboardImportable: the JSON an operator imports into Grafana 10 or
// newer: no fixed id, a stable uid, a schema Grafana 10.0 knows, a
// Prometheus data source chosen through the datasource variable and never
// a fixed data source uid, built-in panel types only.
func TestDashboardImportable(t *testing.T) {
	d, tree := loadDashboard(t)
	if d.ID != nil {
		t.Errorf("id is %v, want null (Grafana assigns one at import)", d.ID)
	}
	if !regexp.MustCompile(`^[a-zA-Z0-9_-]{1,40}$`).MatchString(d.UID) || d.Title == "" {
		t.Errorf("uid %q / title %q: want a uid of 1-40 [a-zA-Z0-9_-] and a title", d.UID, d.Title)
	}
	if d.SchemaVersion < 36 || d.SchemaVersion > grafana10Schema {
		t.Errorf("schemaVersion %d, want 36..%d (Grafana 10.0 imports it)", d.SchemaVersion, grafana10Schema)
	}
	var grafanaReq bool
	for _, r := range d.Requires {
		if r.Type == "grafana" {
			grafanaReq = r.Version == "10.0.0"
		}
		if r.Type == "panel" && !panelTypes[r.ID] {
			t.Errorf("__requires names panel %q, not built into Grafana 10", r.ID)
		}
	}
	if !grafanaReq {
		t.Error("__requires lacks grafana 10.0.0")
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Name == "datasource" && v.query() == "prometheus" {
			dsVar = true
		}
	}
	if !dsVar {
		t.Error(`no template variable {"type": "datasource", "name": "datasource", "query": "prometheus"}`)
	}
	walkDatasources(t, "$", tree)
	for _, p := range allPanels(d.Panels) {
		if !panelTypes[p.Type] {
			t.Errorf("panel %d %q: type %q is not a built-in panel of Grafana 10", p.ID, p.Title, p.Type)
		}
	}
}

// walkDatasources checks every "datasource" member in the JSON tree: an
// object {"type": "prometheus", "uid": "${datasource}"}, or Grafana's own
// annotation source.
func walkDatasources(t *testing.T, path string, node any) {
	t.Helper()
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			if k == "datasource" {
				ds, ok := v.(map[string]any)
				switch {
				case !ok:
					t.Errorf("%s.datasource is %v, want an object with uid ${datasource}", path, v)
				case ds["type"] == "grafana" && ds["uid"] == "-- Grafana --":
				case ds["type"] != "prometheus" || ds["uid"] != "${datasource}":
					t.Errorf("%s.datasource is %v, want {type: prometheus, uid: ${datasource}}", path, ds)
				}
				continue
			}
			walkDatasources(t, path+"."+k, v)
		}
	case []any:
		for i, v := range n {
			walkDatasources(t, fmt.Sprintf("%s[%d]", path, i), v)
		}
	}
}

// TestDashboardPanels: unique panel ids, every panel inside the 24-column
// grid without overlapping another, titled, with queries whose refIds are
// unique.
func TestDashboardPanels(t *testing.T) {
	d, _ := loadDashboard(t)
	ids := map[int]string{}
	for _, p := range allPanels(d.Panels) {
		name := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID <= 0 {
			t.Errorf("%s: id must be positive", name)
		}
		if other, dup := ids[p.ID]; dup {
			t.Errorf("%s: id already used by %q", name, other)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if p.Title == "" || g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("%s: needs a title and a gridPos inside 24 columns, got %+v", name, g)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", name)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if q.RefID == "" || refs[q.RefID] || strings.TrimSpace(q.Expr) == "" {
				t.Errorf("%s: query %q needs a unique refId and an expr", name, q.RefID)
			}
			refs[q.RefID] = true
		}
	}
	// Overlap: the top level lays out every panel (no row is collapsed).
	cells := map[[2]int]string{}
	for _, p := range d.Panels {
		if len(p.Panels) > 0 {
			t.Errorf("row %q is collapsed; keep rows open so the layout can be checked", p.Title)
		}
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, taken := cells[[2]int{x, y}]; taken {
					t.Errorf("panel %q overlaps %q at column %d, row %d", p.Title, other, x, y)
					return
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
	}
}

// dashboardQueries are every query of the dashboard, by where it is:
// panel targets, template variables and annotations.
func dashboardQueries(d dashboard) map[string]string {
	out := map[string]string{}
	for _, p := range allPanels(d.Panels) {
		for _, q := range p.Targets {
			out[fmt.Sprintf("panel %d %q query %s", p.ID, p.Title, q.RefID)] = q.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			out["variable "+v.Name] = v.query()
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			out["annotation "+a.Name] = a.Expr
		}
	}
	return out
}

// variableRef is a $name or ${name} reference in a query.
var variableRef = regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)\}?`)

// TestDashboardQueries: every xlb_* name, label and closed label value the
// queries use exists; every variable they use is defined (or Grafana's);
// promtool parses every panel and annotation query as PromQL, the
// variables replaced by sample values. Metrics no panel shows are logged.
func TestDashboardQueries(t *testing.T) {
	inv := inventory(t)
	d, _ := loadDashboard(t)
	vars := map[string]string{}
	for k, v := range builtinVariables {
		vars[k] = v
	}
	for _, v := range d.Templating.List {
		vars[v.Name] = ".+"
	}
	vars["job"] = "xlb"
	used := map[string]bool{}
	var promql []string
	queries := dashboardQueries(d)
	for _, where := range sortedKeys(queries) {
		expr := queries[where]
		for name := range checkRefs(t, inv, where, expr) {
			used[name] = true
		}
		checkGrouping(t, inv, where, expr)
		for _, m := range variableRef.FindAllStringSubmatch(expr, -1) {
			if _, ok := vars[m[1]]; !ok {
				t.Errorf("%s: variable $%s is not defined", where, m[1])
			}
		}
		if !strings.HasPrefix(where, "variable ") {
			promql = append(promql, variableRef.ReplaceAllStringFunc(expr, func(s string) string {
				return vars[variableRef.FindStringSubmatch(s)[1]]
			}))
		}
	}
	checkPromQL(t, promql)
	var unused []string
	for name := range inv {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	t.Logf("%d queries; %d of %d xlb_* families on the dashboard; not shown: %v", len(queries), len(used), len(inv), unused)
}

// checkPromQL has promtool parse each expression, as the expr of a
// recording rule in a throwaway rule file.
func checkPromQL(t *testing.T, exprs []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(e) // a JSON string is a YAML double-quoted scalar
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", "--lint=none", abs)
}
