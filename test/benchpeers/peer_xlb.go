package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// XLB's capacity in the benchmark, as in test/e2e's BenchmarkLabChurn: the
// default port range on snatAddrs addresses (160,000 ports per backend, so
// 8,000 new connections/s with backends that close first hold no port
// for their 60 s of TIME_WAIT twice) and a table well above the idle
// load's pairs. The SNAT space is not what the benchmark measures.
const (
	snatAddrs      = 8
	snatPorts      = "40000-59999"
	maxConnections = 524288
)

// xlbConfig is the daemon's config for the lab: VIP:80 -> every backend on
// 8080, SNAT on snatAddrs addresses of eth0, state in stateDir.
func xlbConfig(l *lab.Lab, mode string, snat []netip.Addr, stateDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: bench-peers\nlisten:\n  ip: %s\nports:\n  - local_port: %d\n    remote_port: %d\n", lab.XLBFrontIP, servicePort, backendPort)
	b.WriteString("provider:\n  static:\n    backends:\n")
	for i, be := range l.Backends {
		fmt.Fprintf(&b, "      - name: backend-%d\n        ip: %s\n", i+1, be.IP())
	}
	addrs := make([]string, len(snat))
	for i, a := range snat {
		addrs[i] = a.String()
	}
	fmt.Fprintf(&b, "interfaces: [eth0]\nsnat:\n  ip: [%s]\n  port_range: %q\n", strings.Join(addrs, ", "), snatPorts)
	fmt.Fprintf(&b, "xdp_mode: %s\nflow_table:\n  max_connections: %d\n", mode, maxConnections)
	fmt.Fprintf(&b, "state_dir: %s\nshutdown_timeout: 1\n", stateDir)
	return b.String()
}

// startXLB runs the xlb daemon in the balancer namespace in XDP mode
// ("native" or "generic") and waits until it balances.
func startXLB(e *env, l *lab.Lab, mode string) ([]netip.AddrPort, func() error, error) {
	return startXLBBinary(e, l, e.xlbBinary, mode)
}

// startXLBBinary is startXLB with the daemon binary given.
func startXLBBinary(e *env, l *lab.Lab, binary, mode string) ([]netip.AddrPort, func() error, error) {
	snat := []netip.Addr{lab.XLBFrontIP}
	for i := range snatAddrs - 1 {
		ip := testnet.XLBExtraIP(i)
		if err := l.XLB.AddAddress("eth0", netip.PrefixFrom(ip, testnet.FrontNet.Bits())); err != nil {
			return nil, nil, err
		}
		snat = append(snat, ip)
	}
	dir, err := os.MkdirTemp(e.tmp, "xlb-")
	if err != nil {
		return nil, nil, err
	}
	stateDir := filepath.Join(e.bpffs, l.Prefix)
	p, err := xlbproc.Start(l.XLB, binary, dir, xlbConfig(l, mode, snat, stateDir), xlbproc.Options{})
	if err != nil {
		return nil, nil, err
	}
	stop := func() error {
		var err error
		if !p.Exited() && p.Signal(syscall.SIGTERM) == nil {
			if code, werr := p.Wait(60 * time.Second); werr != nil || code != 0 {
				err = fmt.Errorf("xlb exited with %d (%v)", code, werr)
			}
		}
		p.Kill()
		if err != nil {
			e.saveLog("xlb-"+l.Prefix+".log", p.Log())
		}
		return errors.Join(err, os.RemoveAll(stateDir), os.RemoveAll(dir))
	}
	if err := p.WaitLog("xlb running", 60*time.Second); err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	return []netip.AddrPort{vip}, stop, nil
}
