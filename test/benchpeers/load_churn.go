package main

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/internal/testnet/loadgen"
	"github.com/xlbproject/xlb/test/lab"
)

const (
	serverFirst = loadgen.ServerFirst
	clientFirst = loadgen.ClientFirst
)

// churnClientAddrs is the number of client addresses of the *-8addr loads
// (issue 36): clients whose TCP timestamps are unrelated, which a NAT
// that hands a backend's TIME_WAIT 4-tuple to another client meets as
// PAWS rejections.
const churnClientAddrs = 8

// churnLoad is new connections with internal/testnet/loadgen: -workers
// loops, each connect, one request, the reply, close in order; for
// -duration, or, long, for -long in -window windows. Latency is the
// connect time (the handshake through the peer). Every connection goes
// to the first target: direct measures one backend, as test/e2e's
// BenchmarkLabChurn does. With addrs > 0 the connections leave from addrs
// addresses of the client in turn (testnet.ClientExtraIP), else from its
// one address.
func churnLoad(name string, order loadgen.CloseOrder, long bool, addrs int) load {
	title := fmt.Sprintf("New connections, %v close", order)
	from := ""
	if addrs > 0 {
		title += fmt.Sprintf(", from %d client addresses", addrs)
		from = fmt.Sprintf(", each from the next of %d client addresses (one namespace, testnet.ClientExtraIP)", addrs)
	}
	if long {
		title += ", long run in windows"
	}
	return load{
		name: name, title: title, unit: "conn/s", op: "conn", long: long, clientAddrs: addrs,
		about:   fmt.Sprintf("new connections from the workers' loops (internal/testnet/loadgen)%s: connect, a one-line request, the reply, %v close; latency is the connect time; socket errors are the failed connections by kind", from, order),
		handler: testnet.Respond,
		run: func(ctx context.Context, o options, l *lab.Lab, targets []netip.AddrPort) (sample, error) {
			cfg := loadgen.Config{Target: targets[0], Workers: o.Workers, Duration: o.Duration, Window: o.Duration, Close: order}
			if long {
				cfg.Duration, cfg.Window = o.Long, o.Window
			}
			for i := range addrs {
				cfg.Sources = append(cfg.Sources, testnet.ClientExtraIP(i))
			}
			m, err := startCPU()
			if err != nil {
				return sample{}, err
			}
			r, err := loadgen.Run(ctx, l.Client(), cfg)
			if err != nil {
				return sample{}, err
			}
			s := sample{value: r.Rate(), ops: float64(r.Completed), p50: r.Connects.Quantile(0.5), p99: r.Connects.Quantile(0.99), failed: r.Failed()}
			if s.cpu, err = m.stop(); err != nil {
				return s, err
			}
			if long {
				s.windows = r.WindowRates()
			}
			if r.Failed() > 0 {
				s.failures = map[string]int{}
				for k, n := range r.Failures {
					if n > 0 {
						s.failures[loadgen.Failure(k).String()] = n
					}
				}
				s.note = fmt.Sprintf("failures: %s", r.FailureSummary())
				if len(r.Errors) > 0 {
					s.note += fmt.Sprintf(" (e.g. %v)", r.Errors[0])
				}
			}
			return s, nil
		},
	}
}
