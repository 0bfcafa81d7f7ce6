package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/test/lab"
)

// establish opens a connection through XLB and completes one echo.
func establish(t *testing.T, l *lab.Lab) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := l.Client().Dial(ctx, listenAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	return c
}

// tcpState returns the kernel's TCP state of a connection (1 = ESTABLISHED).
func tcpState(t *testing.T, c net.Conn) uint8 {
	t.Helper()
	info, err := tcpInfo(c.(*net.TCPConn))
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// Seed "XLB shutdown behavior": after SIGTERM the data path answers traffic
// with RSTs for shutdown_timeout (reactively: a silent connection gets
// nothing), new connections are refused, then XLB detaches and exits 0.
func TestShutdownWindow(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	p := startXLB(t, l, labConfig(l, "shutdown_timeout: 5\n"))
	talker := establish(t, l)
	silent := establish(t, l)

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("shutdown flag set", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// readiness went to 503 before the flag was set (seed step 1 before 3)
	if code, _, body := get(t, l.XLB, adminURL+"/readyz", "", ""); code != 503 || body != "shutting_down" {
		t.Fatalf("readyz during the shutdown window: %d %q", code, body)
	}
	if code, _, _ := get(t, l.XLB, adminURL+"/healthz", "", ""); code != 200 {
		t.Fatalf("healthz during the shutdown window: %d", code)
	}

	// the talker writes: the RST comes back and the next read reports it
	talker.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := talker.Write([]byte("anyone there?")); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("write: %v", err)
	}
	_, err := talker.Read(make([]byte, 16))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after writing during the shutdown window: %v, want ECONNRESET", err)
	}

	// a new connection is refused with a RST|ACK to its SYN
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = l.Client().Dial(ctx, listenAddr)
	cancel()
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("new connection during the shutdown window: %v, want ECONNREFUSED", err)
	}
	if p.Exited() {
		t.Fatal("xlb exited before its shutdown window ended")
	}

	expectCleanExit(t, l, p)
	if st := tcpState(t, silent); st != unix.BPF_TCP_ESTABLISHED {
		t.Fatalf("the silent connection is in TCP state %d after the window, want ESTABLISHED: XLB sent it something", st)
	}
	if err := p.WaitLog("shutdown window over", time.Second); err != nil {
		t.Fatal(err)
	}
}

// A second SIGTERM during the shutdown window ends it at once, still
// detaching cleanly.
func TestSecondSignalEndsShutdownWindow(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	p := startXLB(t, l, labConfig(l, "shutdown_timeout: 600\n"))
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("shutdown flag set", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// the 600 s window must not be waited out; expectCleanExit allows 120 s
	expectCleanExit(t, l, p)
	if err := p.WaitLog("second stop signal", time.Second); err != nil {
		t.Fatal(err)
	}
}
