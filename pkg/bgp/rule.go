package bgp

import (
	"net/netip"
	"slices"
)

// Want is the announce rule of DESIGN §6a: the prefixes are announced
// only while the instance is ready, not drained and not shutting down.
// The daemon passes Want(...) to Speaker.SetAnnounce.
func Want(ready, drained, shuttingDown bool) bool {
	return ready && !drained && !shuttingDown
}

// PeerState is what Routes needs of one peer: its address and whether
// its session is established.
type PeerState struct {
	Address     netip.Addr
	Established bool
}

// Routes returns, for each peer, the prefixes it holds from this speaker:
// all of prefixes when announce is set and the peer's session is
// established, none otherwise (a peer whose session is down holds nothing
// new; the routes it may keep as stale across a graceful restart are the
// peer's, not this speaker's, RFC 4724). Every peer has an entry; the
// slices are copies of prefixes in its order.
func Routes(announce bool, prefixes []netip.Prefix, peers []PeerState) map[netip.Addr][]netip.Prefix {
	out := make(map[netip.Addr][]netip.Prefix, len(peers))
	for _, p := range peers {
		if announce && p.Established {
			out[p.Address] = slices.Clone(prefixes)
		} else {
			out[p.Address] = nil
		}
	}
	return out
}
