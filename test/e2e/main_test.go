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
// XLB_BINARY).
var xlbBinary string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: skipped, needs root (network namespaces, XDP)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "xlb-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	xlbBinary, err = xlbproc.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
