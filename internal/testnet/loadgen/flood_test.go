package loadgen

import (
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// requireHping3 fails t when hping3 is missing (`make deps` installs it).
func requireHping3(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("hping3"); err != nil {
		t.Fatalf("hping3 not found (Debian package hping3; `make deps` installs it): %v", err)
	}
}

// A paced flood sends, stops on request and reports what it sent; the
// server's kernel answers the SYNs to random sources, so no connection
// is ever accepted.
func TestSYNFlood(t *testing.T) {
	requireHping3(t)
	client, srv := pair(t)
	f, err := StartSYNFlood(client, "eth0", netip.AddrPortFrom(testnet.OneArmBackendIP(0), 8080), 100*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Stop() })
	time.Sleep(time.Second)
	if gone, out := f.Exited(); gone {
		t.Fatalf("hping3 exited early:\n%s", out)
	}
	st, err := f.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d SYNs in %v: %.0f/s", st.Packets, st.Elapsed.Round(time.Millisecond), st.Rate())
	if st.Packets == 0 {
		t.Fatal("no packets sent")
	}
	if n := srv.Stats().Accepted; n != 0 {
		t.Fatalf("%d connections accepted from spoofed SYNs", n)
	}
}
