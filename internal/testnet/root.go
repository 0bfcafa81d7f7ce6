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
