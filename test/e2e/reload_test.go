package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

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
