package hostlab

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPackagedService installs the .deb (then the .rpm) on a booted Debian
// with systemd as PID 1 in the lab's XLB namespace and drives the service
// through its life: install without start, start until ready, traffic,
// SIGKILL and the restart that adopts the pinned connections, an upgrade
// that hands over (systemctl reload) and one left to the operator, stop
// through the shutdown window, removal and purge, and the rpm scriptlets.
func TestPackagedService(t *testing.T) {
	setup(t)
	testStart := time.Now()
	h := bootHost(t, "hostlab")
	step := h.step

	var before, after float64
	step("exposure-bare-unit", func(t *testing.T) {
		h.write("/etc/systemd/system/xlb-bare.service", "[Service]\nType=notify\nExecStart=/usr/bin/xlb --config /etc/xlb/xlb.yaml\n", 0o644)
		h.sh("systemctl", "daemon-reload")
		before = h.exposure("xlb-bare.service")
		h.sh("rm", "/etc/systemd/system/xlb-bare.service")
		h.sh("systemctl", "daemon-reload")
	})

	step("install-does-not-start", func(t *testing.T) {
		out := h.sh("apt-get", "install", "-y", "--no-install-recommends", debIn(0))
		if !strings.Contains(out, "not enabled and not started") {
			t.Errorf("install output lacks the not-started notice:\n%s", out)
		}
		if st, _ := h.try("systemctl", "is-active", "xlb"); strings.TrimSpace(st) != "inactive" {
			t.Errorf("after install: is-active %q, want inactive", st)
		}
		if st, _ := h.try("systemctl", "is-enabled", "xlb"); strings.TrimSpace(st) != "disabled" {
			t.Errorf("after install: is-enabled %q, want disabled", st)
		}
		if h.xdpAttached() {
			t.Error("an XDP program is attached right after install")
		}
		if mode := strings.TrimSpace(h.sh("stat", "-c", "%a %U", "/etc/default/xlb")); mode != "600 root" {
			t.Errorf("/etc/default/xlb: %s, want 600 root", mode)
		}
		if out := h.sh("xlb", "--version"); !strings.Contains(out, v1) {
			t.Errorf("xlb --version = %q, want %s", out, v1)
		}
		// The packaged example config validates on the host.
		h.sh("xlb", "check", "--config", "/etc/xlb/xlb.yaml")
		out, err := h.try("systemd-analyze", "verify", "--man=no", "/lib/systemd/system/xlb.service")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("systemd-analyze verify in the booted host: %v\n%s", err, out)
		}
	})

	step("exposure-packaged-unit", func(t *testing.T) {
		after = h.exposure("xlb.service")
		t.Logf("systemd-analyze security: bare Type=notify unit %.1f, packaged xlb.service %.1f", before, after)
		if after >= before || after > 3.0 {
			t.Errorf("exposure %.1f (bare unit %.1f): want lower than the bare unit and at most 3.0", after, before)
		}
	})

	h.configure()
	config := labConfig(h.l)

	step("each-capability-is-needed", func(t *testing.T) {
		// The unit keeps only CAP_BPF and CAP_NET_ADMIN; without either
		// of them the daemon fails to start.
		for _, capName := range []string{"CAP_BPF", "CAP_NET_ADMIN"} {
			h.write("/run/systemd/system/xlb.service.d/drop-cap.conf", "[Service]\nCapabilityBoundingSet=~"+capName+"\nRestart=no\n", 0o644)
			h.sh("systemctl", "daemon-reload")
			since := h.cursor()
			if out, err := h.try("systemctl", "start", "xlb"); err == nil {
				t.Errorf("xlb started without %s:\n%s", capName, out)
				h.sh("systemctl", "stop", "xlb")
			}
			j := h.journal(since)
			if !strings.Contains(j, "xlb failed") {
				t.Errorf("without %s: no daemon error in the journal:\n%s", capName, j)
			}
			t.Logf("without %s: %s", capName, clip(firstMatch(j, "xlb failed"), 240))
			h.sh("rm", "-r", "/run/systemd/system/xlb.service.d")
			h.sh("systemctl", "daemon-reload")
			h.sh("systemctl", "reset-failed", "xlb")
		}
	})

	step("start-returns-when-ready", func(t *testing.T) {
		// Host settings the daemon must change, and write back at its
		// stop (through the sandbox's two writable sysctls).
		h.sh("sh", "-c", "echo 0 > "+loForwarding+" && echo > "+reservedPorts)
		h.sh("systemctl", "enable", "xlb")
		start := time.Now()
		h.sh("systemctl", "start", "xlb")
		took := time.Since(start)
		code, body := h.readyz() // right when start returned
		if code != 200 {
			t.Fatalf("readyz right after systemctl start returned: %d %q", code, body)
		}
		t.Logf("systemctl start xlb returned after %s; readyz then: %d %s", took.Round(10*time.Millisecond), code, body)
		p := h.show("ActiveState", "SubState", "StatusText", "WatchdogUSec")
		if p["ActiveState"] != "active" || p["SubState"] != "running" {
			t.Errorf("state %s/%s, want active/running", p["ActiveState"], p["SubState"])
		}
		if !strings.HasPrefix(p["StatusText"], "running:") {
			t.Errorf("StatusText %q, want the daemon's running summary", p["StatusText"])
		}
		if st, _ := h.try("systemctl", "status", "--no-pager", "--lines=0", "xlb"); !strings.Contains(st, `Status: "`+p["StatusText"]+`"`) {
			t.Errorf("systemctl status lacks the status line %q:\n%s", p["StatusText"], st)
		}
		if p["WatchdogUSec"] != "30s" {
			t.Errorf("WatchdogUSec=%s, want 30s", p["WatchdogUSec"])
		}
		if !h.xdpAttached() {
			t.Error("no XDP program on eth0 while running")
		}
	})

	step("sandbox", func(t *testing.T) {
		status := h.sh("cat", fmt.Sprintf("/proc/%d/status", h.mainPID()))
		want := map[string]string{
			// CAP_NET_ADMIN (12), CAP_BPF (39); no CAP_PERFMON (38)
			"CapEff": "0000008000001000", "CapBnd": "0000008000001000",
			"NoNewPrivs": "1", "Seccomp": "2",
		}
		for k, v := range want {
			if got := procField(status, k); got != v {
				t.Errorf("%s: %s, want %s", k, got, v)
			}
		}
		// ProtectKernelTunables=yes: /proc/sys and /sys/fs/bpf read-only
		// in the daemon's mount namespace, except the two sysctls it
		// writes and its state_dir.
		mounts := mountOptions(h.sh("cat", fmt.Sprintf("/proc/%d/mountinfo", h.mainPID())))
		for path, mode := range map[string]string{
			"/proc/sys": "ro", "/sys/fs/bpf": "ro", "/sys/fs/bpf/xlb": "rw",
			loForwarding: "rw", reservedPorts: "rw",
		} {
			if got := mounts[path]; got != mode {
				t.Errorf("the daemon's %s is mounted %q, want %s", path, got, mode)
			}
		}
	})

	step("traffic", func(t *testing.T) { h.traffic(30) })

	step("watchdog-pings", func(t *testing.T) {
		// systemd stamps the watchdog at start; a ping moves the stamp.
		// The daemon pings at half of WatchdogSec (15 s).
		first := h.show("WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"]
		h.waitFor("a watchdog ping", 45*time.Second, func() (bool, string) {
			ts := h.show("WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"]
			return ts != first, "WatchdogTimestampMonotonic=" + ts
		})
	})

	step("sigkill-keeps-connections", func(t *testing.T) {
		// The pinned links and maps outlive the process: the streams keep
		// flowing while systemd restarts xlb, which adopts their pairs.
		s := h.openStreams(12)
		old := h.mainPID()
		since := h.cursor()
		h.sh("systemctl", "kill", "--signal=KILL", "xlb")
		h.waitFor("restart after SIGKILL", 60*time.Second, func() (bool, string) {
			p := h.show("ActiveState", "MainPID", "NRestarts")
			return p["ActiveState"] == "active" && p["MainPID"] != "0" && p["MainPID"] != strconv.Itoa(old), fmt.Sprint(p)
		})
		if n, _ := strconv.Atoi(h.show("NRestarts")["NRestarts"]); n < 1 {
			t.Errorf("NRestarts=%d after SIGKILL", n)
		}
		if code, body := h.readyz(); code != 200 {
			t.Errorf("readyz after the restart: %d %s", code, body)
		}
		j := h.journal(since)
		if !strings.Contains(j, "status=9/KILL") {
			t.Errorf("journal lacks the SIGKILL:\n%s", j)
		}
		if n := adoptedPairs(j); n < len(s.list) {
			t.Errorf("the restarted xlb adopted %d connection pairs, want at least the %d streams:\n%s", n, len(s.list), j)
		}
		h.keepFlowing(s, 3)
		if err := s.close(); err != nil {
			t.Errorf("streams across SIGKILL and restart: %v", err)
		}
		t.Logf("%d streams kept across SIGKILL and restart (%d bytes each way)", len(s.list), s.bytes())
		h.traffic(9)
	})

	step("upgrade-reloads", func(t *testing.T) {
		cfgBefore := h.sh("sha256sum", "/etc/xlb/xlb.yaml")
		old := h.mainPID()
		since := h.cursor()
		out := h.sh("apt-get", "install", "-y", "--no-install-recommends", debIn(1))
		for _, want := range []string{"hot upgrade: connections are kept", "the new version took over"} {
			if !strings.Contains(out, want) {
				t.Errorf("upgrade output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "reset") {
			t.Errorf("upgrade output speaks of a reset:\n%s", out)
		}
		// postinst's reload returned: the new process is ready.
		if code, body := h.readyz(); code != 200 {
			t.Errorf("readyz right after the upgrade: %d %s", code, body)
		}
		if pid := h.mainPID(); pid == old || pid == 0 {
			t.Errorf("MainPID %d after the upgrade (before %d): no hand-off", pid, old)
		}
		if v := h.statusVersion(); v != v2 {
			t.Errorf("status API version %q after the upgrade, want %s", v, v2)
		}
		if after := h.sh("sha256sum", "/etc/xlb/xlb.yaml"); after != cfgBefore {
			t.Errorf("/etc/xlb/xlb.yaml changed by the upgrade")
		}
		if left, _ := h.try("sh", "-c", "ls /etc/xlb/*.dpkg-* 2>/dev/null"); strings.TrimSpace(left) != "" {
			t.Errorf("dpkg left %s", left)
		}
		j := h.journal(since)
		if !strings.Contains(j, "hot upgrade complete") || strings.Contains(j, "shutdown window") {
			t.Errorf("journal: want a hot upgrade and no shutdown window:\n%s", j)
		}
		h.traffic(9)
	})

	step("upgrade-without-restart", func(t *testing.T) {
		h.sh("sh", "-c", "echo XLB_RESTART_ON_UPGRADE=no >> /etc/default/xlb")
		old := h.mainPID()
		out := h.sh("apt-get", "install", "-y", "--reinstall", "--no-install-recommends", debIn(1))
		if !strings.Contains(out, "keeps running the previous version until you run: systemctl reload xlb") {
			t.Errorf("output lacks the no-restart notice naming systemctl reload:\n%s", out)
		}
		if pid := h.mainPID(); pid != old {
			t.Errorf("MainPID %d, before %d: restarted despite XLB_RESTART_ON_UPGRADE=no", pid, old)
		}
		if env := h.sh("cat", "/etc/default/xlb"); !strings.Contains(env, "\nXLB_RESTART_ON_UPGRADE=no\n") {
			t.Errorf("/etc/default/xlb lost the operator's setting:\n%s", env)
		}
	})

	step("stop-takes-the-shutdown-window", func(t *testing.T) {
		since := h.cursor()
		done := make(chan error, 1)
		start := time.Now()
		go func() { _, err := h.try("systemctl", "stop", "xlb"); done <- err }()
		sawDraining := false
		var err error
	poll:
		for {
			select {
			case err = <-done:
				break poll
			case <-time.After(100 * time.Millisecond):
				if code, body := h.readyz(); code == 503 && strings.Contains(body, "shutting_down") {
					sawDraining = true
				}
			}
		}
		took := time.Since(start)
		if err != nil {
			t.Fatalf("systemctl stop: %v", err)
		}
		t.Logf("systemctl stop xlb took %s (shutdown_timeout %d s)", took.Round(10*time.Millisecond), shutdownTimeout)
		if took < time.Duration(shutdownTimeout-1)*time.Second {
			t.Errorf("stop took %s, want at least shutdown_timeout-1s = %ds", took, shutdownTimeout-1)
		}
		if !sawDraining {
			t.Error("readyz never answered 503 shutting_down during the stop")
		}
		p := h.show("ActiveState", "Result")
		if p["ActiveState"] != "inactive" || p["Result"] != "success" {
			t.Errorf("after stop: %v, want inactive/success", p)
		}
		if st, _ := h.try("systemctl", "is-failed", "xlb"); strings.TrimSpace(st) != "inactive" {
			t.Errorf("is-failed: %q, want inactive", st)
		}
		if h.xdpAttached() {
			t.Error("XDP program still attached after stop")
		}
		// SIGTERM's end removes the pins (the bpffs itself stays). The
		// empty state_dir may stay: the unit makes only it writable in
		// /sys/fs/bpf (ProtectKernelTunables=yes), so inside the sandbox
		// it is a mount point on a read-only parent.
		if out, err := h.try("sh", "-c", "test -z \"$(ls -A /sys/fs/bpf/xlb 2>/dev/null)\" && stat -f -c %T /sys/fs/bpf"); err != nil || strings.TrimSpace(out) != "bpf_fs" {
			t.Errorf("after stop: %v %s; want no pins left in /sys/fs/bpf/xlb, /sys/fs/bpf still a bpffs\n%s", err, out, h.sh("ls", "-laR", "/sys/fs/bpf"))
		}
		j := h.journal(since)
		for _, want := range []string{"shutting down", "shutdown window over"} {
			if !strings.Contains(j, want) {
				t.Errorf("journal of the stop lacks %q:\n%s", want, j)
			}
		}
		// Set at start, kept across SIGKILL and hot upgrades, restored
		// now.
		if got := strings.Fields(h.sh("cat", loForwarding, reservedPorts)); !slices.Equal(got, []string{"0"}) {
			t.Errorf("after stop: %s and %s hold %q, want their values before the start (0 and empty)", loForwarding, reservedPorts, got)
		}
	})

	step("remove-stops-and-disables", func(t *testing.T) {
		h.sh("systemctl", "start", "xlb")
		if !h.xdpAttached() {
			t.Fatal("not attached after start")
		}
		out := h.sh("apt-get", "remove", "-y", "xlb")
		if st, _ := h.try("systemctl", "is-active", "xlb"); strings.TrimSpace(st) != "inactive" {
			t.Errorf("after remove: is-active %q\n%s", st, out)
		}
		if h.xdpAttached() {
			t.Error("XDP program still attached after remove")
		}
		h.sh("test", "!", "-e", "/lib/systemd/system/xlb.service")
		h.sh("test", "!", "-e", "/etc/systemd/system/multi-user.target.wants/xlb.service")
		h.sh("test", "-f", "/etc/xlb/xlb.yaml") // conffiles stay until purge
		if st := h.sh("dpkg-query", "-W", "-f=${db:Status-Abbrev}", "xlb"); strings.TrimSpace(st) != "rc" {
			t.Errorf("dpkg status %q, want rc", st)
		}
	})

	step("purge-removes-config", func(t *testing.T) {
		h.sh("apt-get", "purge", "-y", "xlb")
		h.sh("test", "!", "-e", "/etc/xlb")
		h.sh("test", "!", "-e", "/etc/default/xlb")
	})

	step("remove-detaches-a-failed-unit", func(t *testing.T) {
		h.sh("apt-get", "install", "-y", "--no-install-recommends", debIn(1))
		h.write("/etc/xlb/xlb.yaml", config, 0o644)
		h.failedUnitLeftAttached()
		out := h.sh("apt-get", "remove", "-y", "xlb")
		h.checkDetached(out)
		h.sh("apt-get", "purge", "-y", "xlb")
	})

	step("rpm-lifecycle", func(t *testing.T) {
		// %post applies the preset policy (systemctl preset). An RPM
		// distribution's policy ends in "disable *" (Fedora, EL, SUSE);
		// Debian ships none, which would enable the unit.
		h.write("/etc/systemd/system-preset/99-default-disable.preset", "disable *\n", 0o644)
		out := h.sh("rpm", "-i", "--nodeps", rpmIn(0))
		if !strings.Contains(out, "not enabled and not started") {
			t.Errorf("rpm -i output lacks the not-started notice:\n%s", out)
		}
		if st, _ := h.try("systemctl", "is-active", "xlb"); strings.TrimSpace(st) != "inactive" {
			t.Errorf("after rpm -i: is-active %q", st)
		}
		h.write("/etc/xlb/xlb.yaml", config, 0o644)
		h.sh("systemctl", "enable", "--now", "xlb")
		if code, body := h.readyz(); code != 200 {
			t.Fatalf("readyz after start: %d %s", code, body)
		}
		old := h.mainPID()
		since := h.cursor()
		// The new %post reloads; the old %postun sees that and restarts
		// nothing.
		out = h.sh("rpm", "-U", "--nodeps", rpmIn(1))
		if !strings.Contains(out, "hot upgrade: connections are kept") || strings.Contains(out, "reset") {
			t.Errorf("rpm -U output: want the hot upgrade and no reset:\n%s", out)
		}
		if pid := h.mainPID(); pid == old || pid == 0 {
			t.Errorf("MainPID %d after rpm -U (before %d): no hand-off", pid, old)
		}
		if j := h.journal(since); strings.Count(j, "hot upgrade complete: handed over") != 1 || strings.Contains(j, "shutdown window") {
			t.Errorf("journal of rpm -U: want one hand-off and no stop:\n%s", j)
		}
		h.sh("test", "!", "-e", "/run/xlb-rpm-reloaded")
		if v := h.statusVersion(); v != v2 {
			t.Errorf("version %q after rpm -U, want %s", v, v2)
		}
		if got := h.sh("cat", "/etc/xlb/xlb.yaml"); got != config {
			t.Error("/etc/xlb/xlb.yaml changed by rpm -U")
		}
		h.sh("rpm", "-e", "xlb")
		if st, _ := h.try("systemctl", "is-active", "xlb"); strings.TrimSpace(st) != "inactive" {
			t.Errorf("after rpm -e: is-active %q", st)
		}
		if h.xdpAttached() {
			t.Error("XDP program still attached after rpm -e")
		}
		h.sh("test", "!", "-e", "/etc/systemd/system/multi-user.target.wants/xlb.service")
		h.sh("test", "-f", "/etc/xlb/xlb.yaml.rpmsave")
	})

	step("rpm-erase-detaches-a-failed-unit", func(t *testing.T) {
		h.sh("rpm", "-i", "--nodeps", rpmIn(1))
		h.write("/etc/xlb/xlb.yaml", config, 0o644)
		h.failedUnitLeftAttached()
		out := h.sh("rpm", "-e", "xlb")
		h.checkDetached(out)
	})

	t.Logf("whole booted-host test: %s", time.Since(testStart).Round(100*time.Millisecond))
}

// failedUnitLeftAttached starts xlb with the sysctls it changes reset,
// checks that `xlb detach` refuses while it runs, then SIGKILLs it with
// Restart=no (a drop-in): the unit ends failed, with no process, and XDP
// stays attached through the pins (what a crash keeps, for the restart
// that does not come).
func (h *host) failedUnitLeftAttached() {
	t := h.t
	t.Helper()
	h.sh("sh", "-c", "echo 0 > "+loForwarding+" && echo > "+reservedPorts)
	h.write("/run/systemd/system/xlb.service.d/50-no-restart.conf", "[Service]\nRestart=no\n", 0o644)
	h.sh("systemctl", "daemon-reload")
	h.sh("systemctl", "start", "xlb")
	if out, err := h.try("xlb", "detach"); err == nil || !strings.Contains(out, "refused: another xlb is running") {
		t.Errorf("xlb detach while xlb runs: %v, want a refusal:\n%s", err, out)
	}
	if !h.xdpAttached() {
		t.Fatal("not attached while running (or detached by a refused xlb detach)")
	}
	h.sh("systemctl", "kill", "--signal=KILL", "xlb")
	h.waitFor("the unit fails", 30*time.Second, func() (bool, string) {
		p := h.show("ActiveState", "MainPID")
		return p["ActiveState"] == "failed" && p["MainPID"] == "0", fmt.Sprint(p)
	})
	if !h.xdpAttached() {
		t.Fatal("XDP was detached when the process was killed; want it kept (crash survival)")
	}
	if pins := strings.TrimSpace(h.sh("ls", "-A", "/sys/fs/bpf/xlb")); pins == "" {
		t.Fatal("no pins under /sys/fs/bpf/xlb after SIGKILL")
	}
	h.sh("rm", "-r", "/run/systemd/system/xlb.service.d")
	h.sh("systemctl", "daemon-reload")
}

// checkDetached: the removal (its output out) ran xlb detach, which left
// no XDP program, no pins and the sysctls as they were before the start.
func (h *host) checkDetached(out string) {
	t := h.t
	t.Helper()
	if !strings.Contains(out, "xlb detach: XDP detached from eth0") {
		t.Errorf("the removal did not say that xlb detach detached XDP:\n%s", out)
	}
	if h.xdpAttached() {
		t.Error("XDP program still attached after the removal of a failed unit")
	}
	if left, _ := h.try("sh", "-c", "ls -A /sys/fs/bpf/xlb 2>/dev/null"); strings.TrimSpace(left) != "" {
		t.Errorf("pins left after the removal of a failed unit:\n%s", h.sh("ls", "-laR", "/sys/fs/bpf"))
	}
	if got := strings.Fields(h.sh("cat", loForwarding, reservedPorts)); !slices.Equal(got, []string{"0"}) {
		t.Errorf("after the removal: %s and %s hold %q, want their values before the start (0 and empty)", loForwarding, reservedPorts, got)
	}
	// The removal also cleared the failed state (the unit is gone).
	if st, _ := h.try("systemctl", "is-active", "xlb"); strings.TrimSpace(st) != "inactive" {
		t.Errorf("after the removal: is-active %q, want inactive", st)
	}
}

// The sysctls the daemon sets (pkg/hostnet) and the unit leaves writable.
const (
	loForwarding  = "/proc/sys/net/ipv4/conf/lo/forwarding"
	reservedPorts = "/proc/sys/net/ipv4/ip_local_reserved_ports"
)

// mountOptions maps each mount point of a /proc/PID/mountinfo text to "ro"
// or "rw" (the per-mount options of its top-most mount).
func mountOptions(mountinfo string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		m[f[4]], _, _ = strings.Cut(f[5], ",")
	}
	return m
}
