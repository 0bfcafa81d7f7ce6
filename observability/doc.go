// Package observability holds what an operator loads into Prometheus and
// Grafana to watch XLB, and the tests that keep it true to the code:
//
//   - prometheus/xlb-alerts.yml: the alerting rules, and
//     prometheus/xlb-alerts.test.yml: their promtool unit tests, fixture
//     series in, alerts out;
//   - grafana/xlb-dashboard.json: the dashboard (Grafana 10 or newer; the
//     Prometheus data source is a variable chosen at import).
//
// The deb and rpm packages install both directories under /usr/share/xlb/
// with docs/observability.md, the guide to every xlb_* metric, readiness
// reason and alert.
//
// The package has no code, only tests: promtool (Debian's prometheus
// package, installed by make deps) checks and unit-tests the rules; every
// metric pkg/metrics can export is documented in docs/observability.md
// with its type and labels; every xlb_* name and label the rules, their
// fixtures and the dashboard use exists; every alert and readiness reason
// has its section in the guide; the dashboard is valid, importable JSON.
package observability
