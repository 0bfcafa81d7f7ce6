package status

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// Build turns one snapshot into the status document as of now. A nil
// snapshot (nothing published yet) reads as lifecycle starting. Readiness
// and backend states come from the snapshot's own rules
// (Snapshot.Readiness, Snapshot.BackendState); Build only reshapes.
func Build(s *snapshot.Snapshot, now time.Time) api.Document {
	if s == nil {
		s = &snapshot.Snapshot{Lifecycle: api.Starting}
	}
	ready, reason := s.Readiness(now)
	d := api.Document{
		SchemaVersion:     api.SchemaVersion,
		Name:              s.Name,
		Version:           s.Version,
		Revision:          s.Revision,
		Lifecycle:         s.Lifecycle,
		GeneratedAtUnixMs: now.UnixMilli(),
		Readiness:         api.Readiness{Ready: ready, Reason: reason},
		Drained:           s.Drained,
		BGP:               buildBGP(s.BGP, now),
		Dataplane:         buildDataplane(s, now),
		Maintenance:       buildMaintenance(s),
		Listen:            api.Listen{Ports: []api.PortMap{}},
		SNAT:              buildSNAT(s),
		Backends:          []api.Backend{},
		Services:          buildServices(s, now),
		Config: api.Config{
			Path:           s.Config.Path,
			ReloadRequired: s.Config.ReloadRequired,
			ChangedKeys:    append([]string{}, s.Config.ChangedKeys...),
			Invalid:        s.Config.Invalid,
			Missing:        s.Config.Missing,
		},
		Upgrades: api.Upgrades{
			Start:        s.Upgrades.Start,
			AdoptedPairs: s.Upgrades.AdoptedPairs,
			OK:           s.Upgrades.OK,
			Failed:       s.Upgrades.Failed,
			LastFailure:  s.Upgrades.LastFailure,
		},
		HostSettings: make([]api.HostSetting, 0, len(s.HostSettings)),
	}
	if s.Drained {
		d.Drain = &api.Drain{By: s.DrainedBy, Restored: s.DrainRestored}
		if !s.DrainedSince.IsZero() {
			d.Drain.SinceUnixMs = s.DrainedSince.UnixMilli()
		}
	}
	for _, h := range s.HostSettings {
		d.HostSettings = append(d.HostSettings, api.HostSetting{Name: h.Name, RepairsTotal: h.Repairs})
	}
	if !s.StartedAt.IsZero() {
		d.StartedAtUnixMs = s.StartedAt.UnixMilli()
		d.UptimeSeconds = int64(max(now.Sub(s.StartedAt), 0) / time.Second)
	}
	if s.Lifecycle == api.ShuttingDown {
		d.Shutdown = &api.Shutdown{SecondsLeft: secondsLeft(s.ShutdownDeadline, now)}
		if !s.ShutdownResetsFrom.IsZero() {
			d.Shutdown.ResetsFromUnixMs = s.ShutdownResetsFrom.UnixMilli()
		}
		if !s.ShutdownDeadline.IsZero() {
			d.Shutdown.DeadlineUnixMs = s.ShutdownDeadline.UnixMilli()
		}
	}
	// Schema version 1's fields: the only serving service's (the file's
	// one service; a service a reload removed or renamed may drain beside
	// it).
	if one, ok := onlyServing(d.Services); ok {
		d.Listen, d.Provider, d.Backends = one.Listen, one.Provider, one.Backends
	}
	if smp := s.Sample; smp != nil {
		d.Connections = api.Connections{
			Active:                smp.Active,
			TimeWait:              smp.TimeWait,
			Resetting:             smp.Resetting,
			OpenedTotal:           smp.Opened,
			ClosedTotal:           smp.Closed.Total(),
			ClosedBy:              api.ClosedBy(smp.Closed),
			OrphanedTotal:         smp.Orphaned,
			EmbryonicExpiredTotal: smp.EmbryonicExpired,
			InvariantRepairsTotal: smp.InvariantRepairs,
			LoneEntries:           smp.Lone,
		}
		u := smp.UDP
		d.UDPPairs = api.UDPPairs{
			Active:               u.Active,
			Unreplied:            u.Unreplied,
			OpenedTotal:          u.Opened,
			ExpiredTotal:         api.UDPExpired{Unreplied: u.ExpiredUnreplied, Replied: u.ExpiredReplied},
			OverCapTotal:         u.OverCap,
			NoBackendTotal:       u.NoBackend,
			FragmentsPassedTotal: u.FragsPassed,
		}
	}
	return d
}

func buildDataplane(s *snapshot.Snapshot, now time.Time) api.Dataplane {
	dp := api.Dataplane{
		XDPMode:          s.XDPMode,
		Interfaces:       append([]string{}, s.Interfaces...),
		XDPAttachments:   make([]api.XDPAttachment, 0, len(s.Attached)),
		SampleIntervalMs: s.SampleInterval.Milliseconds(),
		StaleAfterMs:     s.StaleAfter().Milliseconds(),
		Counters:         buildCounters(s),
	}
	for _, a := range s.Attached {
		dp.XDPAttachments = append(dp.XDPAttachments, api.XDPAttachment{Interface: a.Interface, Ifindex: a.Ifindex, Mode: string(a.Mode), Via: a.Via})
	}
	dp.Features = make([]api.Feature, 0, len(s.Features))
	for _, f := range s.Features {
		dp.Features = append(dp.Features, api.Feature{Name: string(f.Name), State: f.State, Detail: f.Detail, Path: f.Path})
	}
	// The daemon publishes attachments sorted; sorting again keeps the
	// document stable for any snapshot.
	slices.SortFunc(dp.XDPAttachments, func(a, b api.XDPAttachment) int { return strings.Compare(a.Interface, b.Interface) })
	smp := s.Sample
	if smp == nil {
		return dp
	}
	at, age := smp.Time.UnixMilli(), max(s.SampleAge(now), 0).Milliseconds()
	dp.SampledAtUnixMs, dp.SampleAgeMs = &at, &age
	dp.SampleCycle = smp.Cycle
	dp.SampleDurationMs = float64(smp.Duration.Microseconds()) / 1000
	dp.FlowMap = api.FlowMap{Entries: smp.FlowEntries, Capacity: smp.FlowCapacity}
	return dp
}

// buildCounters reshapes the data-path counters as last read
// (Snapshot.Counters, the values the metrics export); all zero before the
// first read.
func buildCounters(s *snapshot.Snapshot) api.Counters {
	if s.Counters == nil {
		return api.Counters{}
	}
	c := s.Counters
	return api.Counters{
		XDPActions: api.XDPActions{
			Aborted: c.Actions[0], Drop: c.Actions[1], Pass: c.Actions[2], TX: c.Actions[3], Redirect: c.Actions[4],
		},
		SNATPortExhaustedTotal:   c.SNATExhausted,
		TableFullTotal:           c.TableFull,
		NoBackendTotal:           c.NoBackend,
		FIBMissTotal:             c.FIBMiss,
		SYNReusedTotal:           c.SYNReused,
		PairsReplacedTotal:       c.PairsReplaced,
		InvariantViolationsTotal: c.InvariantViolations,
		ShutdownResetsTotal:      c.ShutdownResets,
		TTLExceededTotal:         c.TTLExceeded,
		RSTOutOfWindowTotal:      c.RSTOutOfWindow,
		RSTInexactTotal:          c.RSTInexact,
		PairGoneInFlightTotal:    c.PairGoneInFlight,
		SNATTakeoversTotal:       c.SNATTakeovers,
		SNATTimewaitReusesTotal:  c.SNATTimewaitReuses,
		SNATFallbacksTotal:       c.SNATFallbacks,
		HoldDropsTotal:           c.HoldDrops,
		ICMPToClientTotal:        c.ICMPToClient,
		ICMPToBackendTotal:       c.ICMPToBackend,
		NextHopRefreshesTotal:    c.NextHopRefreshes,
		NotOursTotal:             c.NotOurs,
		FragmentsForwardedTotal:  c.FragsForwarded,
		FragmentsPassedTotal:     c.FragsPassed,
		IPOptionsForwardedTotal:  c.IPOptionsForwarded,
	}
}

// buildSNAT lists the SNAT addresses and the retired SNAT spaces; IP
// repeats the first address for clients of the single-address document.
func buildSNAT(s *snapshot.Snapshot) api.SNAT {
	out := api.SNAT{IPs: make([]string, 0, len(s.SNAT)), Retired: make([]api.RetiredSNAT, 0, len(s.RetiredSNAT))}
	for _, a := range s.SNAT {
		out.IPs = append(out.IPs, addrString(a))
	}
	for _, r := range s.RetiredSNAT {
		out.Retired = append(out.Retired, api.RetiredSNAT{IP: addrString(r.Addr), PortRange: strconv.Itoa(int(r.PortLo)) + "-" + strconv.Itoa(int(r.PortHi))})
	}
	if len(out.IPs) > 0 {
		out.IP = out.IPs[0]
	}
	return out
}

// buildMaintenance reshapes the latest sample's maintenance health, close
// events and walk (all zero before the first sample).
func buildMaintenance(s *snapshot.Snapshot) api.Maintenance {
	if s.Sample == nil {
		return api.Maintenance{}
	}
	m, ev, w := s.Sample.Maintenance, s.Sample.CloseEvents, s.Sample.Walk
	out := api.Maintenance{
		Failing:             m.Failing(),
		ErrorsTotal:         m.Errors,
		ConsecutiveFailures: m.ConsecutiveFailures,
		LastError:           m.LastError,
		CloseEvents: api.CloseEvents{
			Path:               ev.Path,
			ReadTotal:          ev.Read,
			LostTotal:          ev.Lost,
			TimeWaitScheduled:  ev.TimeWaitScheduled,
			EmbryonicScheduled: ev.EmbryonicScheduled,
			HoldScheduled:      ev.HoldScheduled,
			UDPScheduled:       ev.UDPScheduled,
			UnscheduledTotal:   ev.Unscheduled,
		},
		Walk: api.Walk{
			PassesTotal:     w.Passes,
			Visited:         w.Visited,
			LastPassEntries: w.LastPassEntries,
			LastPassCycles:  w.LastPassCycles,
			PassCycles:      w.PassCycles,
		},
	}
	if m.Failing() && !m.FailingSince.IsZero() {
		since := m.FailingSince.UnixMilli()
		out.FailingSinceUnixMs = &since
	}
	return out
}

// buildServices lists the services (snapshot.Snapshot.ServiceList), each
// with its readiness, connections and backends.
func buildServices(s *snapshot.Snapshot, now time.Time) []api.Service {
	svcs := s.ServiceList()
	out := make([]api.Service, 0, len(svcs))
	for _, svc := range svcs {
		ready, reason, _ := s.ServiceReadiness(svc.Name, now)
		e := api.Service{
			ID:        svc.ID,
			Name:      svc.Name,
			State:     svc.State,
			Listen:    api.Listen{IP: addrString(svc.Listen), Ports: make([]api.PortMap, 0, len(svc.Ports))},
			Proto:     svc.Proto,
			Scheduler: svc.Scheduler,
			Readiness: api.Readiness{Ready: ready, Reason: reason},
			Provider: api.Provider{Name: svc.Provider, Healthy: svc.ProviderError == "", Error: svc.ProviderError,
				Synced: svc.ProviderSynced, Stale: svc.ProviderStale},
			Backends: buildBackends(s, svc),
		}
		e.Maglev, e.Table = buildSchedule(svc)
		for _, p := range svc.Ports {
			e.Listen.Ports = append(e.Listen.Ports, api.PortMap{LocalPort: p.LocalPort, RemotePort: p.RemotePort})
		}
		c := s.ServiceConnections(svc)
		e.Connections = api.ServiceConnections{
			Active:                c.Active,
			TimeWait:              c.TimeWait,
			OpenedTotal:           c.Opened,
			ClosedTotal:           c.Closed.Total(),
			ClosedBy:              api.ClosedBy(c.Closed),
			OrphanedTotal:         c.Orphaned,
			EmbryonicExpiredTotal: c.EmbryonicExpired,
		}
		if u, ok := s.ServiceUDP(svc); ok {
			e.UDP = &api.ServiceUDP{
				UnrepliedMax: u.UnrepliedMax,
				Active:       u.Active,
				Unreplied:    u.Unreplied,
				Replied:      u.Replied,
				OpenedTotal:  u.Opened,
				ExpiredTotal: api.UDPExpired{Unreplied: u.ExpiredUnreplied, Replied: u.ExpiredReplied},
				OverCapTotal: u.OverCap,
			}
		}
		out = append(out, e)
	}
	return out
}

// buildSchedule is a service's maglev settings (maglev only) and its
// schedule (weighted_round_robin and maglev); nil for what it lacks.
func buildSchedule(svc snapshot.Service) (*api.Maglev, *api.ServiceTable) {
	if !svc.TableScheduler() {
		return nil, nil
	}
	sch := svc.Schedule
	table := &api.ServiceTable{Size: sch.Len, RebuildsTotal: sch.Rebuilds, Overfull: svc.Overfull()}
	if !sch.BuiltAt.IsZero() {
		table.BuiltUnixMs = sch.BuiltAt.UnixMilli()
	}
	hash, size, ok := svc.MaglevSettings()
	if !ok {
		return nil, table
	}
	m := &api.Maglev{Hash: hash, TableSize: size}
	return m, table
}

// buildBackends lists the service's backends in id order, omitting those
// BackendState does not list (departed, no pairs left).
func buildBackends(s *snapshot.Snapshot, svc snapshot.Service) []api.Backend {
	out := make([]api.Backend, 0, len(svc.Backends))
	shutting := s.Lifecycle == api.ShuttingDown
	for _, b := range svc.Backends {
		state, ok := s.BackendState(b)
		if !ok {
			continue
		}
		e := api.Backend{
			ID:                         b.ID,
			Name:                       b.Name,
			IP:                         addrString(b.IP),
			State:                      state,
			Reason:                     b.Reason,
			Port:                       b.Port,
			AvailableForNewConnections: state == api.Routable && !shutting,
			Health:                     snapshot.BackendHealth(b),
			Timestamps:                 api.TimestampsUnknown,
			Weight:                     b.Weight,
			TableShare:                 svc.TableShare(b),
		}
		if svc.IsUDP() {
			e.UDP = &api.BackendUDP{}
		}
		if s.Sample != nil {
			if bs, found := s.Sample.Backend(b.ID); found {
				e.Timestamps = bs.Timestamps.Word()
				e.ActiveConnections, e.TimeWaitConnections = bs.Active, bs.TimeWait
				e.OpenedTotal = bs.Stats.Opened
				e.SentBytesTotal, e.ReceivedBytesTotal = bs.Stats.SentBytes, bs.Stats.ReceivedBytes
				e.SentPacketsTotal, e.ReceivedPacketsTotal = bs.Stats.SentPackets, bs.Stats.ReceivedPackets
				if e.UDP != nil {
					e.UDP.PairsActive, e.UDP.OpenedTotal = bs.UDPActive, bs.UDPOpened
				}
			}
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b api.Backend) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// buildBGP is the API's view of the speaker; nil without one.
func buildBGP(b *snapshot.BGP, now time.Time) *api.BGP {
	if b == nil {
		return nil
	}
	out := &api.BGP{Peers: make([]api.BGPPeer, 0, len(b.Peers)), Announced: make([]string, 0, len(b.Announced))}
	for _, p := range b.Peers {
		e := api.BGPPeer{Address: addrString(p.Address), ASN: p.ASN, State: p.State}
		if p.State == snapshot.BGPEstablished && !p.Since.IsZero() {
			e.UptimeSeconds = int64(now.Sub(p.Since) / time.Second)
		}
		out.Peers = append(out.Peers, e)
	}
	for _, pfx := range b.Announced {
		out.Announced = append(out.Announced, pfx.String())
	}
	return out
}

// addrString is the address in text, "" when unset.
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// secondsLeft is the time until deadline rounded up to whole seconds, never
// negative; 0 for a zero deadline.
func secondsLeft(deadline, now time.Time) int64 {
	if deadline.IsZero() {
		return 0
	}
	left := deadline.Sub(now)
	if left <= 0 {
		return 0
	}
	return int64((left + time.Second - 1) / time.Second)
}

// onlyServing is the one serving service of svcs, when there is exactly
// one.
func onlyServing(svcs []api.Service) (api.Service, bool) {
	var one api.Service
	n := 0
	for _, s := range svcs {
		if s.State == api.ServiceServing {
			one, n = s, n+1
		}
	}
	return one, n == 1
}
