package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/xlbproject/xlb/test/lab"
)

// idleClients is the idle load's client addresses. One reaches a VIP:port
// from at most 64,512 source ports, and the kernel's search for a free
// one at connect slows as they fill (the BEFORE run with two clients,
// 50,000 pairs each, took 2-3 minutes to open 100,000 pairs through XLB
// and iptables and 11 s direct, which spreads over three backends): four
// keep each address's ports under 40 % taken.
const idleClients = 4

// idleOpenTimeout bounds how long the helpers may take to open the pairs.
const idleOpenTimeout = 10 * time.Minute

// idleLoad is the keepalive load measured while -idle-pairs idle
// connections from idleClients clients stay open through the peer, each writing
// one byte every -trickle (the backend echoes it): the peer's table holds
// them all, and the trickle keeps every entry in use. Helper processes
// hold the pairs' sockets (helper.go): the backends' servers, sharing
// the port with SO_REUSEPORT, and the clients' connections.
func idleLoad() load {
	return load{
		name: "idle", title: "Keep-alive requests with idle pairs open", unit: "req/s", op: "req",
		about: "the keepalive load while the idle pairs from four client addresses stay open, each writing a byte per trickle period (the backend echoes it); " +
			"helper processes hold the pairs' sockets; the floor serves one client address and sits it out, the proxies need two descriptors per pair in one process",
		clients: idleClients, long: true, pairs: true,
		servers: idleServers,
		run: func(ctx context.Context, o options, l *lab.Lab, targets []netip.AddrPort) (sample, error) {
			start := time.Now()
			dialers, err := openPairs(l, targets, o)
			if err != nil {
				return sample{}, err
			}
			opened := time.Since(start)
			s, err := runKeepalive(ctx, l.Client(), targets, o.Workers, o.Duration)
			lines, serr := stopHelpers(dialers)
			if err != nil || serr != nil {
				return s, fmt.Errorf("idle: %w", errors.Join(err, serr))
			}
			failed := 0
			for _, line := range lines {
				n, err := strconv.Atoi(line)
				if err != nil {
					return s, fmt.Errorf("idle: a dial helper ended with %q", line)
				}
				failed += n
			}
			s.note = fmt.Sprintf("%d idle pairs opened in %v", o.IdlePairs, opened.Round(time.Second))
			if failed > 0 {
				s.note += fmt.Sprintf("; %d trickle writes failed", failed)
				s.failed += failed
			}
			return s, nil
		},
	}
}

// idleServers starts the backends' servers as helpers: enough per backend
// for its share of the pairs, one more for an uneven spread.
func idleServers(e *env, l *lab.Lab) (func() error, error) {
	perBackend := ceilDiv(e.opts.IdlePairs, len(l.Backends))
	var hs []*helper
	stop := func() error { _, err := stopHelpers(hs); return err }
	for _, b := range l.Backends {
		for range ceilDiv(perBackend, helperConns) + 1 {
			hp, err := startHelper(b.Host, 30*time.Second, helperServe, strconv.Itoa(backendPort))
			if err != nil {
				return nil, errors.Join(err, stop())
			}
			hs = append(hs, hp)
		}
	}
	return stop, nil
}

// openPairs opens the pairs: each client's share, in helpers of at most
// helperConns connections, all at once.
func openPairs(l *lab.Lab, targets []netip.AddrPort, o options) ([]*helper, error) {
	ts := make([]string, len(targets))
	for i, t := range targets {
		ts[i] = t.String()
	}
	type started struct {
		hp  *helper
		err error
	}
	var counts []int
	var hosts []int
	for ci := range l.Clients {
		share := o.IdlePairs / len(l.Clients)
		if ci < o.IdlePairs%len(l.Clients) {
			share++
		}
		k := ceilDiv(share, helperConns)
		for j := range k {
			n := share / k
			if j < share%k {
				n++
			}
			counts, hosts = append(counts, n), append(hosts, ci)
		}
	}
	ch := make(chan started, len(counts))
	for i, n := range counts {
		go func() {
			hp, err := startHelper(l.Clients[hosts[i]], idleOpenTimeout, helperDial, strconv.Itoa(n), o.Trickle.String(), strings.Join(ts, ","))
			ch <- started{hp, err}
		}()
	}
	var hs []*helper
	var errs []error
	for range counts {
		s := <-ch
		if s.err != nil {
			errs = append(errs, s.err)
		} else {
			hs = append(hs, s.hp)
		}
	}
	if err := errors.Join(errs...); err != nil {
		_, serr := stopHelpers(hs)
		return nil, errors.Join(err, serr)
	}
	return hs, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
