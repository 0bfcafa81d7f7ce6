package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// XLB's capacity in the benchmark, as in test/e2e's BenchmarkLabChurn: the
// default port range on snatAddrs addresses (160,000 ports per backend, so
// 8,000 new connections/s with backends that close first hold no port
// for its 70 s hold twice) and a table well above the idle load's pairs.
// The SNAT space is not what the xlb-native and xlb-generic peers measure;
// xlb-default has the packages' snat section instead (packagedSNAT).
const (
	snatAddrs      = 8
	snatPorts      = "40000-59999"
	maxConnections = 524288
)

// xlbConfig is the daemon's config for the lab: VIP:80 -> every backend on
// 8080 over proto ("tcp" or "udp"; tcp leaves the key out), the snat
// section given (a YAML block), state in stateDir.
func xlbConfig(l *lab.Lab, mode, proto, snat, stateDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: bench-peers\nlisten:\n  ip: %s\n", lab.XLBFrontIP)
	if proto != "tcp" { // the default; an earlier build (-baseline) may not know the key
		fmt.Fprintf(&b, "proto: %s\n", proto)
	}
	fmt.Fprintf(&b, "ports:\n  - local_port: %d\n    remote_port: %d\n", servicePort, backendPort)
	b.WriteString("provider:\n  static:\n    backends:\n")
	for i, be := range l.Backends {
		fmt.Fprintf(&b, "      - name: backend-%d\n        ip: %s\n", i+1, be.IP())
	}
	fmt.Fprintf(&b, "interfaces: [eth0]\n%s", snat)
	fmt.Fprintf(&b, "xdp_mode: %s\nflow_table:\n  max_connections: %d\n", mode, maxConnections)
	fmt.Fprintf(&b, "state_dir: %s\nshutdown_timeout: 1\n", stateDir)
	return b.String()
}

// wideSNAT adds snatAddrs-1 addresses to the balancer's eth0 and returns
// the snat section of snatAddrs addresses with snatPorts each.
func wideSNAT(l *lab.Lab) (string, error) {
	addrs := []string{lab.XLBFrontIP.String()}
	for i := range snatAddrs - 1 {
		ip := testnet.XLBExtraIP(i)
		if err := l.XLB.AddAddress("eth0", netip.PrefixFrom(ip, testnet.FrontNet.Bits())); err != nil {
			return "", err
		}
		addrs = append(addrs, ip.String())
	}
	return fmt.Sprintf("snat:\n  ip: [%s]\n  port_range: %q\n", strings.Join(addrs, ", "), snatPorts), nil
}

// packagedConfig is the example config the packages install as
// /etc/xlb/xlb.yaml, relative to the module's root.
const packagedConfig = "packaging/xlb.yaml"

// packagedSNAT is the snat section of packagedConfig, comments left out:
// what an operator runs who kept the default (one address, "ip: auto",
// which is 192.0.2.10 in the lab).
func packagedSNAT() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the xlb module: run from its directory")
	}
	path := filepath.Join(filepath.Dir(gomod), packagedConfig)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", fmt.Errorf("%s: not a mapping", path)
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != "snat" {
			continue
		}
		section := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "snat"}, m.Content[i+1]}}
		dropComments(section)
		var out strings.Builder
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		if err := enc.Encode(section); err != nil {
			return "", err
		}
		return out.String(), enc.Close()
	}
	return "", fmt.Errorf("%s: no snat section", path)
}

func dropComments(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	for _, c := range n.Content {
		dropComments(c)
	}
}

// startXLB runs the xlb daemon in the balancer namespace in XDP mode
// ("native" or "generic") with snatAddrs SNAT addresses and waits until
// it balances.
func startXLB(e *env, l *lab.Lab, mode string) ([]netip.AddrPort, func() error, error) {
	return startXLBBinary(e, l, e.xlbBinary, mode)
}

// startXLBDefault is startXLB, native, with the packages' snat section.
func startXLBDefault(e *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) {
	snat, err := packagedSNAT()
	if err != nil {
		return nil, nil, err
	}
	return startXLBWith(e, l, e.xlbBinary, "native", "tcp", snat)
}

// startXLBUDP is startXLB for the UDP service.
func startXLBUDP(e *env, l *lab.Lab, mode string) ([]netip.AddrPort, func() error, error) {
	snat, err := wideSNAT(l)
	if err != nil {
		return nil, nil, err
	}
	return startXLBWith(e, l, e.xlbBinary, mode, "udp", snat)
}

// startXLBBinary is startXLB with the daemon binary given.
func startXLBBinary(e *env, l *lab.Lab, binary, mode string) ([]netip.AddrPort, func() error, error) {
	snat, err := wideSNAT(l)
	if err != nil {
		return nil, nil, err
	}
	return startXLBWith(e, l, binary, mode, "tcp", snat)
}

// startXLBWith is startXLBBinary with the service's proto and the snat
// section given.
func startXLBWith(e *env, l *lab.Lab, binary, mode, proto, snat string) ([]netip.AddrPort, func() error, error) {
	dir, err := os.MkdirTemp(e.tmp, "xlb-")
	if err != nil {
		return nil, nil, err
	}
	stateDir := filepath.Join(e.bpffs, l.Prefix)
	p, err := xlbproc.Start(l.XLB, binary, dir, xlbConfig(l, mode, proto, snat, stateDir), xlbproc.Options{})
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
