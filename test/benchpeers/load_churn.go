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

// churnLoad is new connections with internal/testnet/loadgen: -workers
// loops, each connect, one request, the reply, close in order; for
// -duration, or, long, for -long in -window windows. Latency is the
// connect time (the handshake through the peer). Every connection goes
// to the first target: direct measures one backend, as test/e2e's
// BenchmarkLabChurn does.
func churnLoad(name string, order loadgen.CloseOrder, long bool) load {
	title := fmt.Sprintf("New connections, %v close", order)
	if long {
		title += ", long run in windows"
	}
	return load{
		name: name, title: title, unit: "conn/s", op: "conn", long: long,
		about:   fmt.Sprintf("new connections from the workers' loops (internal/testnet/loadgen): connect, a one-line request, the reply, %v close; latency is the connect time", order),
		handler: testnet.Respond,
		run: func(ctx context.Context, o options, l *lab.Lab, targets []netip.AddrPort) (sample, error) {
			cfg := loadgen.Config{Target: targets[0], Workers: o.Workers, Duration: o.Duration, Window: o.Duration, Close: order}
			if long {
				cfg.Duration, cfg.Window = o.Long, o.Window
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
				s.note = fmt.Sprintf("failures: %s", r.FailureSummary())
				if len(r.Errors) > 0 {
					s.note += fmt.Sprintf(" (e.g. %v)", r.Errors[0])
				}
			}
			return s, nil
		},
	}
}
