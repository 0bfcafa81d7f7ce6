package bgp

import (
	"net/netip"
	"slices"
)

// ServiceReadiness is one service as the announce rule sees it (DESIGN
// §9): its listen address and whether the service is ready now (its own
// readiness, the instance-wide reasons included).
type ServiceReadiness struct {
	Name    string
	Address netip.Addr
	Ready   bool
}

// Announce is the announce rule of DESIGN §6a and §9 (issue 29 item 5):
// the prefixes, of the speaker's (Options.Prefixes, kept in their order),
// to announce now. Nothing while the instance is drained or shutting
// down. A service address (a prefix that is exactly some service's
// address, /32) is announced while some service on that address is
// ready, so a service that loses its last backend withdraws only its own
// address, unless another ready service shares it. Any other prefix
// (bgp.announce) is announced while some service is ready.
func Announce(drained, shuttingDown bool, prefixes []netip.Prefix, services []ServiceReadiness) []netip.Prefix {
	if drained || shuttingDown {
		return nil
	}
	ready := map[netip.Addr]bool{}
	service := map[netip.Addr]bool{}
	anyReady := false
	for _, s := range services {
		service[s.Address] = true
		if s.Ready {
			ready[s.Address], anyReady = true, true
		}
	}
	var out []netip.Prefix
	for _, p := range prefixes {
		if p.IsSingleIP() && service[p.Addr()] {
			if ready[p.Addr()] {
				out = append(out, p)
			}
			continue
		}
		if anyReady {
			out = append(out, p)
		}
	}
	return out
}

// PeerState is what Routes needs of one peer: its address and whether
// its session is established.
type PeerState struct {
	Address     netip.Addr
	Established bool
}

// Routes returns, for each peer, the prefixes it holds from this speaker:
// the announced ones when the peer's session is established, none
// otherwise (a peer whose session is down holds nothing new; the routes
// it may keep as stale across a graceful restart are the peer's, not
// this speaker's, RFC 4724). Every peer has an entry; the slices are
// copies of announced in its order.
func Routes(announced []netip.Prefix, peers []PeerState) map[netip.Addr][]netip.Prefix {
	out := make(map[netip.Addr][]netip.Prefix, len(peers))
	for _, p := range peers {
		if len(announced) > 0 && p.Established {
			out[p.Address] = slices.Clone(announced)
		} else {
			out[p.Address] = nil
		}
	}
	return out
}
