package observability

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/metrics"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// repoRoot is the module root as seen from this package's directory,
// where go test runs the tests.
const repoRoot = ".."

// family is one metric family XLB exports: its type as the exposition
// gives it, its label names (sorted) and the values each label showed in
// the inventory's scrape.
type family struct {
	typ    dto.MetricType
	labels []string
	values map[string]map[string]bool
}

// typeName is the type as docs/observability.md writes it.
func (f family) typeName() string { return strings.ToLower(f.typ.String()) }

// targetLabels are the labels Prometheus adds to every scraped series;
// rules and dashboards select and group by them.
var targetLabels = []string{"instance", "job"}

// freeLabels carry an operator's or the build's values (names, addresses,
// versions), so no fixed list of values exists for them; the values of the
// other labels are a closed set the scrape shows whole.
var freeLabels = map[string]bool{
	"backend": true, "service": true, "peer": true, "interface": true, "name": true,
	"version": true, "revision": true, "branch": true, "goversion": true,
	"goos": true, "goarch": true, "tags": true,
	"instance": true, "job": true, "le": true,
}

// inventory is every xlb_* family pkg/metrics exports, by name. It is
// built twice and the two must agree: from the source (every string
// literal of pkg/metrics' non-test files that is a whole xlb_* name: each
// descriptor is created from one, c.add("xlb_...") or
// prometheus.NewDesc("xlb_...")) and from a scrape of metrics.Server over
// a snapshot in which every source has data (types and labels).
func inventory(t *testing.T) map[string]family {
	t.Helper()
	declared := declaredNames(t)
	scraped := scrapeFixture(t)
	for name := range declared {
		if _, ok := scraped[name]; !ok {
			t.Errorf("%s is declared in pkg/metrics but absent from the scrape of inventorySnapshot: give the snapshot what the series needs", name)
		}
	}
	for name := range scraped {
		if !declared[name] {
			t.Errorf("%s is exported but no string literal of pkg/metrics names it: declaredNames misses how it is built", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return scraped
}

// xlbNameLiteral is a whole metric name in a Go string literal.
var xlbNameLiteral = regexp.MustCompile(`^xlb_[a-z0-9_]+$`)

// declaredNames parses pkg/metrics and returns every xlb_* name its
// non-test files spell as a string literal.
func declaredNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, f := range parsePackage(t, "pkg/metrics") {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && xlbNameLiteral.MatchString(s) {
				names[s] = true
			}
			return true
		})
	}
	return names
}

// parsePackage parses the non-test Go files of a package directory, given
// from the module root.
func parsePackage(t *testing.T, dir string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		files = append(files, f)
	}
	return files
}

// scrapeFixture serves /metrics from metrics.New over inventorySnapshot
// and returns its xlb_* families.
func scrapeFixture(t *testing.T) map[string]family {
	t.Helper()
	var store snapshot.Store
	store.Publish(inventorySnapshot())
	log := logrus.New()
	log.SetOutput(io.Discard)
	srv, err := metrics.New(metrics.Options{Store: &store, Log: log, Now: func() time.Time { return inventoryNow }})
	if err != nil {
		t.Fatalf("metrics.New: %v", err)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d\n%s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]family{}
	for name, mf := range fams {
		if !strings.HasPrefix(name, "xlb_") {
			continue
		}
		f := family{typ: mf.GetType(), values: map[string]map[string]bool{}}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if f.values[l.GetName()] == nil {
					f.values[l.GetName()] = map[string]bool{}
					f.labels = append(f.labels, l.GetName())
				}
				f.values[l.GetName()][l.GetValue()] = true
			}
		}
		sort.Strings(f.labels)
		out[name] = f
	}
	return out
}

// inventoryNow is the scrape time of inventorySnapshot.
var inventoryNow = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

// inventorySnapshot is a running instance in which every source of a
// series has data: a maintenance sample, a counter read, BGP peers, both
// XDP attach modes, both guarded host settings, and one listed backend in
// each state (backend-a routable with health checks, backend-b unhealthy,
// backend-c departed with pairs: draining, backend-d unreachable), so
// every closed label set shows all of its values.
func inventorySnapshot() *snapshot.Snapshot {
	ip := netip.MustParseAddr
	sample := &maintenance.Sample{
		Time: inventoryNow.Add(-time.Second), Cycle: 5, FlowEntries: 4, FlowCapacity: 1024,
		Active: 1, TimeWait: 1,
		Backends: []maintenance.BackendSample{
			{ID: 1, Active: 1, Handshake: dataplane.Histogram{Count: 1, Sum: time.Millisecond}},
			{ID: 3, TimeWait: 1},
		},
	}
	s := &snapshot.Snapshot{
		Name: "inventory", Lifecycle: api.Running, StartedAt: inventoryNow.Add(-time.Minute),
		Attached: []dataplane.Attachment{
			{Interface: "eth0", Ifindex: 2, Mode: dataplane.ModeNative},
			{Interface: "eth1", Ifindex: 3, Mode: dataplane.ModeGeneric},
		},
		Sample: sample, SampleInterval: time.Second, Counters: &dataplane.Counters{},
		Provider: "static", ProviderSynced: true,
		BGP: &snapshot.BGP{Peers: []snapshot.BGPPeer{{Address: ip("192.0.2.1"), ASN: 64513, State: snapshot.BGPEstablished}}},
		Backends: []backend.Status{
			{ID: 1, Name: "backend-a", IP: ip("198.51.100.1"), State: backend.Routable, Discovered: true,
				Health: &backend.Health{Healthy: true, Known: true, OK: 1}},
			{ID: 2, Name: "backend-b", IP: ip("198.51.100.2"), State: backend.Unhealthy, Discovered: true,
				Health: &backend.Health{Known: true, Failed: 3}},
			{ID: 3, Name: "backend-c", IP: ip("198.51.100.3"), State: backend.Departed},
			{ID: 4, Name: "backend-d", IP: ip("198.51.100.4"), State: backend.Unreachable, Discovered: true},
		},
		HostSettings: []snapshot.HostSetting{{Name: "net.ipv4.conf.lo.forwarding"}, {Name: "net.ipv4.ip_local_reserved_ports"}},
	}
	// The file's one service as ServiceList gives it (round robin), and a
	// second one on each table scheduler, so every scheduler series and
	// scheduler label value shows.
	svcs := s.ServiceList()
	for i, sched := range []string{config.SchedulerMaglev, config.SchedulerWeightedRoundRobin} {
		svc := svcs[0]
		svc.ID, svc.Name, svc.Scheduler = uint16(i+1), "inventory-"+sched, sched
		svc.Schedule = dataplane.Schedule{Scheduler: sched, Len: 16381, Slots: map[uint32]uint32{1: 16381}, Rebuilds: 1, BuiltAt: inventoryNow}
		svcs = append(svcs, svc)
	}
	// A UDP service (issue 31), so its series and its backends' show.
	udp := svcs[0]
	udp.ID, udp.Name, udp.Proto, udp.UDPUnrepliedMax = 3, "inventory-udp", dataplane.ProtoUDP, 256
	udp.Backends = []backend.Status{{ID: 5, Name: "backend-e", IP: ip("198.51.100.5"), State: backend.Routable, Discovered: true}}
	sample.Backends = append(sample.Backends, maintenance.BackendSample{ID: 5, UDPActive: 1, UDPOpened: 1})
	sample.UDP = maintenance.UDPSample{Active: 1, Opened: 1}
	sample.Services = []maintenance.ServiceSample{{ID: 3}}
	s.Form, s.Services = config.FormServices, append(svcs, udp)
	return s
}

// metricRef is an xlb_* name where a rule, a fixture series, the dashboard
// or the guide names a metric: the name, the label names its selector
// matches on (nil without a selector) and, for equality matchers, the
// value.
type metricRef struct {
	name    string
	matches []labelMatch
}

// labelMatch is one matcher of a selector.
type labelMatch struct {
	label, op, value string
}

var (
	// xlbRef is an xlb_* name with its selector, if any. A name followed
	// by '*' or '_*' is a wildcard in prose (xlb_config_*), not a metric.
	xlbRef = regexp.MustCompile(`xlb_[a-z0-9_]*[a-z0-9](_?\*)?(\{[^}]*\})?`)
	// matcher is one label matcher inside a selector's braces.
	matcher = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	// grouping is a label list of by, without, on, ignoring, group_left or
	// group_right.
	grouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
)

// metricRefs finds every xlb_* reference in text (PromQL, YAML or prose).
func metricRefs(text string) []metricRef {
	var refs []metricRef
	for _, m := range xlbRef.FindAllStringSubmatch(text, -1) {
		if m[1] != "" {
			continue
		}
		ref := metricRef{name: strings.TrimSuffix(m[0], m[2])}
		for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
			ref.matches = append(ref.matches, labelMatch{label: lm[1], op: lm[2], value: lm[3]})
		}
		refs = append(refs, ref)
	}
	return refs
}

// groupingLabels finds the label names of every by/without/on/ignoring/
// group_left/group_right list in PromQL text.
func groupingLabels(text string) []string {
	var out []string
	for _, m := range grouping.FindAllStringSubmatch(text, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// histogramSuffixes are the series a histogram family exposes besides its
// name.
var histogramSuffixes = []string{"_bucket", "_sum", "_count"}

// resolve maps a series name to its family: itself, or a histogram's
// family for its _bucket, _sum and _count series. The last result is the
// suffix ("" for the family's own name).
func resolve(inv map[string]family, name string) (string, family, string, bool) {
	if f, ok := inv[name]; ok {
		return name, f, "", true
	}
	for _, suffix := range histogramSuffixes {
		base := strings.TrimSuffix(name, suffix)
		if f, ok := inv[base]; ok && base != name && f.typ == dto.MetricType_HISTOGRAM {
			return base, f, suffix, true
		}
	}
	return "", family{}, "", false
}

// checkRefs reports, as errors naming where, every reference in text to a
// metric XLB does not export, every matcher on a label the metric lacks,
// and every equality matcher (or alternative of a simple =~ matcher) on a
// closed label whose value the metric never shows. It returns the
// families referenced.
func checkRefs(t *testing.T, inv map[string]family, where, text string) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	for _, ref := range metricRefs(text) {
		base, f, suffix, ok := resolve(inv, ref.name)
		if !ok {
			t.Errorf("%s: %s is not a metric XLB exports", where, ref.name)
			continue
		}
		used[base] = true
		for _, m := range ref.matches {
			if m.label == "__name__" || slices.Contains(targetLabels, m.label) || m.label == "le" && suffix == "_bucket" {
				continue
			}
			if !slices.Contains(f.labels, m.label) {
				t.Errorf("%s: %s has no label %s (labels: %v)", where, ref.name, m.label, f.labels)
				continue
			}
			if freeLabels[m.label] || m.op == "!=" || m.op == "!~" || strings.Contains(m.value, "$") {
				continue
			}
			alternatives := []string{m.value}
			if m.op == "=~" {
				if strings.ContainsAny(m.value, `.*+?()[]\^`) {
					continue
				}
				alternatives = strings.Split(m.value, "|")
			}
			for _, v := range alternatives {
				if !f.values[m.label][v] {
					t.Errorf("%s: %s{%s=%q}: %s never takes the value %q (seen: %v)", where, ref.name, m.label, m.value, m.label, v, sortedKeys(f.values[m.label]))
				}
			}
		}
	}
	return used
}

// checkGrouping reports label names in grouping clauses of text that no
// xlb_* family has and that are not target labels.
func checkGrouping(t *testing.T, inv map[string]family, where, text string) {
	t.Helper()
	known := map[string]bool{"le": true}
	for _, l := range targetLabels {
		known[l] = true
	}
	for _, f := range inv {
		for _, l := range f.labels {
			known[l] = true
		}
	}
	for _, l := range groupingLabels(text) {
		if !known[l] {
			t.Errorf("%s: groups by %q, which no XLB metric has", where, l)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// readRepoFile reads a file by its path from the module root.
func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInventory pins the inventory itself: the scrape and the source
// agree, and every family has a type.
func TestInventory(t *testing.T) {
	inv := inventory(t)
	if len(inv) < 60 {
		t.Errorf("inventory has %d families; pkg/metrics exports more than 60", len(inv))
	}
	for name, f := range inv {
		if f.typ == dto.MetricType_UNTYPED {
			t.Errorf("%s is untyped", name)
		}
	}
	t.Logf("%d xlb_* families", len(inv))
}
