package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// The renderers are pure: one decoded status document in, text out. They
// never print client addresses (the document has none) and are pinned by
// golden files in testdata.

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// renderStatus writes the `xlbctl status` summary: one "Key:<tab>value"
// line per item, aligned; each service's (DESIGN §9) in a block of
// indented lines after its "Service:" line, then the instance's.
func renderStatus(w io.Writer, d *api.Document) error {
	t := newTable(w)
	row := func(k, format string, a ...any) { fmt.Fprintf(t, "%s:\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("Name", "%s", orDash(d.Name))
	row("Version", "%s", version(d))
	row("Lifecycle", "%s", lifecycle(d.Lifecycle))
	row("Readiness", "%s", readiness(d.Readiness))
	if d.Drained {
		row("Drained", "yes%s: readiness answers draining, every packet is still forwarded (xlbctl undrain ends it)", drainOrigin(d))
	}
	if sd := d.Shutdown; sd != nil {
		if wait := sd.ResetsFromUnixMs - d.GeneratedAtUnixMs; wait > 0 {
			row("Shutdown", "routes withdrawn, forwarding as before; the reset window begins in %ds", (wait+999)/1000)
		} else {
			row("Shutdown", "%ds left in the reset window", sd.SecondsLeft)
		}
	}
	row("Uptime", "%s", uptime(d.UptimeSeconds))
	for _, svc := range d.Services {
		row("Service", "%s: %s", orDash(svc.Name), serviceState(svc))
		row("  Listen", "%s", serviceListen(svc))
		if u := svc.UDP; u != nil {
			row("  UDP pairs", "%s", serviceUDP(*u))
		} else {
			row("  Connections", "%s", serviceConnections(svc.Connections))
		}
		row("  Backends", "%s", backendCounts(svc.Backends))
		row("  Provider", "%s", provider(svc.Provider))
	}
	if len(d.Services) == 0 {
		row("Service", "none yet")
	}
	row("SNAT", "%s", snat(d.SNAT))
	row("XDP", "%s", attachments(d.Dataplane))
	row("Kernel", "%s", kernelFeatures(d.Dataplane.Features))
	fm := d.Dataplane.FlowMap
	row("Flow map", "%d / %d entries (%s)", fm.Entries, fm.Capacity, percent(fm.Entries, fm.Capacity))
	c := d.Connections
	row("Connections", "active %d, timewait %d, opened %d, closed %d, orphaned %d (every service)",
		c.Active, c.TimeWait, c.OpenedTotal, c.ClosedTotal, c.OrphanedTotal)
	if hasUDP(d) {
		row("UDP pairs", "%s", udpPairs(d.UDPPairs))
	}
	if d.BGP != nil {
		row("BGP", "%s", bgpLine(d.BGP))
	}
	row("Sample age", "%s", sampleLine(d.Dataplane))
	row("Maintenance", "%s", maintenance(d))
	row("Close events", "%s", closeEvents(d.Maintenance.CloseEvents))
	row("Config", "%s", configLine(d.Config))
	row("Upgrades", "%s", upgrades(d.Upgrades))
	row("Sysctls", "%s", hostSettings(d.HostSettings))
	return t.Flush()
}

// renderBackends writes the `xlbctl backends` tables, one per service
// after its header line, in the document's (id) order; ACTIVE and OPENED
// count connections, or UDP pairs in a UDP service; WEIGHT is the
// backend's weight and SHARE its share of the service's new connections
// as the table schedules them (table_share); the last column, REASON,
// says why a backend is unreachable or unhealthy ("-" otherwise). Bytes
// as u writes them.
func renderBackends(w io.Writer, d *api.Document, u units) error {
	for i, svc := range d.Services {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, serviceHeader(svc))
		t := newTable(w)
		fmt.Fprintln(t, "NAME\tIP\tSTATE\tNEW\tWEIGHT\tSHARE\tACTIVE\tOPENED\tSENT\tRECEIVED\tHEALTH\tREASON")
		for _, b := range svc.Backends {
			active, opened := backendPairs(b)
			fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", orDash(b.Name), orDash(b.IP), b.State,
				yesNo(b.AvailableForNewConnections), b.Weight, share(b.TableShare), active, opened,
				u.bytes(b.SentBytesTotal), u.bytes(b.ReceivedBytesTotal), healthCell(b.Health, b.Reason), orDash(b.Reason))
		}
		if err := t.Flush(); err != nil {
			return err
		}
		if len(svc.Backends) == 0 {
			fmt.Fprintln(w, "(no backends)")
		}
	}
	if len(d.Services) == 0 {
		_, err := fmt.Fprintln(w, "(no services yet)")
		return err
	}
	return nil
}

// share is a backend's table share as a percentage with one decimal:
// "50.0%", "33.3%", "0.0%".
func share(f float64) string {
	return fmt.Sprintf("%.1f%%", f*100)
}

// bgpLine summarises the speaker: sessions up, and what is announced.
func bgpLine(b *api.BGP) string {
	up := 0
	var down []string
	for _, p := range b.Peers {
		if p.State == "established" {
			up++
		} else {
			down = append(down, p.Address+" "+p.State)
		}
	}
	s := fmt.Sprintf("%d/%d peers established", up, len(b.Peers))
	if len(down) > 0 {
		s += " (" + strings.Join(down, ", ") + ")"
	}
	if len(b.Announced) == 0 {
		return s + "; announcing nothing"
	}
	return s + "; announcing " + strings.Join(b.Announced, ", ")
}

// healthCell is a backend's last health check for the backends table:
// "-" without checks, "pending" before the first, else the result with
// its error ("fail: connect: connection refused"), the error left out when
// the backend's reason (the REASON column) already says it.
func healthCell(h *api.BackendHealth, reason string) string {
	switch {
	case h == nil:
		return "-"
	case h.LastResult == "":
		return "pending"
	case h.LastError != "" && !strings.Contains(reason, h.LastError):
		return string(h.LastResult) + ": " + h.LastError
	}
	return string(h.LastResult)
}

// renderFlows writes the `xlbctl flows` counts: flow map fill, pair
// states, opened/closed by initiator and reason, orphans, repairs and
// refused SYNs, then each service's connection counts (DESIGN §9), and
// each UDP service's pair counts in a table of their own (issue 31).
// Counts only, never a connection's addresses.
func renderFlows(w io.Writer, d *api.Document) error {
	t := newTable(w)
	row := func(k, format string, a ...any) { fmt.Fprintf(t, "%s:\t%s\n", k, fmt.Sprintf(format, a...)) }
	fm, c, k := d.Dataplane.FlowMap, d.Connections, d.Dataplane.Counters
	row("Flow map", "%d / %d entries, %s full (2 entries per connection)", fm.Entries, fm.Capacity, percent(fm.Entries, fm.Capacity))
	row("Connections", "active %d, timewait %d, resetting %d", c.Active, c.TimeWait, c.Resetting)
	row("Opened", "%d", c.OpenedTotal)
	row("Closed", "%d", c.ClosedTotal)
	row("Orphaned", "%d (idle past orphan_ttl_secs)", c.OrphanedTotal)
	row("Embryonic expired", "%d (handshake not completed within embryonic_ttl_secs)", c.EmbryonicExpiredTotal)
	if hasUDP(d) {
		row("UDP pairs", "%s", udpPairs(d.UDPPairs))
	}
	row("Invariant repairs", "%d (lone entries now %d, data-path violations %d)",
		c.InvariantRepairsTotal, c.LoneEntries, k.InvariantViolationsTotal)
	row("Refused SYNs", "snat port exhausted %d, table full %d, no backend %d, fib miss %d",
		k.SNATPortExhaustedTotal, k.TableFullTotal, k.NoBackendTotal, k.FIBMissTotal)
	row("SNAT ports", "taken over %d, reused from TIME_WAIT by timestamps %d, fallbacks to another backend %d, drops on ports held for TIME_WAIT %d",
		k.SNATTakeoversTotal, k.SNATTimewaitReusesTotal, k.SNATFallbacksTotal, k.HoldDropsTotal)
	row("Dropped", "out-of-window RSTs %d, TTL <= 1 %d, pair gone in flight %d", k.RSTOutOfWindowTotal, k.TTLExceededTotal, k.PairGoneInFlightTotal)
	row("Inexact RSTs", "%d (in the window, not exact: forwarded, the pair kept)", k.RSTInexactTotal)
	row("ICMP translated", "to clients %d, to backends %d", k.ICMPToClientTotal, k.ICMPToBackendTotal)
	row("Next hops", "refreshed %d (freed next hops looked up again)", k.NextHopRefreshesTotal)
	row("Not ours", "%d (frames for another host's MAC, passed to the kernel)", k.NotOursTotal)
	row("IPv4 fragments", "forwarded %d, passed %d (of no known pair or datagram)", k.FragmentsForwardedTotal, k.FragmentsPassedTotal)
	row("IPv4 options", "forwarded %d", k.IPOptionsForwardedTotal)
	row("Shutdown resets", "%d", k.ShutdownResetsTotal)
	row("Sample age", "%s", sampleLine(d.Dataplane))
	if d.Maintenance.Failing {
		row("Maintenance", "%s", maintenance(d))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	by := c.ClosedBy
	t = newTable(w)
	fmt.Fprintln(t, "CLOSED BY\tFIN\tRST\tTOTAL")
	fmt.Fprintf(t, "client\t%d\t%d\t%d\n", by.ClientFIN, by.ClientRST, by.ClientFIN+by.ClientRST)
	fmt.Fprintf(t, "backend\t%d\t%d\t%d\n", by.BackendFIN, by.BackendRST, by.BackendFIN+by.BackendRST)
	fmt.Fprintf(t, "total\t%d\t%d\t%d\n", by.ClientFIN+by.BackendFIN, by.ClientRST+by.BackendRST, c.ClosedTotal)
	if err := t.Flush(); err != nil {
		return err
	}
	if len(d.Services) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t = newTable(w)
	fmt.Fprintln(t, "SERVICE\tSTATE\tACTIVE\tTIMEWAIT\tOPENED\tCLOSED\tCLIENT FIN\tCLIENT RST\tBACKEND FIN\tBACKEND RST\tORPHANED\tEMBRYONIC EXPIRED")
	var udp []api.Service
	for _, svc := range d.Services {
		if svc.UDP != nil {
			udp = append(udp, svc)
			continue
		}
		sc, by := svc.Connections, svc.Connections.ClosedBy
		fmt.Fprintf(t, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", orDash(svc.Name), svc.State,
			sc.Active, sc.TimeWait, sc.OpenedTotal, sc.ClosedTotal, by.ClientFIN, by.ClientRST, by.BackendFIN, by.BackendRST,
			sc.OrphanedTotal, sc.EmbryonicExpiredTotal)
	}
	if err := t.Flush(); err != nil || len(udp) == 0 {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w)
	fmt.Fprintln(t, "UDP SERVICE\tSTATE\tACTIVE\tUNREPLIED\tREPLIED\tCAP\tOPENED\tEXPIRED UNREPLIED\tEXPIRED REPLIED\tOVER CAP")
	for _, svc := range udp {
		u := svc.UDP
		fmt.Fprintf(t, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", orDash(svc.Name), svc.State, u.Active, u.Unreplied, u.Replied,
			u.UnrepliedMax, u.OpenedTotal, u.ExpiredTotal.Unreplied, u.ExpiredTotal.Replied, u.OverCapTotal)
	}
	return t.Flush()
}

func version(d *api.Document) string {
	if d.Revision == "" || d.Revision == buildinfo.UnknownRevision {
		return orDash(d.Version)
	}
	rev := d.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return fmt.Sprintf("%s (%s)", orDash(d.Version), rev)
}

// lifecycle is the lifecycle word, with what handing_over means.
func lifecycle(l api.Lifecycle) string {
	if l == api.HandingOver {
		return string(l) + " (hot upgrade: a new process is taking over; still serving)"
	}
	return string(l)
}

func readiness(r api.Readiness) string {
	if r.Ready {
		return "ready"
	}
	return "NOT READY (" + orDash(string(r.Reason)) + ")"
}

func listen(l api.Listen) string {
	ports := make([]string, 0, len(l.Ports))
	for _, p := range l.Ports {
		remote := strconv.Itoa(int(p.RemotePort))
		if p.RemotePort == 0 {
			remote = "(each backend's port)" // remote_port from discovery (provider.kubernetes)
		}
		ports = append(ports, fmt.Sprintf("%d->%s", p.LocalPort, remote))
	}
	if len(ports) == 0 {
		return orDash(l.IP)
	}
	return fmt.Sprintf("%s ports %s", orDash(l.IP), strings.Join(ports, ", "))
}

// snat lists the SNAT addresses, then the retired SNAT ranges live
// connections may still hold; a daemon older than the list sends ip only.
func snat(s api.SNAT) string {
	out := orDash(s.IP)
	if len(s.IPs) > 0 {
		out = strings.Join(s.IPs, ", ")
	}
	if len(s.Retired) == 0 {
		return out
	}
	retired := make([]string, 0, len(s.Retired))
	for _, r := range s.Retired {
		retired = append(retired, r.IP+" "+r.PortRange)
	}
	return out + "; retired, still held by connections: " + strings.Join(retired, ", ")
}

// hostSettings summarises the guarded host settings (sysctls): "2
// guarded, never reset", or the ones put back and how often; "-" from a
// daemon that does not report them.
func hostSettings(hs []api.HostSetting) string {
	if len(hs) == 0 {
		return "-"
	}
	var reset []string
	for _, h := range hs {
		if h.RepairsTotal > 0 {
			reset = append(reset, fmt.Sprintf("%s reset and put back %d times", h.Name, h.RepairsTotal))
		}
	}
	if len(reset) == 0 {
		return fmt.Sprintf("%d guarded, never reset", len(hs))
	}
	return strings.Join(reset, "; ")
}

func attachments(dp api.Dataplane) string {
	if len(dp.XDPAttachments) == 0 {
		return fmt.Sprintf("not attached (mode %s)", orDash(dp.XDPMode))
	}
	parts := make([]string, 0, len(dp.XDPAttachments))
	for _, a := range dp.XDPAttachments {
		p := a.Interface + " " + a.Mode
		if api.Path(a.Via) == api.PathNetlink {
			p += " (netlink)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// kernelFeatures names the optional kernel features that are not available
// and the fallback taken: "xdp_bpf_link refused: netlink; ring_buffer
// disabled", or "all optional features available".
func kernelFeatures(fs []api.Feature) string {
	if len(fs) == 0 {
		return "-"
	}
	var off []string
	for _, f := range fs {
		if api.FeatureState(f.State) == api.FeatureAvailable {
			continue
		}
		s := f.Name + " " + f.State
		if p := api.Path(f.Path); p != api.PathNotUsed && p != api.PathNotAttached {
			s += ": " + f.Path
		}
		if api.Path(f.Path) == api.PathUnpinned {
			s += " (a restart or crash loses every connection)"
		}
		off = append(off, s)
	}
	if len(off) == 0 {
		return "all optional features available"
	}
	return strings.Join(off, "; ")
}

// backendCounts summarises states in api.BackendStates order:
// "3 routable, 1 draining, 1 unreachable".
func backendCounts(bs []api.Backend) string {
	n := map[api.BackendState]int{}
	for _, b := range bs {
		n[b.State]++
	}
	parts := make([]string, 0, len(n))
	for _, st := range api.BackendStates() {
		parts = append(parts, fmt.Sprintf("%d %s", n[st], st))
	}
	return strings.Join(parts, ", ")
}

func provider(p api.Provider) string {
	stale := ""
	if p.Stale {
		stale = ", STALE: serving the routable set of the previous xlb until it syncs"
	}
	if p.Healthy {
		return orDash(p.Name) + " (healthy" + stale + ")"
	}
	return fmt.Sprintf("%s (UNHEALTHY: %s%s)", orDash(p.Name), orDash(p.Error), stale)
}

func sampleLine(dp api.Dataplane) string {
	if dp.SampleAgeMs == nil {
		return sampleAge(nil)
	}
	stale := time.Duration(dp.StaleAfterMs) * time.Millisecond
	return fmt.Sprintf("%s (cycle %d, stale after %s)", sampleAge(dp.SampleAgeMs), dp.SampleCycle, stale)
}

// maintenance summarises the maintenance loop's health: "ok", "ok (2
// failed cycles since start)", or FAILING with the spell, its length and
// the last error; while failing the pair figures are the last successful
// cycle's (dataplane.sample_cycle).
func maintenance(d *api.Document) string {
	m := d.Maintenance
	if !m.Failing {
		if m.ErrorsTotal == 0 {
			return "ok"
		}
		return fmt.Sprintf("ok (%d failed cycles since start)", m.ErrorsTotal)
	}
	spell := fmt.Sprintf("%d cycles in a row", m.ConsecutiveFailures)
	if m.FailingSinceUnixMs != nil {
		lasted := time.Duration(max(d.GeneratedAtUnixMs-*m.FailingSinceUnixMs, 0)) * time.Millisecond
		spell += ", for " + lasted.Round(time.Second).String()
	}
	return fmt.Sprintf("FAILING (%s; %d failed in total; figures from cycle %d; XDP keeps forwarding): %s",
		spell, m.ErrorsTotal, d.Dataplane.SampleCycle, orDash(m.LastError))
}

// closeEvents summarises how close events reach the maintenance loop:
// "ring_buffer, 0 lost", or with the lost ones "per_cpu_queue, 3 lost (the
// walk removes those pairs)"; "-" before the first sample or from a daemon
// that does not report close events (path "").
func closeEvents(ev api.CloseEvents) string {
	switch {
	case ev.Path == "":
		return "-"
	case ev.LostTotal == 0:
		return ev.Path + ", 0 lost"
	}
	return fmt.Sprintf("%s, %d lost (the walk removes those pairs)", ev.Path, ev.LostTotal)
}

func configLine(c api.Config) string {
	path := orDash(c.Path)
	switch {
	case c.Missing:
		return path + ": file missing (running config unchanged)"
	case c.Invalid != "":
		return path + ": file invalid (running config unchanged): " + c.Invalid
	case c.ReloadRequired:
		return fmt.Sprintf("%s: RELOAD REQUIRED (changed: %s; systemctl reload xlb applies it)", path, strings.Join(c.ChangedKeys, ", "))
	}
	return path + ": up to date"
}

// upgrades summarises how this process took the data path and the hot
// upgrades of its pinned state: "handed_over with 29 connection pairs; hot
// upgrades 3 ok, 1 failed (last failure: ...)", "fresh; hot upgrades 0 ok,
// 0 failed". "-" from a daemon that does not report it (start "").
func upgrades(u api.Upgrades) string {
	if u.Start == "" {
		return "-"
	}
	s := string(u.Start)
	if u.Start != api.StartFresh {
		s += fmt.Sprintf(" with %d connection pairs", u.AdoptedPairs)
	}
	s += fmt.Sprintf("; hot upgrades %d ok, %d failed", u.OK, u.Failed)
	if u.LastFailure != "" {
		s += " (last failure: " + u.LastFailure + ")"
	}
	return s
}

// drainOrigin is " since TIME (AGE ago) by WHO" for a drain the document
// describes, and whether this process took it over from an earlier one;
// "" when it says nothing.
func drainOrigin(d *api.Document) string {
	dr := d.Drain
	if dr == nil {
		return ""
	}
	var s string
	if dr.SinceUnixMs > 0 {
		since := time.UnixMilli(dr.SinceUnixMs).UTC()
		age := time.Duration(max(d.GeneratedAtUnixMs-dr.SinceUnixMs, 0)) * time.Millisecond
		s += fmt.Sprintf(" since %s (%s ago)", since.Format(time.RFC3339), age.Round(time.Second))
	}
	if dr.By != "" {
		s += " by " + dr.By
	}
	if dr.Restored {
		s += ", kept from a previous process"
	}
	return s
}
