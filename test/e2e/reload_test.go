package e2e

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
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
	// New connections go on meanwhile (through the new address and range).
	for len(w.prober.between(s.done, time.Now())) < 200 {
		w.check(t, "after the hand-off")
		time.Sleep(100 * time.Millisecond)
	}
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
