package testnet

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

	"github.com/vishvananda/netlink"
)

func TestCleanupStale(t *testing.T) {
	RequireRoot(t)
	prefix, _ := RandomPrefix("xt")
	t.Cleanup(func() { CleanupStale(prefix) })
	for _, n := range []string{"-a", "-b"} {
		h, err := createNamed(prefix+n, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
	// A leftover link in the root namespace (this kernel has no dummy).
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: prefix + "-d"}, PeerName: prefix + "-e"}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	if left, _ := Leftovers(prefix); len(left) != 4 {
		t.Fatalf("leftovers %v", left)
	}
	for _, bad := range []string{"", "x", "../x"} {
		if err := CleanupStale(bad); err == nil {
			t.Errorf("CleanupStale(%q) accepted", bad)
		}
	}
	if err := CleanupStale(prefix); err != nil {
		t.Fatal(err)
	}
	checkGone(t, prefix)
}

const signalChildEnv = "XLB_TESTNET_SIGNAL_CHILD_PREFIX"

// TestCloseOnSignal runs a child process that builds a topology and
// waits; on SIGTERM the child must run the "before" hook, remove the
// topology and exit 143.
func TestCloseOnSignal(t *testing.T) {
	if prefix := os.Getenv(signalChildEnv); prefix != "" {
		signalChild(prefix)
		return
	}
	RequireRoot(t)
	prefix, _ := RandomPrefix("xt")
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
	if left, _ := Leftovers(prefix); len(left) == 0 {
		t.Fatalf("child built nothing; output %q", seen)
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
	tn, err := New(Config{Prefix: prefix})
	if err == nil {
		var lan *Host
		if lan, err = tn.AddHost("lan"); err == nil {
			err = tn.AddBridge(lan, "br", nil)
		}
	}
	if err != nil {
		fmt.Println("start:", err)
		os.Exit(2)
	}
	CloseOnSignal(tn.Close, func() { fmt.Println("before-hook") })
	fmt.Println("ready")
	time.Sleep(waitLong)
	tn.Close()
	os.Exit(3)
}
