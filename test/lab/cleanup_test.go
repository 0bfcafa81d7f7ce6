package lab

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const signalChildEnv = "XLB_LAB_SIGNAL_CHILD_PREFIX"

// TestCloseOnSignal runs a child process that builds a lab and waits; on
// SIGTERM the child must run the "before" hook, remove the lab and exit 143.
func TestCloseOnSignal(t *testing.T) {
	if prefix := os.Getenv(signalChildEnv); prefix != "" {
		signalChild(prefix)
		return
	}
	requireRoot(t)
	prefix, _ := RandomPrefix()
	t.Cleanup(func() { CleanupStale(prefix) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestCloseOnSignal$", "-test.count=1")
	cmd.Env = append(os.Environ(), signalChildEnv+"="+prefix)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	var seen []string
	for lines.Scan() && lines.Text() != "ready" {
		seen = append(seen, lines.Text())
	}
	if names, _ := StaleNamespaces(prefix); len(names) == 0 {
		t.Fatalf("child built no lab; output %q", seen)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		seen = append(seen, lines.Text())
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 143 {
		t.Errorf("child exit: %v; want status 143", err)
	}
	if !strings.Contains(strings.Join(seen, "\n"), "before-hook") {
		t.Errorf("before hook did not run; output %q", seen)
	}
	checkGone(t, prefix)
}

func signalChild(prefix string) {
	l, err := Start(Options{Prefix: prefix, Backends: 1})
	if err != nil {
		fmt.Println("start:", err)
		os.Exit(2)
	}
	l.CloseOnSignal(func() { fmt.Println("before-hook") })
	fmt.Println("ready")
	time.Sleep(waitLong)
	l.Close()
	os.Exit(3)
}
