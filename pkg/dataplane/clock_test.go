package dataplane_test

import (
	"testing"
	"time"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

func TestClockAndHZ(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	hz, err := e.DP.HZ()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel HZ %d", hz)
	// A fresh measurement (HZ caches its first one) must agree; how long
	// it took is logged, not asserted.
	again, took, err := e.DP.MeasureHZ()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measured HZ %d again in %v", again, took)
	if again != hz {
		t.Fatalf("second measurement %d, first %d", again, hz)
	}
	before, err := e.DP.KernelNow()
	if err != nil {
		t.Fatal(err)
	}
	e.MustRun(t, synFrom(e, cli, 80).Frame(), e.Front, dt.XDPTX)
	after, _ := e.DP.KernelNow()
	for _, v := range e.Flows(t) {
		if s := uint64(v.LastSeen); s < uint64(before) || s > uint64(after) {
			t.Fatalf("last_seen %d outside [%d, %d]", s, before, after)
		}
	}
	if j, _ := e.DP.Ticks(60 * time.Second); uint64(j) != uint64(60*hz) {
		t.Fatalf("60s = %d ticks, want %d", j, 60*hz)
	}
}
