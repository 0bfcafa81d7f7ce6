package bgp

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// crashHelperEnv, set to a restart time in seconds, makes the test binary
// a lab speaker that announces and then waits to be killed (the crash of
// TestBird/crash); it prints crashHelperReady once it announces.
const (
	crashHelperEnv   = "XLB_BGP_TEST_CRASH_HELPER"
	crashHelperReady = "announcing"
	// crashHelperLife bounds the helper's life should the test never kill it.
	crashHelperLife = 5 * time.Minute
)

func TestMain(m *testing.M) {
	if v := os.Getenv(crashHelperEnv); v != "" {
		os.Exit(crashHelper(v))
	}
	os.Exit(m.Run())
}

func crashHelper(restartSecs string) int {
	secs, err := strconv.Atoi(restartSecs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", crashHelperEnv, restartSecs, err)
		return 2
	}
	o := labOptions(9, secs)
	log := logrus.New()
	log.SetOutput(os.Stderr)
	o.Log = log
	s, err := New(o)
	if err == nil {
		err = s.Start(context.Background())
	}
	if err == nil {
		err = s.SetAnnounced(o.Prefixes)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(crashHelperReady)
	time.Sleep(crashHelperLife)
	return 0
}
