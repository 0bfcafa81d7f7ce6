package e2e

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// consolePage is what the console shows, read from its DOM by pageState:
// the data-field cells of each section (console.js marks the figures it
// takes from the document with the document's field name).
type consolePage struct {
	Cycle       uint64              `json:"cycle"` // the sample cycle of the document shown
	Stale       bool                `json:"stale"` // the figures are greyed out
	Banner      string              `json:"banner"`
	Backends    []map[string]string `json:"backends"`
	Refused     map[string]string   `json:"refused"`
	XDP         map[string]string   `json:"xdp"`
	Connections map[string]string   `json:"connections"`
	Rates       map[string]string   `json:"rates"`
}

const pageState = `(() => {
  const cells = root => Object.fromEntries([...root.querySelectorAll("[data-field]")].map(e => [e.dataset.field, e.textContent]));
  const main = document.getElementById("figures"), banner = document.getElementById("fetch-error");
  return {
    cycle: Number(main.dataset.sampleCycle || 0),
    stale: main.classList.contains("stale"),
    banner: banner.hidden ? "" : banner.textContent,
    backends: [...document.querySelectorAll("#backends tr[data-backend]")].map(cells),
    refused: cells(document.getElementById("refused")),
    xdp: cells(document.getElementById("xdp")),
    connections: cells(document.getElementById("connections")),
    rates: cells(document.getElementById("rates")),
  };
})()`

// TestConsoleInChromium opens the admin console of a live daemon (the
// lab's three backends, health checked, and a ghost nobody answers ARP
// for) in headless Chromium: the page renders with no script error, shows
// each backend with its state and health check, the ghost's unreachable
// reason inline, and the counts
// the API reports (connections opened, per backend, refused SYNs by reason,
// XDP verdicts); with traffic it shows rates; when the daemon stops, the
// figures are greyed out and the page says the fetch failed. Screenshots of
// both go to the artifacts directory.
func TestConsoleInChromium(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	p := startXLB(t, l, labConfig(l, healthCheckBlock, "ghost=192.0.2.99"))
	rng := rand.New(rand.NewPCG(16, 5))
	const conns = 30
	for i := range conns {
		if err := echoThrough(l.Client(), rng, 2048); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	waitCompleted(t, l, conns)
	before := waitStatus(t, l, "30 connections opened, the ghost unreachable", func(d api.Document) bool {
		ghost, _ := backendNamed(d, "ghost")
		return d.Connections.OpenedTotal >= conns && ghost.State == api.Unreachable && ghost.Reason != ""
	})

	b := newBrowser(t)
	origin := "http://" + nsProxy(t, l.XLB, strings.TrimPrefix(adminURL, "http://"))
	b.do(t, chromedp.Navigate(origin+"/admin/"))
	page := waitEval(t, b, "the sample the API served, four backends", pageState, func(pg consolePage) bool {
		return pg.Cycle >= before.Dataplane.SampleCycle && len(pg.Backends) == 4
	})
	after := statusDoc(t, l)

	// The backends, in the document's order, with the counts of a sample
	// between the two documents (equal to both: no traffic flows).
	for i, row := range page.Backends {
		want := after.Backends[i]
		if row["name"] != want.Name || row["ip"] != want.IP || row["state"] != string(want.State) {
			t.Errorf("backend row %d: %v, want %s %s %s", i, row, want.Name, want.IP, want.State)
		}
		was, _ := backendNamed(before, want.Name)
		between(t, "backend "+want.Name+" opened_total", was.OpenedTotal, row["opened_total"], want.OpenedTotal)
		if h := want.Health; h != nil && h.LastResult == api.HealthCheckOK && !strings.HasPrefix(row["health"], "ok (") {
			t.Errorf("backend %s: health cell %q, the API's last check passed", want.Name, row["health"])
		}
		if want.Name == "ghost" {
			if row["reason"] == "" || row["reason"] != want.Reason {
				t.Errorf("the ghost's reason cell %q, want the API's %q", row["reason"], want.Reason)
			}
		} else if want.State != api.Routable || row["reason"] != "—" {
			t.Errorf("backend %s: state %s, reason cell %q; want routable without a reason", want.Name, want.State, row["reason"])
		}
	}
	between(t, "connections opened_total", before.Connections.OpenedTotal, page.Connections["opened_total"], after.Connections.OpenedTotal)
	if page.Connections["opened_total"] != strconv.FormatUint(after.Connections.OpenedTotal, 10) {
		t.Errorf("connections opened %s, the API reports %d", page.Connections["opened_total"], after.Connections.OpenedTotal)
	}
	k0, k1 := before.Dataplane.Counters, after.Dataplane.Counters
	for name, c := range map[string][2]uint64{
		"snat_port_exhausted_total": {k0.SNATPortExhaustedTotal, k1.SNATPortExhaustedTotal},
		"table_full_total":          {k0.TableFullTotal, k1.TableFullTotal},
		"no_backend_total":          {k0.NoBackendTotal, k1.NoBackendTotal},
		"fib_miss_total":            {k0.FIBMissTotal, k1.FIBMissTotal},
	} {
		between(t, "refused "+name, c[0], page.Refused[name], c[1])
	}
	x0, x1 := k0.XDPActions, k1.XDPActions
	for name, c := range map[string][2]uint64{
		"tx": {x0.TX, x1.TX}, "redirect": {x0.Redirect, x1.Redirect}, "pass": {x0.Pass, x1.Pass},
		"drop": {x0.Drop, x1.Drop}, "aborted": {x0.Aborted, x1.Aborted},
	} {
		between(t, "xdp "+name, c[0], page.XDP[name], c[1])
	}
	if x1.TX == 0 {
		t.Errorf("the API reports no XDP_TX after %d balanced connections", conns)
	}

	// Rates: new connections per second while traffic flows.
	done := make(chan error, 1)
	go func() {
		r := rand.New(rand.NewPCG(16, 6))
		for range 60 {
			if err := echoThrough(l.Client(), r, 65536); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	page = waitEval(t, b, "a new-connection rate above 0", pageState, func(pg consolePage) bool {
		r, err := strconv.ParseFloat(strings.TrimSuffix(pg.Rates["rate_opened"], " /s"), 64)
		return err == nil && r > 0
	})
	t.Logf("rates shown: %v", page.Rates)
	b.screenshot(t, "console.png")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	exceptions, errs := b.problems()
	if len(exceptions)+len(errs) > 0 {
		t.Errorf("script errors while the daemon served: exceptions %q, errors %q", exceptions, errs)
	}

	// The daemon stops: the next fetch fails, the figures stay, greyed out.
	stopXLB(t, l, p)
	page = waitEval(t, b, "the failed fetch", pageState, func(pg consolePage) bool { return pg.Stale })
	if !strings.Contains(page.Banner, "failed") || len(page.Backends) != 4 {
		t.Errorf("after the stop: banner %q, %d backend rows; want the failure said and the figures kept", page.Banner, len(page.Backends))
	}
	b.screenshot(t, "console-fetch-failed.png")
	if exceptions, _ := b.problems(); len(exceptions) > 0 {
		t.Errorf("script exceptions after the stop: %q", exceptions)
	}
}

// between checks that a count the page shows (decimal text) lies between
// the API's before and after it.
func between(t *testing.T, what string, lo uint64, shown string, hi uint64) {
	t.Helper()
	n, err := strconv.ParseUint(shown, 10, 64)
	if err != nil || n < lo || n > hi {
		t.Errorf("%s: the page shows %q, the API reported %d before and %d after", what, shown, lo, hi)
	}
}
