package testnet

import (
	"os"
	"testing"
)

// RequireRoot skips tb unless the process runs as root: namespaces, veths
// and XDP programs need CAP_NET_ADMIN, CAP_SYS_ADMIN and CAP_BPF.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root (network namespaces, veth, XDP); run the tests as root")
	}
}

// NewForTest returns an empty Topology whose prefix is base plus random
// characters (RandomPrefix), for a test that builds its own hosts. It skips
// tb unless run as root, and in tb's cleanup closes the topology and
// reports anything left behind under the prefix (Leftovers) as an error.
func NewForTest(tb testing.TB, base string) *Topology {
	tb.Helper()
	RequireRoot(tb)
	prefix, err := RandomPrefix(base)
	if err != nil {
		tb.Fatal(err)
	}
	tn, err := New(Config{Prefix: prefix})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := tn.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
		if left, err := Leftovers(prefix); err != nil || len(left) > 0 {
			tb.Errorf("left behind: %v, %v", left, err)
		}
	})
	return tn
}
