package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/test/lab"
)

// XDP run time (issue 17 item 3: where a balancer's cycles go, measured in
// the lab). While the run holds the kernel's BPF run-time statistics on
// (bpf_stats_enabled, through ebpf.EnableStats), the kernel adds each run
// of every BPF program to its run time and run count; the difference over
// a load, divided, is the XDP program's average time per packet there.
// Each run pays the statistics' two clock reads, the same for every XDP
// peer.

// enableXDPStats turns the run-time statistics on until the returned
// closer is closed; nil when the kernel refuses (the report then has no
// XDP column).
func enableXDPStats() io.Closer {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchpeers: no BPF run-time statistics (%v): the report leaves out XDP time per packet\n", err)
		return nil
	}
	return c
}

// xdpMeter reads the statistics of the XDP program on the balancer's
// eth0 at the start and end of a load.
type xdpMeter struct {
	prog  *ebpf.Program
	start *ebpf.ProgramStats
}

// startXDP finds the XDP program attached to eth0 in l's balancer
// namespace (native or generic); nil without one (a peer that is no XDP
// program).
func startXDP(l *lab.Lab) (*xdpMeter, error) {
	var id int
	err := l.XLB.Do(func() error {
		link, err := l.XLB.Netlink().LinkByName("eth0")
		if err != nil {
			return err
		}
		if x := link.Attrs().Xdp; x != nil {
			id = int(x.ProgId)
		}
		return nil
	})
	if err != nil || id == 0 {
		return nil, err
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return nil, fmt.Errorf("XDP program %d on eth0: %w", id, err)
	}
	st, err := prog.Stats()
	if err != nil {
		prog.Close()
		return nil, fmt.Errorf("XDP program %d statistics: %w", id, err)
	}
	return &xdpMeter{prog: prog, start: st}, nil
}

// stop returns the program's average run time per packet since start
// and the packets it ran on; 0, 0 when it ran on none (or statistics are
// off).
func (m *xdpMeter) stop() (time.Duration, uint64, error) {
	defer m.prog.Close()
	st, err := m.prog.Stats()
	if err != nil {
		return 0, 0, err
	}
	n := st.RunCount - m.start.RunCount
	if n == 0 {
		return 0, 0, nil
	}
	return (st.Runtime - m.start.Runtime) / time.Duration(n), n, nil
}
