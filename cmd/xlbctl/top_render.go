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
	backends map[uint32]backendRates
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
	if dt <= 0 || cc.OpenedTotal < pc.OpenedTotal || cc.ClosedTotal < pc.ClosedTotal {
		return rates{}
	}
	r := rates{ok: true, seconds: dt, backends: map[uint32]backendRates{},
		opened: float64(cc.OpenedTotal-pc.OpenedTotal) / dt,
		closed: float64(cc.ClosedTotal-pc.ClosedTotal) / dt,
	}
	before := map[uint32]api.Backend{}
	for _, b := range prev.Backends {
		before[b.ID] = b
	}
	for _, b := range cur.Backends {
		p, found := before[b.ID]
		if !found || p.IP != b.IP || b.OpenedTotal < p.OpenedTotal ||
			b.SentBytesTotal < p.SentBytesTotal || b.ReceivedBytesTotal < p.ReceivedBytesTotal {
			continue // new, reused id or reset counters: no rate
		}
		r.backends[b.ID] = backendRates{
			opened:   float64(b.OpenedTotal-p.OpenedTotal) / dt,
			sent:     float64(b.SentBytesTotal-p.SentBytesTotal) / dt,
			received: float64(b.ReceivedBytesTotal-p.ReceivedBytesTotal) / dt,
		}
	}
	return r
}

// renderTop writes one `xlbctl top` frame (without the screen clearing
// and clock line, which the loop adds): the status summary, connection
// rates and the backends table with per-second rates.
func renderTop(w io.Writer, prev, cur *api.Document) error {
	if err := renderStatus(w, cur); err != nil {
		return err
	}
	r := computeRates(prev, cur)
	if r.ok {
		fmt.Fprintf(w, "\nRates: opened %s/s, closed %s/s (over %.1fs)\n\n", countRate(r.opened, true), countRate(r.closed, true), r.seconds)
	} else {
		fmt.Fprint(w, "\nRates: - (waiting for the next sample)\n\n")
	}
	t := newTable(w)
	fmt.Fprintln(t, "NAME\tIP\tSTATE\tNEW\tACTIVE\tCONN/S\tSENT/S\tRECV/S\tOPENED\tSENT\tRECEIVED")
	for _, b := range cur.Backends {
		br, ok := r.backends[b.ID]
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", orDash(b.Name), orDash(b.IP), b.State,
			yesNo(b.AvailableForNewConnections), b.ActiveConnections,
			countRate(br.opened, ok), humanRate(br.sent, ok), humanRate(br.received, ok),
			b.OpenedTotal, humanBytes(b.SentBytesTotal), humanBytes(b.ReceivedBytesTotal))
	}
	return t.Flush()
}
