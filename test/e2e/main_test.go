// Package e2e runs the real xlb binary in lab network namespaces and checks
// real TCP connections through it, byte by byte.
package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/xlbproject/xlb/test/xlbproc"
)

// xlbBinary is the daemon under test, built once per test run (or
// XLB_BINARY); binDir holds it and the other builds tests make.
var xlbBinary, binDir string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: skipped, needs root (network namespaces, XDP)")
		os.Exit(0)
	}
	// A successor whose parent (the old daemon) exits after a hand-off is
	// re-parented to this process, which waits for it (xlbproc.Proc).
	if err := xlbproc.SetChildSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var err error
	binDir, err = os.MkdirTemp("", "xlb-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	xlbBinary, err = xlbproc.Build(binDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(binDir)
		os.Exit(1)
	}
	code := m.Run()
	if left := xlbproc.ReapOrphans(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: killed processes the tests left running: %v\n", left)
		code = 1
	}
	os.RemoveAll(binDir)
	os.Exit(code)
}
