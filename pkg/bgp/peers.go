package bgp

import (
	"context"
	"fmt"
	"time"

	api "github.com/osrg/gobgp/v4/api"

	"github.com/xlbproject/xlb/pkg/config"
)

const (
	// connectRetry is the wait between two connection attempts to a peer
	// (GoBGP's default, 120 s, would keep a route off a router for two
	// minutes after the router restarts).
	connectRetry = 5 * time.Second
	// deferralTime bounds how long a restarting speaker waits for its
	// peers' End-of-RIB before sending its own routes (RFC 4724 4.1).
	// Nothing is imported here, so there is nothing to wait for; GoBGP's
	// default, 360 s, would hold the routes back from every peer while
	// one peer is down.
	deferralTime = time.Second
)

// ipv4Unicast is the only address family announced.
func ipv4Unicast() *api.Family {
	return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
}

// addPeers adds every configured peer to GoBGP, which then connects.
func (s *Speaker) addPeers() error {
	for _, p := range s.o.Config.Peers {
		if err := s.srv.AddPeer(context.Background(), &api.AddPeerRequest{Peer: s.peer(p)}); err != nil {
			return fmt.Errorf("bgp: add peer %s: %w", p.Address, err)
		}
	}
	return nil
}

// peer is GoBGP's definition of one configured peer: the hold time (and a
// keepalive every third of it), graceful restart with the configured
// restart time and the Restart State bit set (every start may follow a
// hot upgrade or a crash, RFC 4724 4.1: GoBGP also sets the Forwarding
// State bit with it, without which the peer drops the stale routes at
// once, RFC 4724 4.2), ipv4-unicast only, the session opened from this
// host's address toward the peer, and the TCP MD5 password when one is
// configured.
func (s *Speaker) peer(p config.BGPPeer) *api.Peer {
	c := s.o.Config
	hold := uint64(c.HoldTime / time.Second)
	return &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         p.ASN,
			AuthPassword:    s.passwords[p.Address],
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime:          hold,
			KeepaliveInterval: max(hold/3, 1),
			ConnectRetry:      uint64(connectRetry / time.Second),
		}},
		Transport: &api.Transport{
			LocalAddress: s.locals[p.Address].String(),
			RemotePort:   uint32(p.Port),
		},
		GracefulRestart: &api.GracefulRestart{
			Enabled:         true,
			RestartTime:     uint32(c.GracefulRestart / time.Second),
			DeferralTime:    uint32(deferralTime / time.Second),
			LocalRestarting: true,
		},
		AfiSafis: []*api.AfiSafi{{
			Config:            &api.AfiSafiConfig{Family: ipv4Unicast(), Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
		}},
	}
}
