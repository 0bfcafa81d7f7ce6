package e2e

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/bgp/birdtest"
	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// reload runs `xlb reload --pid PID`, what the unit's ExecReload= runs,
// and returns its exit code and stderr.
func reload(t *testing.T, binary string, pid int) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, "reload", "--pid", strconv.Itoa(pid))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// `xlb reload --pid PID` hands over and exits 0 once the successor took
// over; when the hand-off fails it exits 1 with the reason, and the old
// process keeps serving. `xlb capabilities` says the binary can do it.
func TestReloadCommand(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	cfg := labConfig(l, "")
	bin := installBinary(t, xlbBinary)
	p := startPinned(t, l, bin, cfg)

	out, err := exec.Command(bin, "capabilities").Output()
	if err != nil || !strings.Contains("\n"+string(out), "\nhot-upgrade\n") {
		t.Fatalf("xlb capabilities: %q, %v; want a line hot-upgrade", out, err)
	}

	from := p.Pid()
	if code, stderr := reload(t, bin, from); code != 0 {
		t.Fatalf("reload: exit %d, stderr %q; want 0", code, stderr)
	}
	to, err := p.WaitHandOff(from, swapTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Client().EchoCheck(listenAddr, []byte("after reload"), 10*time.Second); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(p.Config, []byte(cfg+"bogus_field: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stderr := reload(t, bin, to)
	if code != 1 || strings.TrimSpace(stderr) == "" {
		t.Fatalf("reload with an invalid config: exit %d, stderr %q; want 1 with the reason", code, stderr)
	}
	t.Logf("failed reload said: %s", strings.TrimSpace(stderr))
	if p.Pid() != to || p.Exited() {
		t.Fatalf("after a failed reload the owner is %d (exited %v), want %d still serving", p.Pid(), p.Exited(), to)
	}
	if err := l.Client().EchoCheck(listenAddr, []byte("after a failed reload"), 10*time.Second); err != nil {
		t.Fatal(err)
	}

	// The same pid once more, now with a good config: the earlier
	// failure's outcome is not taken for this one's.
	if err := os.WriteFile(p.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stderr := reload(t, bin, to); code != 0 {
		t.Fatalf("reload after fixing the config: exit %d, stderr %q; want 0", code, stderr)
	}
	if _, err := p.WaitHandOff(to, swapTimeout); err != nil {
		t.Fatal(err)
	}
	stopXLB(t, l, p)
}

// A reload that moves snat.ip to another address and snat.port_range to
// another range (issue 27 finding 3: replies on the old ports passed to
// the host stack, which reset the connections): the streams and idle
// connections opened through the old address and range keep working and
// end without a reset, the status lists the old space as retired while
// they live, and once their pairs are gone (the time-wait after their
// close) the retired set is empty and only the new range stays reserved.
func TestReloadMovesSNAT(t *testing.T) {
	const reserved = "/proc/sys/net/ipv4/ip_local_reserved_ports"
	l := greetedLab(t)
	extra := testnet.XLBExtraIP(0)
	if err := l.XLB.AddAddress("eth0", netip.PrefixFrom(extra, testnet.FrontNet.Bits())); err != nil {
		t.Fatal(err)
	}
	hostReserved := readSysctl(t, l.XLB, reserved)
	cfg := labConfig(l, "")
	p := startPinned(t, l, xlbBinary, cfg)
	w := startWorkload(t, l)

	oldSNAT := "snat:\n  ip: 192.0.2.10\n  port_range: \"40000-59999\"\n"
	newSNAT := fmt.Sprintf("snat:\n  ip: %s\n  port_range: \"20000-29999\"\n", extra)
	if !strings.Contains(cfg, oldSNAT) {
		t.Fatalf("config lacks %q:\n%s", oldSNAT, cfg)
	}
	if err := os.WriteFile(p.Config, []byte(strings.Replace(cfg, oldSNAT, newSNAT, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := handOff(t, l, p, w)
	w.check(t, "the hand-off")
	checkSwap(t, "hand-off to another SNAT address and range", s)
	// Every stream gets replies after the successor took over: the
	// backends' replies to the old address and ports.
	w.waitFlowing(t, w.received(), 30*time.Second)
	w.check(t, "after the hand-off")

	d := statusDoc(t, l)
	if len(d.SNAT.Retired) == 0 || len(d.SNAT.IPs) != 1 || d.SNAT.IPs[0] != extra.String() {
		t.Fatalf("status snat %+v: want %v, and 192.0.2.10's old ports retired", d.SNAT, extra)
	}
	for _, r := range d.SNAT.Retired {
		lo, hi, ok := portRange(r.PortRange)
		if r.IP != "192.0.2.10" || !ok || lo < 40000 || hi > 59999 {
			t.Fatalf("retired SNAT space %+v: want ports of 192.0.2.10:40000-59999", r)
		}
		if got := readSysctl(t, l.XLB, reserved); !reservedCovers(got, lo, hi) || !reservedCovers(got, 20000, 29999) {
			t.Fatalf("ip_local_reserved_ports = %q: want the new range 20000-29999 and the retired %s", got, r.PortRange)
		}
	}
	// New connections go on meanwhile, through the new address and range:
	// the backends see the old connections from 192.0.2.10:40000-59999
	// and one opened now from the new address and range.
	for len(w.prober.between(s.done, time.Now())) < 200 {
		w.check(t, "after the hand-off")
		time.Sleep(100 * time.Millisecond)
	}
	c, backend, err := greet(l.Client())
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c, []byte("opened after the reload")); err != nil {
		t.Fatal(err)
	}
	var fromOld, fromNew int
	for _, b := range l.Backends {
		for _, peer := range establishedPeers(t, b.Host, 8080) {
			switch {
			case peer.Addr() == netip.MustParseAddr("192.0.2.10") && peer.Port() >= 40000 && peer.Port() <= 59999:
				fromOld++
			case peer.Addr() == extra && peer.Port() >= 20000 && peer.Port() <= 29999:
				fromNew++
			}
		}
	}
	if fromOld < streamConns+idleConns || fromNew < 1 {
		t.Fatalf("backends hold %d connections from the old SNAT space and %d from the new one; want %d and the one to backend-%d opened after the reload",
			fromOld, fromNew, streamConns+idleConns, backend)
	}
	c.Close()
	sum := w.finish(t)
	t.Log(sum)
	if sum.resets != 0 {
		t.Fatalf("%d resets", sum.resets)
	}

	// The old pairs leave after their time-wait; the retired space with them.
	deadline := time.Now().Add(maintenanceTimeWait + time.Minute)
	for len(statusDoc(t, l).SNAT.Retired) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("status snat.retired %+v long after the old connections ended", statusDoc(t, l).SNAT.Retired)
		}
		time.Sleep(time.Second)
	}
	got := readSysctl(t, l.XLB, reserved)
	if !reservedCovers(got, 20000, 29999) || (reservedTouches(got, 40000, 59999) && !reservedTouches(hostReserved, 40000, 59999)) {
		t.Fatalf("ip_local_reserved_ports = %q once nothing is retired (%q before xlb): want 20000-29999 and none of 40000-59999", got, hostReserved)
	}
	stopXLB(t, l, p)
	if got := readSysctl(t, l.XLB, reserved); got != hostReserved {
		t.Fatalf("ip_local_reserved_ports = %q after the stop, want %q as before", got, hostReserved)
	}
}

// maintenanceTimeWait is how long a closed pair stays (maintenance.TimeWait).
const maintenanceTimeWait = 60 * time.Second

// portRange parses "LO-HI".
func portRange(s string) (lo, hi int, ok bool) {
	a, b, found := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	return lo, hi, found && err1 == nil && err2 == nil && lo <= hi
}

// reservedPorts lists the ports of an ip_local_reserved_ports value.
func reservedPorts(list string) map[int]bool {
	out := map[int]bool{}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		lo, hi, ok := portRange(f)
		if !ok {
			p, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			lo, hi = p, p
		}
		for p := lo; p <= hi; p++ {
			out[p] = true
		}
	}
	return out
}

// reservedCovers reports whether list reserves every port of lo-hi.
func reservedCovers(list string, lo, hi int) bool {
	ports := reservedPorts(list)
	for p := lo; p <= hi; p++ {
		if !ports[p] {
			return false
		}
	}
	return true
}

// reservedTouches reports whether list reserves any port of lo-hi.
func reservedTouches(list string, lo, hi int) bool {
	ports := reservedPorts(list)
	for p := lo; p <= hi; p++ {
		if ports[p] {
			return true
		}
	}
	return false
}

// establishedPeers lists the remote ends of h's established TCP
// connections on local port port: tcp and tcp6 of /proc/thread-self/net,
// the namespace h.Do runs in (/proc/net is the main thread's), IPv4-mapped
// addresses unmapped.
func establishedPeers(t *testing.T, h *lab.Host, port uint16) []netip.AddrPort {
	t.Helper()
	var out []netip.AddrPort
	err := h.Do(func() error {
		for _, file := range []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"} {
			b, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(b), "\n")[1:] {
				f := strings.Fields(line)
				if len(f) < 4 || f[3] != "01" { // TCP_ESTABLISHED
					continue
				}
				local, lok := procAddr(f[1])
				remote, rok := procAddr(f[2])
				if lok && rok && local.Port() == port {
					out = append(out, remote)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// procAddr parses an address and port as /proc/net/tcp{,6} write them:
// the address as 32-bit words in host order (little-endian here), in hex,
// and the port in hex.
func procAddr(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	raw, err1 := hex.DecodeString(a)
	port, err2 := strconv.ParseUint(p, 16, 16)
	if !ok || err1 != nil || err2 != nil || len(raw)%4 != 0 {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	ip, ok := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), ok
}

// `xlb reload --pass-environment` (the unit's ExecReload=, issue 28 item
// 6) starts the successor with the reload command's environment, which
// systemd reads afresh from the unit's EnvironmentFile= for ExecReload:
// a rotated admin password, a rotated BGP password (password_env) and a
// changed ARGS take effect with a reload, and no connection is reset.
// The router (bird) is restarted with the new TCP MD5 password, as a
// router whose password was rotated; only a successor that has the new
// one gets a session and the route back. (The unit's own reload, under
// systemd: test/hostlab TestReloadEnvironment.)
func TestReloadPassesEnvironment(t *testing.T) {
	birdtest.Require(t)
	l := greetedLab(t)
	if err := l.XLB.AddAddress("eth0", netip.PrefixFrom(bgpOwnIP, 24)); err != nil {
		t.Fatal(err)
	}
	birdWith := func(password string) *birdtest.Bird {
		return birdtest.Start(t, l.Client(), birdtest.Config{
			Address: l.Client().IP(), ASN: bgpRouterASN, HoldSecs: 9,
			Peers: []birdtest.Peer{{Name: bgpRouter, Address: bgpOwnIP, ASN: bgpXLBASN, Password: password}},
		})
	}
	b := birdWith("bgp-old")
	cfg := labConfig(l, fmt.Sprintf("admin:\n  address: 127.0.0.1\n  port: 8642\n  auth:\n    username: operator\n"+
		"bgp:\n  local_asn: %d\n  hold_time_secs: 3\n  graceful_restart_secs: 60\n  peers:\n    - {address: %s, asn: %d, password_env: XLB_BGP_PASSWORD}\n",
		bgpXLBASN, l.Client().IP(), bgpRouterASN))
	bin := installBinary(t, xlbBinary)
	p, err := startBinaryOpts(t, l, bin, cfg, xlbproc.Options{
		Env:  []string{"XLB_ADMIN_PASSWORD=admin-old", "XLB_BGP_PASSWORD=bgp-old", "ARGS=--log.level info"},
		Args: []string{"--log.level", "info"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("xlb running", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	b.WaitRoute(t, bgpVIP, true)
	w := startWorkload(t, l)

	// The router's password is rotated: its session with the running xlb
	// ends, and the old password opens none.
	b.Close()
	b = birdWith("bgp-new")

	from := p.Pid()
	cmd := exec.Command(bin, "reload", "--pid", strconv.Itoa(from), "--pass-environment")
	cmd.Env = append(os.Environ(), "XLB_ADMIN_PASSWORD=admin-new", "XLB_BGP_PASSWORD=bgp-new", "ARGS=--log.level debug")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("xlb reload --pass-environment: %v\n%s", err, out)
	}
	to, err := p.WaitHandOff(from, swapTimeout)
	if err != nil {
		t.Fatal(err)
	}
	line := grepLines(p.Log(), "the new process gets the unit's current environment")
	for _, name := range []string{"ARGS", "XLB_ADMIN_PASSWORD", "XLB_BGP_PASSWORD"} {
		if !strings.Contains(line, name) {
			t.Errorf("the hand-off's log line does not name %s as changed: %q", name, line)
		}
	}
	if strings.Contains(p.Log(), "admin-new") || strings.Contains(p.Log(), "bgp-new") {
		t.Errorf("the log shows a password")
	}
	for _, c := range []struct {
		pass string
		code int
	}{{"admin-new", 200}, {"admin-old", 401}} {
		if code, _, _ := get(t, l.XLB, adminURL+"/api/v1/status", "operator", c.pass); code != c.code {
			t.Errorf("GET /api/v1/status with the %s password after the reload: %d, want %d", c.pass, code, c.code)
		}
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", to))
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); !slices.Equal(args[len(args)-2:], []string{"--log.level", "debug"}) || slices.Contains(args, "info") {
		t.Errorf("the successor's command line %q: want the new ARGS' words at its end, the old ones gone", args)
	}
	b.WaitRoute(t, bgpVIP, true)
	birdtest.WaitFor(t, "a session with the new password", func() (bool, string) {
		s := b.Session(bgpRouter)
		return s.State == birdtest.Established, s.Out
	})
	w.check(t, "the reload with a new environment")
	t.Log(w.finish(t))
	stopXLB(t, l, p)
}
