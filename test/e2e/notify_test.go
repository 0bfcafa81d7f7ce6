package e2e

import (
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// notifyMsg is one sd_notify datagram and what was true when it arrived.
type notifyMsg struct {
	text     string
	at       time.Time // when it arrived
	attached bool      // XDP was attached to eth0 when the message arrived
}

// fakeSystemd listens on a NOTIFY_SOCKET like systemd does.
type fakeSystemd struct {
	path string
	conn *net.UnixConn
	mu   sync.Mutex
	msgs []notifyMsg
}

func newFakeSystemd(t testing.TB, l *lab.Lab) *fakeSystemd {
	t.Helper()
	f := &fakeSystemd{path: filepath.Join(t.TempDir(), "notify.sock")}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: f.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	f.conn = c
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			at := time.Now()
			mode, _ := l.XLB.XDPAttachMode("eth0")
			f.mu.Lock()
			f.msgs = append(f.msgs, notifyMsg{text: string(buf[:n]), at: at, attached: mode != 0})
			f.mu.Unlock()
		}
	}()
	return f
}

func (f *fakeSystemd) messages() []notifyMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]notifyMsg(nil), f.msgs...)
}

// index returns the position of the first message containing s, or -1.
func (f *fakeSystemd) index(s string) int {
	for i, m := range f.messages() {
		if strings.Contains(m.text, s) {
			return i
		}
	}
	return -1
}

func (f *fakeSystemd) wait(t testing.TB, p *xlbproc.Proc, s string) int {
	t.Helper()
	return f.waitNth(t, p, s, 1)
}

// waitNth waits for the n-th message containing s (from 1) and returns
// its position.
func (f *fakeSystemd) waitNth(t testing.TB, p *xlbproc.Proc, s string, n int) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		seen := 0
		for i, m := range f.messages() {
			if strings.Contains(m.text, s) {
				if seen++; seen == n {
					return i
				}
			}
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("no sd_notify message number %d with %q; got %+v", n, s, f.messages())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// count returns how many messages contain s.
func (f *fakeSystemd) count(s string) int {
	n := 0
	for _, m := range f.messages() {
		if strings.Contains(m.text, s) {
			n++
		}
	}
	return n
}

// The daemon tells systemd READY=1 only once XDP is attached, keeps STATUS
// current, pings the watchdog when asked to, and announces its stop with STOPPING=1 and EXTEND_TIMEOUT_USEC
// covering shutdown_timeout plus cleanup.
func TestSdNotifyOrder(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	sd := newFakeSystemd(t, l)
	p, err := startXLBEnv(t, l, labConfig(l, "shutdown_timeout: 2\n"), []string{"NOTIFY_SOCKET=" + sd.path, "WATCHDOG_USEC=400000"})
	if err != nil {
		t.Fatal(err)
	}
	ready := sd.wait(t, p, "READY=1")
	msgs := sd.messages()
	if !msgs[ready].attached {
		t.Fatal("READY=1 arrived before XDP was attached to eth0")
	}
	if !strings.Contains(msgs[ready].text, "STATUS=running: XDP eth0 native; 3/3 backends routable") {
		t.Fatalf("READY message %q lacks the running STATUS", msgs[ready].text)
	}
	if first := sd.index("STATUS=starting"); first < 0 || first > ready {
		t.Fatalf("no starting STATUS before READY: %+v", msgs)
	}
	// WATCHDOG_USEC asks for pings at least every 400 ms
	if wd := sd.wait(t, p, "WATCHDOG=1"); wd < ready {
		t.Fatal("watchdog ping before READY")
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopping := sd.wait(t, p, "STOPPING=1")
	msgs = sd.messages()
	if !strings.Contains(msgs[stopping].text, "EXTEND_TIMEOUT_USEC=12000000") {
		t.Fatalf("STOPPING message %q should extend the timeout by shutdown_timeout (2 s) + 10 s", msgs[stopping].text)
	}
	if stopping < ready {
		t.Fatal("STOPPING before READY")
	}
	if code, err := p.Wait(60 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit %d err %v", code, err)
	}
	if left := sd.index("s left"); left < stopping {
		t.Fatalf("no shutdown-window STATUS after STOPPING: %+v", sd.messages())
	}
	for i, m := range sd.messages() {
		if strings.Contains(m.text, "READY=1") && i != ready {
			t.Fatalf("READY=1 sent twice: %+v", sd.messages())
		}
	}
}
