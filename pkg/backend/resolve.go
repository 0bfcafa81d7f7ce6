package backend

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/hostnet"
)

// resolveAll resolves unresolved backends (all of them when full), waiting
// up to PendingWait for neighbours in flight during a full pass, then
// publishes the routable set if it changed.
func (m *Manager) resolveAll(ctx context.Context, full bool) {
	wait := full
	deadline := time.Now().Add(m.opts.PendingWait)
	for {
		pending := false
		for _, ip := range m.candidates(full) {
			route, err := m.res.Resolve(ip)
			m.record(ip, route, err)
			if errors.Is(err, hostnet.ErrNeighbourPending) {
				pending = true
			}
		}
		m.publish()
		if !pending || !wait || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
		full = false // retry only the unresolved ones
	}
}

func (m *Manager) candidates(full bool) []netip.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []netip.Addr
	for ip, s := range m.backends {
		if s.Discovered && !s.inherited && (full || !s.resolved) {
			out = append(out, ip)
		}
	}
	return out
}

// record stores a resolution result. A backend that stops being routable
// is logged once, when the reason is known (not while its neighbour is
// still being resolved), and again only after it was routable in between:
// a next hop that never answers ARP alternates between "pending" and
// "failed" every few seconds while the kernel retries, and that is one
// story, not a new one every time.
func (m *Manager) record(ip netip.Addr, route hostnet.Route, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.backends[ip]
	if !ok || !s.Discovered {
		return
	}
	log := m.opts.Log.WithFields(logrus.Fields{"backend": s.Name, "ip": ip})
	if err == nil {
		s.resolved, s.Route, s.warned = true, route, false
		m.startChecker(s) // the checks follow the route's interface
		m.settle(s)
		return
	}
	s.resolved, s.State, s.Reason = false, Unreachable, err.Error()
	if errors.Is(err, hostnet.ErrNeighbourPending) {
		log.WithError(err).Debug("backend not routable yet; retrying")
		return
	}
	if !s.warned {
		log.WithError(err).Warn("backend unreachable; skipped for new connections and retried")
		s.warned = true
	}
}

// settle decides a discovered, resolved backend's state from its weight
// and health checks: quiesced with weight 0 (whatever its checks say: it
// takes no new connections either way), else routable without checks or
// while they pass, unhealthy while they fail or have not answered yet
// (routable while an inherited one awaits its first answer: the data path
// had it routable). Becoming routable or quiesced is logged; the checks
// log their own transitions. The caller holds m.mu.
func (m *Manager) settle(s *Status) {
	if !s.Discovered || !s.resolved {
		return
	}
	state, reason := Routable, ""
	if s.checker != nil {
		h := s.checker.health()
		if !h.Healthy && !(s.holdRoutable && !h.Known) {
			state, reason = Unhealthy, h.reason()
		}
		if h.Known {
			s.holdRoutable = false
		}
	}
	if s.Weight == 0 && !s.inherited {
		state, reason = Quiesced, ReasonWeightZero
	}
	switch {
	case state == Routable && s.State != Routable:
		m.opts.Log.WithFields(logrus.Fields{"backend": s.Name, "ip": s.IP, "interface": s.Route.Interface, "next_hop": s.Route.NextHop}).Info("backend routable")
	case state == Quiesced && s.State != Quiesced:
		m.opts.Log.WithFields(logrus.Fields{"backend": s.Name, "ip": s.IP}).Info("backend has weight 0: no new connections, existing ones untouched")
	}
	s.State, s.Reason = state, reason
}
