package snapshot

import (
	"net/netip"
	"time"
)

// BGP is the embedded BGP speaker's view (DESIGN §6a); nil when the
// config has no bgp section.
type BGP struct {
	// Peers in config order.
	Peers []BGPPeer
	// Announced are the prefixes announced right now to at least one
	// established peer (empty while the instance is not ready, drained
	// or shutting down, and while no session is established).
	Announced []netip.Prefix
}

// BGPPeer is one configured peer's session.
type BGPPeer struct {
	Address netip.Addr
	ASN     uint32
	// State is the session's RFC 4271 state in lower case: idle, connect,
	// active, opensent, openconfirm, established.
	State string
	// Since is when the session was established (its uptime); zero
	// while it is not.
	Since time.Time
}

// BGPEstablished is the State of a session that is up.
const BGPEstablished = "established"
