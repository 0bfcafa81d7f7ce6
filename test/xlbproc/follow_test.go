package xlbproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// fakeDaemon plays the hand-off's log protocol: the first generation
// starts the next one (which inherits stdout), announces it with
// LineStarting, then reports OUTCOME and exits 0 on "handed over" or
// keeps running on "failed". A later generation runs until SIGTERM and
// exits 7.
//
// Each waits in a background sleep, and its TERM trap kills that sleep
// and waits for it: dash runs a trap as soon as the signal arrives,
// without waiting for a foreground child, so a foreground sleep would
// outlive the shell, reparented to the test (the subreaper), and
// TestMain's ReapOrphans would count it as leaked (CI met that once). The
// wait also covers a TERM that reaches the sleep between its fork and
// its exec, where the child still runs the shell's handler and loses it.
// A failed hand-off's first generation waits for the successor it
// stopped, so the test's cleanup never SIGKILLs a shell with a child.
const fakeDaemon = `#!/bin/sh
if [ -z "$GEN" ]; then
	GEN=2 "$0" &
	echo "level=info msg=\"hot upgrade: starting the new process\" binary=$0 pid=$!"
	sleep 0.2
	if [ "$OUTCOME" = failed ]; then
		kill $!
		wait $!
		trap 'kill $! 2>/dev/null; wait; echo first got TERM; exit 0' TERM
		echo "level=error msg=\"hot upgrade failed; still serving\" error=\"it failed\""
		while :; do sleep 0.05 & wait $!; done
	fi
	echo "level=info msg=\"hot upgrade complete: handed over\" new_pid=$!"
	exit 0
fi
trap 'kill $! 2>/dev/null; wait; echo successor got TERM; exit 7' TERM
echo "successor running pid=$$"
while :; do sleep 0.05 & wait $!; done
`

func startFake(t *testing.T, outcome string) *Proc {
	t.Helper()
	if err := SetChildSubreaper(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fake-xlb")
	if err := os.WriteFile(path, []byte(fakeDaemon), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), "OUTCOME="+outcome)
	p, err := startCmd(cmd, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// Proc follows a hand-off: the successor becomes the owner, gets the
// signals, and its exit code is the daemon's.
func TestFollowHandOff(t *testing.T) {
	p := startFake(t, "handed over")
	first := p.Pid()
	to, err := p.WaitHandOff(first, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("successor running pid="+strconv.Itoa(to), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Exited() {
		t.Fatal("Exited after a hand-off: the successor still runs")
	}
	if h := p.HandOffs(); len(h) != 1 || h[0].From != first || h[0].To != to {
		t.Fatalf("hand-offs %+v, want %d -> %d", h, first, to)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(30 * time.Second)
	if err != nil || code != 7 {
		t.Fatalf("exit %d, %v; want the successor's 7", code, err)
	}
}

// A failed hand-off leaves the old process the owner; its exit 0 ends the
// daemon. The fake installs its TERM trap before it logs the failure, as
// the test signals as soon as it reads that line.
func TestFollowFailedHandOff(t *testing.T) {
	p := startFake(t, "failed")
	first := p.Pid()
	if err := p.WaitLog(LineFailed, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Pid() != first || p.Exited() {
		t.Fatalf("owner %d (exited %v) after a failed hand-off, want %d running", p.Pid(), p.Exited(), first)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit %d, %v; want 0", code, err)
	}
	if len(p.HandOffs()) != 0 {
		t.Fatalf("hand-offs %+v after a failed one", p.HandOffs())
	}
}
