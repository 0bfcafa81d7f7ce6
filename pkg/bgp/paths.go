package bgp

import (
	"fmt"
	"net/netip"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// paths builds the paths of prefixes: origin IGP and the next hop
// 0.0.0.0, which GoBGP replaces, for each peer, with the session's local
// address: this host's address toward that peer (Options.NextHop).
func paths(prefixes []netip.Prefix) ([]*apiutil.Path, error) {
	nh, err := bgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
	if err != nil {
		return nil, fmt.Errorf("bgp: next hop: %w", err)
	}
	out := make([]*apiutil.Path, 0, len(prefixes))
	for _, p := range prefixes {
		nlri, err := bgp.NewIPAddrPrefix(p)
		if err != nil {
			return nil, fmt.Errorf("bgp: prefix %s: %w", p, err)
		}
		out = append(out, &apiutil.Path{
			Family: bgp.RF_IPv4_UC,
			Nlri:   nlri,
			Attrs:  []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP), nh},
		})
	}
	return out, nil
}

// addPaths puts prefixes into GoBGP's table, which announces them to
// every established peer.
func (s *Speaker) addPaths(prefixes []netip.Prefix) error {
	ps, err := paths(prefixes)
	if err != nil {
		return err
	}
	if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: ps}); err != nil {
		return fmt.Errorf("bgp: announce %v: %w", prefixes, err)
	}
	return nil
}

// deletePaths removes prefixes from GoBGP's table, which withdraws them
// from every peer that holds them; the other paths stay.
func (s *Speaker) deletePaths(prefixes []netip.Prefix) error {
	ps, err := paths(prefixes)
	if err != nil {
		return err
	}
	if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: ps}); err != nil {
		return fmt.Errorf("bgp: withdraw %v: %w", prefixes, err)
	}
	return nil
}
