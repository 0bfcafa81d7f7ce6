package bgp

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	api "github.com/osrg/gobgp/v4/api"
)

// Status is the speaker's state for the status API and metrics (DESIGN
// §6a): `bgp: {peers: [...], announced: [...]}`.
type Status struct {
	// Peers are the configured peers, in config order.
	Peers []PeerStatus
	// Announced are the prefixes this speaker announces to at least one
	// established peer (Routes), in Options.Prefixes' order; empty while
	// the verdict announces nothing, after Withdraw or Stop, and while no
	// session is established.
	Announced []netip.Prefix
}

// PeerStatus is one peer's session.
type PeerStatus struct {
	Address netip.Addr
	ASN     uint32
	// State is the BGP FSM state (RFC 4271 §8): "idle", "connect",
	// "active", "opensent", "openconfirm" or "established". A peer whose
	// session is not opened yet (before the first verdict) or any more
	// (after Stop) is "idle".
	State string
	// Uptime is how long the session has been established; 0 when it is
	// not.
	Uptime time.Duration
}

// Established is the FSM state of an up session.
const Established = "established"

// statusTimeout bounds the query of GoBGP's peer table.
const statusTimeout = 2 * time.Second

// Status returns the peers' sessions and the announced prefixes. It never
// fails: a peer GoBGP cannot report on (not started, stopped) is idle.
func (s *Speaker) Status() Status {
	s.mu.Lock()
	srv, live := s.srv, s.sessions && !s.stopped
	var announced []netip.Prefix
	if !s.stopped {
		announced = slices.Clone(s.announced)
	}
	s.mu.Unlock()
	known := map[netip.Addr]*api.Peer{}
	if live {
		ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
		defer cancel()
		// An error (the server stopped meanwhile) leaves every peer idle.
		_ = srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
			if a, err := netip.ParseAddr(p.GetState().GetNeighborAddress()); err == nil {
				known[a] = p
			}
		})
	}
	now := time.Now()
	st := Status{Peers: make([]PeerStatus, 0, len(s.o.Config.Peers))}
	states := make([]PeerState, 0, len(s.o.Config.Peers))
	for _, c := range s.o.Config.Peers {
		ps := PeerStatus{Address: c.Address, ASN: c.ASN, State: "idle"}
		if p, ok := known[c.Address]; ok {
			ps.State = sessionState(p.GetState().GetSessionState())
			if up := p.GetTimers().GetState().GetUptime(); ps.State == Established && up != nil {
				ps.Uptime = max(now.Sub(up.AsTime()), 0)
			}
		}
		st.Peers = append(st.Peers, ps)
		states = append(states, PeerState{Address: c.Address, Established: ps.State == Established})
	}
	seen := map[netip.Prefix]bool{}
	for _, c := range s.o.Config.Peers {
		for _, p := range Routes(announced, states)[c.Address] {
			if !seen[p] {
				seen[p] = true
				st.Announced = append(st.Announced, p)
			}
		}
	}
	return st
}

// sessionState names GoBGP's FSM state as RFC 4271 does, in lower case.
func sessionState(s api.PeerState_SessionState) string {
	if s == api.PeerState_SESSION_STATE_UNSPECIFIED {
		return "idle"
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATE_"))
}
