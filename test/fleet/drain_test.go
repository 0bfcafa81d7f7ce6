package fleet

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// drainBound is the bound for a drained host's path to leave the
// router ("the route leaves the router within 2 s").
const drainBound = 2 * time.Second

// forwarded sums the packets host h forwarded to its backends (sent,
// client→backend) and from them (received, backend→client), as its
// status last published them.
func forwarded(t *testing.T, h *Host) (sent, received uint64) {
	t.Helper()
	d, err := h.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range d.Backends {
		sent += b.SentPacketsTotal
		received += b.ReceivedPacketsTotal
	}
	return sent, received
}

// waitPath polls the router's kernel route every 10 ms until it has a
// path via h (present) or none, and returns when it saw that.
func (f *fleet) waitPath(t *testing.T, h *Host, present bool) time.Time {
	t.Helper()
	for deadline := time.Now().Add(routeWait); ; time.Sleep(10 * time.Millisecond) {
		paths, err := f.l.KernelPaths()
		if err == nil && slices.Contains(paths, h.Addr) == present {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: path in the router's route %v (%v) after %v, want present=%v", h.Inventory, paths, err, routeWait, present)
		}
	}
}

// drainOne: `xlbctl drain` on xlb2 under client traffic. Its path leaves
// the router's route within drainBound of the call (bird's route too),
// its status says drained with nothing announced and /readyz answers 503
// draining, no new connection reaches it, and the packets that still
// arrive for its connections (the backends' side comes to it over the
// bridge, not through the router) are forwarded. `xlbctl undrain`
// returns it. xlb2 is the middle of the kernel's next-hop order: the
// hash-threshold ranges of xlb1 and xlb3 only grow when it leaves, so its
// drain moves no connection of theirs; its return may move connections
// opened meanwhile (counted, as moved by the rehash).
func (f *fleet) drainOne(t *testing.T) {
	f.startTraffic(t)
	start := time.Now()
	h := f.l.Hosts[1]
	f.waitPaths(t, "before the drain", f.l.Hosts...)
	carried := f.work.Stats().LongOpen[h.Addr]

	called := time.Now()
	// xlbctl takes the URL and the user from xlb.yaml, the password
	// from the environment.
	out, err := h.Exec("env", "XLB_ADMIN_PASSWORD="+AdminPassword, "xlbctl", "drain")
	returned := time.Since(called)
	if err != nil {
		t.Fatalf("xlbctl drain: %v\n%s", err, out)
	}
	left := f.waitPath(t, h, false).Sub(called)
	others := []*Host{f.l.Hosts[0], f.l.Hosts[2]}
	birdLeft := f.waitPaths(t, "after the drain", others...).Sub(called)
	t.Logf("xlbctl drain on %s (%s): its path left the router's kernel route %v after the call (bird's routes: %v; xlbctl returned after %v)",
		h.Inventory, strings.TrimSpace(out), left.Round(time.Millisecond), birdLeft.Round(time.Millisecond), returned.Round(time.Millisecond))
	if left > drainBound {
		t.Errorf("%s: the route left the router %v after xlbctl drain, want within %v", h.Inventory, left, drainBound)
	}
	// The status reads the speaker every second.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		d, err := h.Status()
		if err != nil {
			t.Fatal(err)
		}
		if d.Drained && d.BGP != nil && len(d.BGP.Announced) == 0 && len(d.BGP.Peers) == 1 && d.BGP.Peers[0].State == "established" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: drained %v, bgp %+v; want drained, nothing announced, the session kept", h.Inventory, d.Drained, d.BGP)
			break
		}
	}
	if code, body, err := h.Get("/readyz"); err != nil || code != 503 || !strings.Contains(string(body), "draining") {
		t.Errorf("%s: /readyz %d %q %v, want 503 draining", h.Inventory, code, body, err)
	}

	// What still arrives is forwarded: after the route left (and the
	// packets then in flight were counted), the host keeps forwarding
	// its connections' packets from the backends (their last echoes,
	// keepalive probes and resets: the client side moved away with the
	// route).
	time.Sleep(2 * time.Second)
	sent0, recv0 := forwarded(t, h)
	new0 := f.work.Stats().NewByHost[h.Addr]
	sent1, recv1 := sent0, recv0
	for deadline := time.Now().Add(20 * time.Second); recv1 == recv0 && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		sent1, recv1 = forwarded(t, h)
	}
	t.Logf("%s drained (carried %d long-lived connections at the drain): from 2 s after its path left, it forwarded %d packets backend→client and %d client→backend",
		h.Inventory, carried, recv1-recv0, sent1-sent0)
	if carried > 0 && recv1 == recv0 {
		t.Errorf("%s: forwarded no packet from the backends while drained; it carried %d long-lived connections", h.Inventory, carried)
	}
	if n := f.work.Stats().NewByHost[h.Addr] - new0; n != 0 {
		t.Errorf("%s: %d new connections reached it while drained", h.Inventory, n)
	}

	called = time.Now()
	if out, err := h.Exec("env", "XLB_ADMIN_PASSWORD="+AdminPassword, "xlbctl", "undrain"); err != nil {
		t.Fatalf("xlbctl undrain: %v\n%s", err, out)
	}
	back := f.waitPath(t, h, true).Sub(called)
	f.waitPaths(t, "after the undrain", f.l.Hosts...)
	t.Logf("xlbctl undrain on %s: its path was back in the router's kernel route %v after the call", h.Inventory, back.Round(time.Millisecond))
	waitAnnouncing(t, h)
	// Let connections land on it again, and the return's rehash play out.
	time.Sleep(movedWindow)
	b := f.checkTraffic(t, start, true)
	f.logTraffic(t, start, b)
	t.Logf("drain and undrain of %s: router's route changes %s", h.Inventory, f.changes(start))
	f.phase("xlbctl drain and undrain (one host)", start)
}
