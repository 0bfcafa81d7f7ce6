package xlbproc

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if left := ReapOrphans(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "xlbproc: killed leftover processes %v\n", left)
		code = 1
	}
	os.Exit(code)
}
