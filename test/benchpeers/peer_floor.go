package main

import (
	"errors"
	"net/netip"

	"github.com/cilium/ebpf/link"

	"github.com/xlbproject/xlb/pkg/dataplane/floor"
	"github.com/xlbproject/xlb/test/lab"
)

// startFloor loads the floor balancer for the lab's one client and
// attaches it in native mode to the balancer namespace's eth0. Replies
// go to the first client only (the floor keeps no state), so loads with
// more clients leave it out (peer.maxClients).
func startFloor(_ *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) {
	cfg := floor.BalancerConfig{
		VIP: lab.XLBFrontIP, SNAT: lab.XLBFrontIP, Client: l.Client().IP(), Port: servicePort,
		SelfMAC: l.XLB.MAC(), ClientMAC: l.Client().MAC(),
	}
	for _, b := range l.Backends {
		cfg.Backends = append(cfg.Backends, floor.BalancerBackend{IP: b.IP(), Port: backendPort, MAC: b.MAC()})
	}
	b, err := floor.LoadBalancer(cfg)
	if err != nil {
		return nil, nil, err
	}
	var lk link.Link
	err = l.XLB.Do(func() error {
		var err error
		lk, err = b.Attach(l.XLB.Ifindex(), link.XDPDriverMode)
		return err
	})
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	stop := func() error { return errors.Join(lk.Close(), b.Close()) }
	return []netip.AddrPort{vip}, stop, nil
}
