package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// stateDir is the lab's own state_dir, /sys/fs/bpf/PREFIX: parallel labs
// never share pins (the daemon mounts the bpffs at /sys/fs/bpf if none is
// there).
func stateDir(l *lab.Lab) string { return "/sys/fs/bpf/" + l.Prefix }

// stateDirField finds the state_dir a config sets.
var stateDirField = regexp.MustCompile(`(?m)^state_dir: *(\S+)$`)

// labConfig is an xlb.yaml for a lab: listen 192.0.2.10:80 -> the lab's
// backends on 8080 (named backend-N), then any extra "name=ip" backends,
// the lab's state_dir, then the extra top-level YAML.
func labConfig(l *lab.Lab, extra string, extraBackends ...string) string {
	var b strings.Builder
	b.WriteString("name: e2e\nlisten:\n  ip: 192.0.2.10\nports:\n  - local_port: 80\n    remote_port: 8080\n")
	b.WriteString("provider:\n  static:\n    backends:\n")
	for i, be := range l.Backends {
		fmt.Fprintf(&b, "      - name: backend-%d\n        ip: %s\n", i+1, be.IP())
	}
	for _, nb := range extraBackends {
		name, ip, _ := strings.Cut(nb, "=")
		fmt.Fprintf(&b, "      - name: %s\n        ip: %s\n", name, ip)
	}
	if l.Topology == lab.TwoArm {
		b.WriteString("interfaces: [eth0, eth1]\nsnat:\n  ip: 198.51.100.1\n  port_range: \"40000-59999\"\n")
	} else {
		b.WriteString("interfaces: [eth0]\nsnat:\n  ip: 192.0.2.10\n  port_range: \"40000-59999\"\n")
	}
	b.WriteString("xdp_mode: native\nflow_table:\n  max_connections: 65536\n")
	if !strings.Contains(extra, "state_dir:") {
		fmt.Fprintf(&b, "state_dir: %s\n", stateDir(l))
	}
	if !strings.Contains(extra, "shutdown_timeout:") {
		b.WriteString("shutdown_timeout: 1\n")
	}
	// The lab's own admin socket: parallel labs never share one.
	sock := "  socket: " + adminSocket(l) + "\n"
	switch {
	case strings.Contains(extra, "  socket:"): // the test names its own
	case strings.Contains(extra, "admin:\n"):
		extra = strings.Replace(extra, "admin:\n", "admin:\n"+sock, 1)
	case !strings.Contains(extra, "admin:"):
		b.WriteString("admin:\n" + sock)
	}
	b.WriteString(extra)
	return b.String()
}

// adminSocket is the lab's admin socket (config admin.socket).
func adminSocket(l *lab.Lab) string { return "/run/xlb/" + l.Prefix + "-admin.sock" }

// startXLB runs the daemon in the lab's XLB namespace until the test ends
// and waits until it runs.
func startXLB(t *testing.T, l *lab.Lab, config string) *xlbproc.Proc {
	t.Helper()
	p, err := startXLBEnv(t, l, config, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("xlb running", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	return p
}

// stopXLB stops the daemon with SIGTERM and expects a clean exit.
func stopXLB(t testing.TB, l *lab.Lab, p *xlbproc.Proc) {
	t.Helper()
	if !p.Exited() {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	expectCleanExit(t, l, p)
}

// expectCleanExit waits for the daemon to exit, expects status 0, no XDP
// program left on the XLB namespace's interfaces and no state_dir (a stop
// removes the pins).
func expectCleanExit(t testing.TB, l *lab.Lab, p *xlbproc.Proc) {
	t.Helper()
	code, err := p.Wait(120 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("xlb exited with %d:\n%s", code, p.Log())
	}
	for _, ifc := range l.XLB.Ifaces {
		mode, err := l.XLB.XDPAttachMode(ifc.Name)
		if err != nil {
			t.Fatal(err)
		}
		if mode != 0 {
			t.Fatalf("XDP program still attached to %s after exit (mode %d)", ifc.Name, mode)
		}
	}
	if _, err := os.Stat(stateDir(l)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("state_dir %s after a clean exit: %v, want it removed", stateDir(l), err)
	}
}

// startXLBEnv starts the daemon with extra environment and does not wait
// for it to run (the caller decides what to expect).
func startXLBEnv(t testing.TB, l *lab.Lab, config string, env []string) (*xlbproc.Proc, error) {
	t.Helper()
	return startBinary(t, l, xlbBinary, config, env)
}

// startBinary is startXLBEnv with the daemon's binary. When the test
// ends a daemon still running is stopped (SIGTERM: it removes its pins,
// host-settings journal and namespace lock under /run/xlb; the lab
// configs' shutdown_timeout is 1 s), then anything left (a successor, a
// daemon that did not stop) is killed and the state_dir removed (rm -rf
// on a bpffs unpins).
func startBinary(t testing.TB, l *lab.Lab, binary, config string, env []string) (*xlbproc.Proc, error) {
	t.Helper()
	return startBinaryOpts(t, l, binary, config, xlbproc.Options{Env: env})
}

// startBinaryOpts is startBinary with xlbproc's options (extra arguments).
func startBinaryOpts(t testing.TB, l *lab.Lab, binary, config string, o xlbproc.Options) (*xlbproc.Proc, error) {
	t.Helper()
	p, err := xlbproc.Start(l.XLB, binary, t.TempDir(), config, o)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if !p.Exited() && p.Signal(syscall.SIGTERM) == nil {
			_, _ = p.Wait(60 * time.Second)
		}
		p.Kill()
		if m := stateDirField.FindStringSubmatch(config); m != nil {
			if err := os.RemoveAll(m[1]); err != nil {
				t.Errorf("remove state_dir: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("xlb log:\n%s", p.Log())
		}
	})
	return p, nil
}
