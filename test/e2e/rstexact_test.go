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
	l := newTupleLab(t)
	p := startXLB(t, l.Lab, labConfig(l.Lab, ""))
	isns, err := captureISNs(l.Client())
	if err != nil {
		t.Fatal(err)
	}
	// No round-trip loops: each side has sent a few dozen bytes, far
	// less than the offsets below.
	held := holdConnections(t, l.Client(), inexactConns, 0)
	seqs, err := isns.wait(held.conns, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	raw, err := l.Client().RawIPv4()
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rng := rand.New(rand.NewPCG(27, 5961))
	var pkts [][]byte
	for _, hc := range held.conns {
		s := seqs[hc.client.Port()]
		for range inexactPerDir {
			// Toward the backend, as from the client: inside the
			// backend's window, past what the client has sent.
			pkts = append(pkts, spoofedRST(hc.client, churnVIP, s.client+inWindow(rng), rng))
			// Toward the client, as from the backend.
			pkts = append(pkts, spoofedRST(hc.backend, hc.snat, s.backend+inWindow(rng), rng))
		}
	}
	rng.Shuffle(len(pkts), func(i, j int) { pkts[i], pkts[j] = pkts[j], pkts[i] })
	for i, pkt := range pkts {
		if err := raw.Send(pkt); err != nil {
			t.Fatalf("spoofed RST %d: %v", i, err)
		}
		if i%stormBurst == stormBurst-1 {
			time.Sleep(stormBurstGap)
		}
	}
	sent := float64(len(pkts))
	got, ok := waitCounter(t, l.Lab, "xlb_rst_inexact_total", nil, 30*time.Second, func(v float64) bool { return v >= sent })
	t.Logf("%d spoofed in-window RSTs on %d connections; xlb_rst_inexact_total %v", len(pkts), inexactConns, got)
	if !ok || got != sent {
		t.Fatalf("xlb_rst_inexact_total %v, want exactly the %v spoofed RSTs counted", got, sent)
	}
	// Two more maintenance cycles: a pair the RSTs had ended would be
	// gone by now.
	cycles := counter(t, l.Lab, "xlb_maintenance_cycles_total", nil)
	if v, ok := waitCounter(t, l.Lab, "xlb_maintenance_cycles_total", nil, 30*time.Second, func(v float64) bool { return v >= cycles+2 }); !ok {
		t.Fatalf("xlb_maintenance_cycles_total %v, want %v", v, cycles+2)
	}
	for _, who := range []string{"client", "backend"} {
		if v := counter(t, l.Lab, "xlb_connections_closed_total", map[string]string{"initiator": who, "reason": "rst"}); v != 0 {
			t.Fatalf("closed by a %s RST: %v, want 0: an inexact RST ended a pair", who, v)
		}
	}
	if v := counter(t, l.Lab, "xlb_rst_out_of_window_total", nil); v != 0 {
		t.Fatalf("xlb_rst_out_of_window_total %v, want 0: every spoofed RST was in its receiver's window", v)
	}
	held.check(t, "after the RSTs")

	// One legitimate RST: the client closes with SO_LINGER 0.
	victim := held.conns[0]
	held.remove(victim)
	if err := victim.c.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	victim.c.Close()
	srv := l.servers[backendIndex(t, l.Lab, victim.backend.Addr())]
	if err := waitResets(srv, 1, 30*time.Second); err != nil {
		t.Fatalf("the backend of the reset connection: %v", err)
	}
	if v, ok := waitCounter(t, l.Lab, "xlb_connections_closed_total", map[string]string{"initiator": "client", "reason": "rst"}, 30*time.Second,
		func(v float64) bool { return v >= 1 }); !ok {
		t.Fatalf("closed by a client RST: %v, want 1: the exact RST did not end its pair", v)
	}
	rounds := held.finish(t)
	t.Logf("%d connections survived the in-window RSTs (%d round trips); the exact RST ended its pair", len(held.conns), rounds)
	stopXLB(t, l.Lab, p)
}

// inWindow is an offset from a side's ISN past everything a held
// connection without round-trip loops has sent (the tuple line and one
// round trip: well under 2000 bytes) and inside its receiver's window
// (Linux advertises tens of kilobytes from the start).
func inWindow(rng *rand.Rand) uint32 { return 2000 + rng.Uint32N(6000) }
