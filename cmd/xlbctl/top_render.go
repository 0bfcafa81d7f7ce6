package main

import (
	"fmt"
	"io"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// rates are per-second rates between two documents, computed over the
// time between their maintenance samples (the counters only move when a
// sample is taken, so wall-clock time between requests would jitter).
type rates struct {
	ok       bool    // false without two distinct samples or after a counter reset
	seconds  float64 // time between the samples
	opened   float64 // connections per second
	closed   float64
	refused  float64 // SYNs refused per second, every reason (refusedSYNs)
	sent     float64 // bytes per second client→backend, over the backends with a rate
	received float64 // bytes per second backend→client, likewise
	// udpOpened and udpExpired are UDP pairs created and expired per
	// second (issue 31).
	udpOpened, udpExpired float64
	backends              map[uint32]backendRates
}

// udpExpired sums the UDP pairs expired in either state.
func udpExpired(u api.UDPPairs) uint64 { return u.ExpiredTotal.Unreplied + u.ExpiredTotal.Replied }

// refusedSYNs sums the SYNs the data path refused or dropped, every
// reason (api.Counters: no SNAT port, flow map full, nothing routable, next
// hop unresolved).
func refusedSYNs(k api.Counters) uint64 {
	return k.SNATPortExhaustedTotal + k.TableFullTotal + k.NoBackendTotal + k.FIBMissTotal
}

type backendRates struct {
	opened, sent, received float64 // connections/s, bytes/s, bytes/s
}

// computeRates compares cur with the earlier prev (nil: no rates).
func computeRates(prev, cur *api.Document) rates {
	if prev == nil || prev.Dataplane.SampledAtUnixMs == nil || cur.Dataplane.SampledAtUnixMs == nil {
		return rates{}
	}
	dt := float64(*cur.Dataplane.SampledAtUnixMs-*prev.Dataplane.SampledAtUnixMs) / 1000
	pc, cc := prev.Connections, cur.Connections
	pr, cr := refusedSYNs(prev.Dataplane.Counters), refusedSYNs(cur.Dataplane.Counters)
	pu, cu := prev.UDPPairs, cur.UDPPairs
	if dt <= 0 || cc.OpenedTotal < pc.OpenedTotal || cc.ClosedTotal < pc.ClosedTotal || cr < pr ||
		cu.OpenedTotal < pu.OpenedTotal || udpExpired(cu) < udpExpired(pu) {
		return rates{}
	}
	r := rates{ok: true, seconds: dt, backends: map[uint32]backendRates{},
		opened:     float64(cc.OpenedTotal-pc.OpenedTotal) / dt,
		closed:     float64(cc.ClosedTotal-pc.ClosedTotal) / dt,
		refused:    float64(cr-pr) / dt,
		udpOpened:  float64(cu.OpenedTotal-pu.OpenedTotal) / dt,
		udpExpired: float64(udpExpired(cu)-udpExpired(pu)) / dt,
	}
	before := map[uint32]api.Backend{}
	for _, svc := range prev.Services {
		for _, b := range svc.Backends {
			before[b.ID] = b
		}
	}
	for _, svc := range cur.Services {
		for _, b := range svc.Backends {
			p, found := before[b.ID]
			_, opened := backendPairs(b)
			_, popened := backendPairs(p)
			if !found || p.IP != b.IP || opened < popened ||
				b.SentBytesTotal < p.SentBytesTotal || b.ReceivedBytesTotal < p.ReceivedBytesTotal {
				continue // new, reused id or reset counters: no rate
			}
			br := backendRates{
				opened:   float64(opened-popened) / dt,
				sent:     float64(b.SentBytesTotal-p.SentBytesTotal) / dt,
				received: float64(b.ReceivedBytesTotal-p.ReceivedBytesTotal) / dt,
			}
			r.backends[b.ID] = br
			r.sent += br.sent
			r.received += br.received
		}
	}
	return r
}

// renderTop writes one `xlbctl top` frame (without the cursor movement
// and clock line, which the loop adds): the status summary, the rates and
// each service's backends table with per-second rates and the REASON
// column; bytes as u writes them.
func renderTop(w io.Writer, prev, cur *api.Document, u units) error {
	if err := renderStatus(w, cur); err != nil {
		return err
	}
	r := computeRates(prev, cur)
	if r.ok {
		var udp string
		if hasUDP(cur) {
			udp = fmt.Sprintf(", UDP pairs opened %s/s, expired %s/s", countRate(r.udpOpened, true), countRate(r.udpExpired, true))
		}
		fmt.Fprintf(w, "\nRates: opened %s/s, closed %s/s, refused SYNs %s/s%s, sent %s, received %s (over %.1fs)\n\n",
			countRate(r.opened, true), countRate(r.closed, true), countRate(r.refused, true), udp,
			u.rate(r.sent, true), u.rate(r.received, true), r.seconds)
	} else {
		fmt.Fprint(w, "\nRates: - (waiting for the next sample)\n\n")
	}
	for i, svc := range cur.Services {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, serviceHeader(svc))
		t := newTable(w)
		fmt.Fprintln(t, "NAME\tIP\tSTATE\tNEW\tACTIVE\tCONN/S\tSENT/S\tRECV/S\tOPENED\tSENT\tRECEIVED\tREASON")
		for _, b := range svc.Backends {
			br, ok := r.backends[b.ID]
			active, opened := backendPairs(b)
			fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", orDash(b.Name), orDash(b.IP), b.State,
				yesNo(b.AvailableForNewConnections), active,
				countRate(br.opened, ok), u.rate(br.sent, ok), u.rate(br.received, ok),
				opened, u.bytes(b.SentBytesTotal), u.bytes(b.ReceivedBytesTotal), orDash(b.Reason))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	return nil
}
