package e2e

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Spoofed RSTs per held connection and direction whose sequence numbers
// lie inside the receiver's window but are not its next expected one.
const (
	inexactConns  = 8
	inexactPerDir = 20
)

// Spoofed RSTs that carry the real 4-tuples of established connections
// and sequence numbers inside the receiver's window, but not the exact
// next one (issue 27 finding 5; RFC 5961 §3): XLB forwards and counts each
// (xlb_rst_inexact_total) and keeps the pair, the endpoint's kernel
// answers with a challenge ACK instead of resetting, and every connection
// still works after the maintenance cycles that would have removed a
// reset pair. Before, such a RST ended the pair in XLB while the
// endpoints lived on, and the next segment met no pair. A legitimate RST
// (a close with SO_LINGER 0, at the exact sequence) still ends its pair.
func TestRSTInWindowForwarded(t *testing.T) {
	// No round-trip loops: each side has sent a few dozen bytes, far
	// less than the offsets of inWindow.
	r := startRSTRun(t, inexactConns, 0)
	sent := float64(r.spoof(t, inexactPerDir, rand.New(rand.NewPCG(27, 5961)), inWindow))
	got, ok := waitCounter(t, r.l.Lab, "xlb_rst_inexact_total", nil, 30*time.Second, func(v float64) bool { return v >= sent })
	t.Logf("%v spoofed in-window RSTs on %d connections; xlb_rst_inexact_total %v", sent, inexactConns, got)
	if !ok || got != sent {
		t.Fatalf("xlb_rst_inexact_total %v, want exactly the %v spoofed RSTs counted", got, sent)
	}
	// Two more maintenance cycles: a pair the RSTs had ended would be
	// gone by now.
	cycles := counter(t, r.l.Lab, "xlb_maintenance_cycles_total", nil)
	if v, ok := waitCounter(t, r.l.Lab, "xlb_maintenance_cycles_total", nil, 30*time.Second, func(v float64) bool { return v >= cycles+2 }); !ok {
		t.Fatalf("xlb_maintenance_cycles_total %v, want %v", v, cycles+2)
	}
	for _, who := range []string{"client", "backend"} {
		if v := counter(t, r.l.Lab, "xlb_connections_closed_total", map[string]string{"initiator": who, "reason": "rst"}); v != 0 {
			t.Fatalf("closed by a %s RST: %v, want 0: an inexact RST ended a pair", who, v)
		}
	}
	if v := counter(t, r.l.Lab, "xlb_rst_out_of_window_total", nil); v != 0 {
		t.Fatalf("xlb_rst_out_of_window_total %v, want 0: every spoofed RST was in its receiver's window", v)
	}
	r.held.check(t, "after the RSTs")

	r.legitimateRST(t)
	rounds := r.held.finish(t)
	t.Logf("%d connections survived the in-window RSTs (%d round trips); the exact RST ended its pair", len(r.held.conns), rounds)
	stopXLB(t, r.l.Lab, r.p)
}

// inWindow is an offset from a side's ISN past everything a held
// connection without round-trip loops has sent (the tuple line and one
// round trip: well under 2000 bytes) and inside its receiver's window
// (Linux advertises tens of kilobytes from the start).
func inWindow(rng *rand.Rand) uint32 { return 2000 + rng.Uint32N(6000) }
