package bgp

import (
	"fmt"
	"net/netip"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// addPaths puts every prefix into GoBGP's table with origin IGP and the
// next hop 0.0.0.0, which GoBGP replaces, for each peer, with the
// session's local address: this host's address toward that peer
// (Options.NextHop).
func (s *Speaker) addPaths() error {
	nh, err := bgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
	if err != nil {
		return fmt.Errorf("bgp: next hop: %w", err)
	}
	paths := make([]*apiutil.Path, 0, len(s.o.Prefixes))
	for _, p := range s.o.Prefixes {
		nlri, err := bgp.NewIPAddrPrefix(p)
		if err != nil {
			return fmt.Errorf("bgp: prefix %s: %w", p, err)
		}
		paths = append(paths, &apiutil.Path{
			Family: bgp.RF_IPv4_UC,
			Nlri:   nlri,
			Attrs:  []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP), nh},
		})
	}
	if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: paths}); err != nil {
		return fmt.Errorf("bgp: announce %v: %w", s.o.Prefixes, err)
	}
	return nil
}

// deletePaths removes every path of this speaker from GoBGP's table,
// which withdraws them from every peer that holds them.
func (s *Speaker) deletePaths() error {
	family := bgp.RF_IPv4_UC
	if err := s.srv.DeletePath(apiutil.DeletePathRequest{DeleteAll: true, DeleteFamily: &family}); err != nil {
		return fmt.Errorf("bgp: withdraw %v: %w", s.o.Prefixes, err)
	}
	return nil
}
