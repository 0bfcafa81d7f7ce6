package config

import (
	"net/netip"
	"regexp"
	"slices"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// BGP is the optional `bgp:` block (DESIGN §6a, issue 15): the embedded
// speaker (pkg/bgp) announces Announce to every peer while the instance is
// ready and not drained. nil when the file omits it: no speaker.
type BGP struct {
	// LocalASN is this speaker's AS number, 1..4294967295 (four-octet AS
	// numbers, RFC 6793). YAML "local_asn"; required.
	LocalASN uint32
	// RouterID is the BGP identifier, an IPv4 address other than 0.0.0.0
	// (RFC 6286: unique within the AS). YAML "router_id": "auto" or an
	// address; default auto. Invalid (the zero Addr) means auto: this
	// host's own source address toward the first peer, which pkg/bgp
	// resolves at runtime (never the listen address, which every host of
	// a fleet shares). A router id equal to a service address (the listen
	// address or an announced /32) is a warning.
	RouterID netip.Addr
	// HoldTime is the hold time proposed to every peer; the keepalive
	// interval is a third of it (RFC 4271 §10). YAML "hold_time_secs";
	// MinBGPHoldTime..MaxBGPHoldTime (0, "no keepalives", is refused: a
	// dead host would keep its route); default DefaultBGPHoldTime.
	HoldTime time.Duration
	// GracefulRestart is the restart time advertised in the graceful
	// restart capability (RFC 4724): how long a peer keeps this host's
	// routes as stale after the session drops without a NOTIFICATION
	// (a hot upgrade, a restart, a crash). YAML "graceful_restart_secs";
	// 1..MaxBGPGracefulRestart (the capability's 12-bit field); default
	// DefaultBGPGracefulRestart.
	GracefulRestart time.Duration
	// AnnounceListen says whether the listen address as a /32 is
	// announced: the entry "listen" of YAML "announce".
	AnnounceListen bool
	// Announce are the other announced prefixes, in file order: IPv4,
	// canonical (no host bits), not the default route, unique. Each must
	// be owned by this host (checked at runtime by the daemon, not here).
	// YAML "announce" is a list of "listen" and prefixes; default
	// [listen] (AnnounceListen true, Announce nil); it announces at
	// least one route.
	Announce []netip.Prefix
	// Peers are the 1..MaxBGPPeers neighbours, unique by address.
	Peers []BGPPeer
	// WithdrawDelay is how long a stop keeps forwarding normally after
	// withdrawing the routes, before the seed's shutdown window (its RSTs)
	// begins (issue 28): the SYNs that routers still send this host while
	// the withdrawal converges are balanced, not reset. YAML
	// "withdraw_delay_secs"; 0..MaxBGPWithdrawDelay; default
	// DefaultBGPWithdrawDelay.
	WithdrawDelay time.Duration
}

// BGPPeer is one BGP neighbour (DESIGN §6a).
type BGPPeer struct {
	// Address is the peer's IPv4 unicast address, not the listen
	// address. YAML "address"; required.
	Address netip.Addr
	// ASN is the peer's AS number, 1..4294967295; equal to LocalASN for
	// iBGP. YAML "asn"; required.
	ASN uint32
	// Port is the peer's BGP port, 1..65535. YAML "port"; default
	// DefaultBGPPort.
	Port uint16
	// PasswordEnv, when not empty, names the environment variable that
	// holds the session's TCP MD5 password (RFC 2385): a POSIX variable
	// name. The password never comes from the file; pkg/bgp fails the
	// speaker's start when the variable is empty. YAML "password_env".
	PasswordEnv string
}

// bgp defaults (DESIGN §6a, issue 15) and limits.
const (
	DefaultBGPHoldTime        = 9 * time.Second
	DefaultBGPGracefulRestart = 120 * time.Second
	DefaultBGPPort            = 179
	DefaultBGPWithdrawDelay   = 5 * time.Second

	// MinBGPHoldTime is RFC 4271's smallest non-zero hold time;
	// MaxBGPHoldTime the largest its 16-bit field holds.
	MinBGPHoldTime = 3 * time.Second
	MaxBGPHoldTime = 65535 * time.Second
	// MaxBGPGracefulRestart is the largest restart time RFC 4724's 12-bit
	// field holds.
	MaxBGPGracefulRestart = 4095 * time.Second
	// MaxBGPWithdrawDelay bounds bgp.withdraw_delay_secs: a router that
	// has not converged in ten minutes is not waited for (the unit's stop
	// timeout is extended by this much, as for shutdown_timeout).
	MaxBGPWithdrawDelay = 600 * time.Second
	// MaxBGPPeers bounds len(bgp.peers): a load balancer peers with its
	// top-of-rack routers, a handful at most (issue 15).
	MaxBGPPeers = 16

	// BGPAnnounceListen is the announce entry that stands for the listen
	// address as a /32.
	BGPAnnounceListen = "listen"
)

// maxASN is the largest four-octet AS number (RFC 6793).
const maxASN = 1<<32 - 1

// envName is a POSIX environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// decodeBGP reads the bgp mapping. Ranges, "auto", the announce entries'
// syntax and their duplicates are checked here; required fields, the
// router id's family, the peers and the rules that need the listen
// address are checked by validator.bgp.
func (d *decoder) decodeBGP(n *yaml.Node, path string) *BGP {
	b := &BGP{
		HoldTime:        DefaultBGPHoldTime,
		GracefulRestart: DefaultBGPGracefulRestart,
		AnnounceListen:  true,
		WithdrawDelay:   DefaultBGPWithdrawDelay,
	}
	secs := func(dst *time.Duration, lo, hi time.Duration) func(*yaml.Node, string) {
		return func(n *yaml.Node, p string) {
			if v, ok := d.integer(n, p, int64(lo/time.Second), int64(hi/time.Second), " seconds"); ok {
				*dst = time.Duration(v) * time.Second
			}
		}
	}
	d.mapping(n, path, []field{
		{"local_asn", d.asn(&b.LocalASN)},
		{"router_id", func(n *yaml.Node, p string) {
			if n.Kind == yaml.ScalarNode && n.Value == "auto" {
				b.RouterID = netip.Addr{}
				return
			}
			b.RouterID, _ = d.addr(n, p)
		}},
		{"hold_time_secs", secs(&b.HoldTime, MinBGPHoldTime, MaxBGPHoldTime)},
		{"graceful_restart_secs", secs(&b.GracefulRestart, time.Second, MaxBGPGracefulRestart)},
		{"announce", func(n *yaml.Node, p string) { d.decodeAnnounce(n, p, b) }},
		{"peers", func(n *yaml.Node, p string) { b.Peers = d.decodeBGPPeers(n, p) }},
		{"withdraw_delay_secs", secs(&b.WithdrawDelay, 0, MaxBGPWithdrawDelay)},
	})
	return b
}

// asn returns a decode function storing an AS number in dst.
func (d *decoder) asn(dst *uint32) func(*yaml.Node, string) {
	return func(n *yaml.Node, p string) {
		if v, ok := d.integer(n, p, 1, maxASN, ""); ok {
			*dst = uint32(v)
		}
	}
}

// decodeAnnounce reads the announce list: "listen" or canonical IPv4
// prefixes other than the default route, each at most once.
func (d *decoder) decodeAnnounce(n *yaml.Node, path string, b *BGP) {
	items, ok := d.sequence(n, path)
	if !ok {
		return
	}
	b.AnnounceListen, b.Announce = false, nil
	first := map[string]int{}
	for i, it := range items {
		p := indexPath(path, i)
		s, ok := d.str(it, p)
		if !ok {
			continue
		}
		key := s
		if s != BGPAnnounceListen {
			pfx, ok := d.prefix(it, p, s)
			if !ok {
				continue
			}
			key = pfx.String()
			b.Announce = append(b.Announce, pfx)
		} else {
			b.AnnounceListen = true
		}
		if j, dup := first[key]; dup {
			d.errorAt(it.Line, p, "duplicate entry %s (also %s)", key, indexPath(path, j))
			continue
		}
		first[key] = i
	}
	if len(items) == 0 {
		d.fail(n.Line, path, `must list at least 1 entry ("listen" or a prefix); omit bgp to announce nothing`)
	}
}

// prefix parses one announce entry other than "listen".
func (d *decoder) prefix(n *yaml.Node, path, s string) (netip.Prefix, bool) {
	pfx, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		if a, aerr := netip.ParseAddr(s); aerr == nil && a.Is4() {
			d.fail(n.Line, path, "%q is an address, not a prefix; write %s/32", s, s)
		} else {
			d.fail(n.Line, path, `must be "listen" or an IPv4 prefix such as 192.0.2.10/32, got %q`, s)
		}
	case !pfx.Addr().Is4():
		d.fail(n.Line, path, "%s: IPv6 is not supported yet; use an IPv4 prefix", s)
	case pfx.Bits() == 0:
		d.fail(n.Line, path, "must not be the default route %s", s)
	case pfx.Masked() != pfx:
		d.fail(n.Line, path, "%s has host bits set; write %s", s, pfx.Masked())
	case pfx.Addr().IsLoopback() || pfx.Addr().IsMulticast() || pfx.Addr().IsUnspecified():
		d.fail(n.Line, path, "must be a unicast prefix, got %s", s)
	default:
		return pfx, true
	}
	return netip.Prefix{}, false
}

// decodeBGPPeers reads the peers; an omitted port is DefaultBGPPort.
func (d *decoder) decodeBGPPeers(n *yaml.Node, path string) []BGPPeer {
	return decodeSequence(d, n, path, func(it *yaml.Node, p string, peer *BGPPeer) {
		peer.Port = DefaultBGPPort
		d.mapping(it, p, []field{
			{"address", func(n *yaml.Node, p string) { peer.Address, _ = d.addr(n, p) }},
			{"asn", d.asn(&peer.ASN)},
			{"port", func(n *yaml.Node, p string) { d.setPort(n, p, &peer.Port) }},
			{"password_env", d.into(&peer.PasswordEnv)},
		})
	})
}

// bgp: local_asn set; router_id IPv4 and not 0.0.0.0, and a warning when
// it is a service address (a listen address or an announced /32, which
// the fleet's hosts share; RFC 6286 wants it unique); "listen" and an
// explicit prefix equal to a listen address /32 not both; 1..MaxBGPPeers
// peers with a usable IPv4 address (no listen address), unique, an asn,
// and a POSIX name in password_env (DESIGN §6a, §9, issue 15). "Listen
// address" is every service's.
func (v *validator) bgp() {
	const path = "bgp"
	b := v.c.BGP
	if b == nil || v.failed(path) {
		return
	}
	v.required(childPath(path, "local_asn"))
	if p, id := childPath(path, "router_id"), b.RouterID; id.IsValid() && !v.failed(p) {
		switch {
		case !id.Is4():
			v.errorf(p, `must be "auto" or an IPv4 address, got %s`, id)
		case id.IsUnspecified():
			v.errorf(p, "must not be 0.0.0.0 (RFC 6286: a non-zero identifier)")
		case v.serviceAddress(id) >= 0:
			v.warnf(p, "%s is the listen address, which every host announcing this service shares; RFC 6286 wants the router id unique in the AS: use this host's own address, or auto (its address toward the first peer)", id)
		case slices.Contains(b.Announce, netip.PrefixFrom(id, 32)):
			v.warnf(p, "%s is an announced service address, which every host announcing it shares; RFC 6286 wants the router id unique in the AS: use this host's own address, or auto (its address toward the first peer)", id)
		}
	}
	if b.AnnounceListen {
		for _, pfx := range b.Announce {
			if pfx.Bits() == 32 && v.serviceAddress(pfx.Addr()) >= 0 {
				v.errorf(childPath(path, "announce"), `"listen" and %s both announce the listen address; keep one`, pfx)
				break
			}
		}
	}
	v.bgpPeers(b.Peers)
}

func (v *validator) bgpPeers(peers []BGPPeer) {
	const path = "bgp.peers"
	if !v.required(path) {
		return
	}
	switch n := len(peers); {
	case n == 0:
		v.errorf(path, "at least 1 peer is required")
	case n > MaxBGPPeers:
		v.errorf(path, "at most %d peers are supported, got %d", MaxBGPPeers, n)
	}
	first := map[netip.Addr]int{}
	for i, peer := range peers {
		p := indexPath(path, i)
		if ap := childPath(p, "address"); v.required(ap) && v.unicastIPv4(ap, peer.Address) {
			switch j, dup := first[peer.Address]; {
			case v.serviceAddress(peer.Address) >= 0:
				v.errorf(ap, "must not be the listen address %s", peer.Address)
			case dup:
				v.errorf(ap, "duplicate peer %s (also %s)", peer.Address, indexPath(path, j))
			default:
				first[peer.Address] = i
			}
		}
		v.required(childPath(p, "asn"))
		if ep := childPath(p, "password_env"); v.set[ep] && !v.failed(ep) && !envName.MatchString(peer.PasswordEnv) {
			v.errorf(ep, "must name an environment variable (letters, digits and '_', not starting with a digit), got %q", peer.PasswordEnv)
		}
	}
}

// bgpEqual compares two bgp blocks; nil is "no speaker".
func bgpEqual(a, b *BGP) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.LocalASN == b.LocalASN && a.RouterID == b.RouterID && a.HoldTime == b.HoldTime &&
		a.GracefulRestart == b.GracefulRestart && a.AnnounceListen == b.AnnounceListen &&
		slices.Equal(a.Announce, b.Announce) && slices.Equal(a.Peers, b.Peers) && a.WithdrawDelay == b.WithdrawDelay
}

// bgp renders the block with every field: router_id "auto" when unset,
// announce with "listen" first, password_env only where set.
func (m *marshaler) bgp(b *BGP) *yaml.Node {
	id := str("auto")
	if b.RouterID.IsValid() {
		id = str(b.RouterID.String())
	}
	announce := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	if b.AnnounceListen {
		announce.Content = append(announce.Content, str(BGPAnnounceListen))
	}
	for _, p := range b.Announce {
		announce.Content = append(announce.Content, str(p.String()))
	}
	peers := &yaml.Node{Kind: yaml.SequenceNode}
	for i, p := range b.Peers {
		pn := mapNode(
			"address", m.addr(childPath(indexPath("bgp.peers", i), "address"), p.Address),
			"asn", integer(p.ASN),
			"port", integer(p.Port))
		if p.PasswordEnv != "" {
			pn.Content = append(pn.Content, str("password_env"), str(p.PasswordEnv))
		}
		peers.Content = append(peers.Content, pn)
	}
	return mapNode(
		"local_asn", integer(b.LocalASN),
		"router_id", id,
		"hold_time_secs", m.seconds("bgp.hold_time_secs", b.HoldTime),
		"graceful_restart_secs", m.seconds("bgp.graceful_restart_secs", b.GracefulRestart),
		"announce", announce,
		"peers", peers,
		"withdraw_delay_secs", m.seconds("bgp.withdraw_delay_secs", b.WithdrawDelay))
}

// serviceAddress returns the index of the service whose explicit listen
// address is a, or -1.
func (v *validator) serviceAddress(a netip.Addr) int {
	for _, r := range v.svcs {
		if !r.s.Listen.Auto && r.s.Listen.IP.IsValid() && r.s.Listen.IP == a {
			return r.i
		}
	}
	return -1
}
