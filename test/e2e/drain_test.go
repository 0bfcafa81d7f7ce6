package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// post sends POST url from inside h and returns the status code and body.
func post(t testing.TB, h *lab.Host, url string) (int, string) {
	t.Helper()
	resp, err := nsClient(h).Post(url, "", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b [512]byte
	n, _ := resp.Body.Read(b[:])
	return resp.StatusCode, string(b[:n])
}

// Drain on demand (issue 15, DESIGN §6a): a drained instance answers
// readiness 503 draining and status drained: true, keeps forwarding every
// packet of its connections and new ones, and stays drained across a hot
// upgrade; undrain makes it ready again.
func TestDrainSurvivesHotUpgrade(t *testing.T) {
	l := greetedLab(t)
	p := startPinned(t, l, xlbBinary, labConfig(l, ""))
	w := startWorkload(t, l)
	waitReadyz(t, l, http.StatusOK, "ready")

	code, body := postSocket(t, l, "/api/v1/drain")
	var st api.DrainState
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil || !st.Drained {
		t.Fatalf("POST /api/v1/drain: %d %q (%v)", code, body, err)
	}
	waitReadyz(t, l, http.StatusServiceUnavailable, string(api.ReasonDraining))
	if d := statusDoc(t, l); !d.Drained || d.Readiness.Reason != api.ReasonDraining {
		t.Fatalf("status drained %v readiness %+v", d.Drained, d.Readiness)
	}
	// Still forwarding: the workload's connections flow, and a new
	// connection is balanced as before.
	before := w.received()
	w.waitFlowing(t, before, 30*time.Second)
	c, from, err := greet(l.Client())
	if err != nil {
		t.Fatalf("a new connection to a drained instance: %v", err)
	}
	err = roundTrip(c, []byte("drained but forwarding"))
	c.Close()
	if err != nil {
		t.Fatalf("a new connection to a drained instance (backend %d): %v", from, err)
	}

	before = w.received()
	s := handOff(t, l, p, w)
	w.check(t, "the hand-off while drained")
	t.Logf("hand-off while drained: %v", s)
	if d := statusDoc(t, l); !d.Drained || d.Upgrades.Start != api.StartHandedOver {
		t.Fatalf("after the hand-off: drained %v, upgrades %+v; want still drained, handed over", d.Drained, d.Upgrades)
	}
	waitReadyz(t, l, http.StatusServiceUnavailable, string(api.ReasonDraining))
	w.waitFlowing(t, before, 30*time.Second)

	if code, body := postSocket(t, l, "/api/v1/undrain"); code != http.StatusOK || body != "{\"drained\":false}\n" {
		t.Fatalf("POST /api/v1/undrain: %d %q", code, body)
	}
	waitReadyz(t, l, http.StatusOK, "ready")
	t.Log(w.finish(t))
	stopXLB(t, l, p)
}
