package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/internal/testnet/loadgen"
	"github.com/xlbproject/xlb/test/lab"
)

// labPrefix starts the names of every lab this command builds, so that
// the leftovers of a killed run are easy to recognise
// (testnet.CleanupStale).
const labPrefix = "xbp"

// measure runs load ld through peer p once, in a lab of its own that it
// removes again, and returns the result; a failure is a result with
// Error set, not an error (the run goes on with the next peer).
func measure(ctx context.Context, e *env, ld load, p peer, rep int) result {
	r := result{Rep: rep, Load: ld.name, Peer: p.name, Unit: ld.unit, Op: ld.op, Started: time.Now().UTC()}
	clients := max(1, ld.clients)
	if addrs := max(clients, ld.clientAddrs); p.maxClients > 0 && addrs > p.maxClients {
		r.Skipped = fmt.Sprintf("%s serves %d client address(es), the load needs %d", p.name, p.maxClients, addrs)
		return r
	}
	if ld.isUDP() && p.udp == nil {
		r.Skipped = fmt.Sprintf("%s does not balance UDP", p.name)
		return r
	}
	if p.newConnsOnly && ld.op != "conn" {
		r.Skipped = fmt.Sprintf("%s runs the new-connection loads only", p.name)
		return r
	}
	if need := p.socketsPerPair*e.opts.IdlePairs + 1024; ld.pairs && p.socketsPerPair > 0 && need > e.files {
		r.Skipped = fmt.Sprintf("%s needs %d descriptors in one process, the limit here is %d", p.name, need, e.files)
		return r
	}
	s, err := measureIn(ctx, e, ld, p, clients)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Value, r.P50, r.P99, r.Windows, r.Failed, r.Note = s.value, s.p50, s.p99, s.windows, s.failed, s.note
	r.Failures = s.failures
	r.CPUBusy = s.cpu.Busy
	r.XDPPerPacket, r.XDPPackets = s.xdpPerPacket, s.xdpPackets
	if s.ops > 0 {
		r.CPUPerOp = time.Duration(float64(s.cpu.BusyCPU) / s.ops)
	}
	return r
}

func measureIn(ctx context.Context, e *env, ld load, p peer, clients int) (_ sample, err error) {
	prefix, err := testnet.RandomPrefix(labPrefix)
	if err != nil {
		return sample{}, err
	}
	l, err := lab.Start(lab.Options{Topology: lab.OneArm, Clients: clients, Prefix: prefix, EchoPort: -1, SinkPort: -1})
	if err != nil {
		return sample{}, err
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	var udpServers []*testnet.UDPServer
	switch {
	case ld.isUDP():
		for _, b := range l.Backends {
			s, err := b.ServeUDP(fmt.Sprintf(":%d", backendPort), ld.udpHandler)
			if err != nil {
				return sample{}, err
			}
			udpServers = append(udpServers, s)
		}
	case ld.servers != nil:
		stopServers, err := ld.servers(e, l)
		if err != nil {
			return sample{}, err
		}
		defer func() { err = errors.Join(err, stopServers()) }()
	default:
		// No TCP keepalive probes of the backends' own.
		lc := net.ListenConfig{KeepAlive: -1}
		for _, b := range l.Backends {
			if _, err := b.ServeWith(lc, fmt.Sprintf(":%d", backendPort), ld.handler); err != nil {
				return sample{}, err
			}
		}
	}
	for _, c := range l.Clients {
		if err := loadgen.ReuseSourcePorts(c); err != nil {
			return sample{}, err
		}
	}
	if ld.clientAddrs > 0 {
		if _, err := l.AddClientAddresses(ld.clientAddrs); err != nil {
			return sample{}, err
		}
	}
	start := p.start
	if ld.isUDP() {
		start = p.udp
	}
	targets, stop, err := start(e, l)
	if err != nil {
		return sample{}, fmt.Errorf("start %s: %w", p.name, err)
	}
	defer func() {
		if serr := stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop %s: %w", p.name, serr))
		}
	}()
	for _, t := range targets {
		if ld.isUDP() {
			_, err = testnet.WaitUDP(l.Client(), t.String(), udpProbeFor(ld), 30*time.Second)
		} else {
			err = testnet.WaitTCP(l.Client(), t.String(), 30*time.Second)
		}
		if err != nil {
			return sample{}, fmt.Errorf("%s does not answer: %w", p.name, err)
		}
	}
	for _, s := range udpServers {
		s.ResetStats() // the probes
	}
	xm, err := startXDP(l)
	if err != nil {
		return sample{}, err
	}
	var s sample
	if ld.isUDP() {
		s, err = ld.runUDP(ctx, e.opts, l, targets, udpServers)
	} else {
		s, err = ld.run(ctx, e.opts, l, targets)
	}
	if xm != nil {
		var xerr error
		s.xdpPerPacket, s.xdpPackets, xerr = xm.stop()
		err = errors.Join(err, xerr)
	}
	return s, err
}

// schedule runs every selected load through every selected peer, rep by
// rep, rotating the peers' order by one each rep; long loads run in the
// first -long-reps reps only. Each result goes to done as it comes.
func schedule(ctx context.Context, e *env, done func(result)) {
	o := e.opts
	for rep := range o.Reps {
		for _, name := range o.Loads {
			ld := loadByName(name)
			if ld.long && rep >= o.LongReps {
				continue
			}
			for i := range o.Peers {
				if ctx.Err() != nil {
					return
				}
				p := peerByName(o.Peers[(i+rep)%len(o.Peers)])
				fmt.Fprintf(os.Stderr, "benchpeers: rep %d/%d, %s via %s ...\n", rep+1, o.Reps, ld.name, p.name)
				done(measure(ctx, e, ld, p, rep))
			}
		}
	}
}
