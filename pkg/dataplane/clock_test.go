package dataplane_test

import (
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/dataplane"
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
	after, err := e.DP.KernelNow()
	if err != nil {
		t.Fatal(err)
	}
	// Entries keep the low 32 bits of the clock: widened against the
	// clock, they fall between the readings taken around the SYN.
	flows := e.Flows(t)
	if len(flows) != 2 {
		t.Fatalf("%d flow entries, want 2", len(flows))
	}
	for k, v := range flows {
		if s := dataplane.Widen(after, v.LastSeen); s < before || s > after {
			t.Fatalf("%v: last_seen %d (widened %d) outside [%d, %d] (low 32 bits [%d, %d])",
				k, v.LastSeen, s, before, after, before.Low32(), after.Low32())
		}
		if age := dataplane.Age(after, v.LastSeen); age > after-before {
			t.Fatalf("%v: age %d at %d, want at most %d", k, age, after, after-before)
		}
	}
	if j, _ := e.DP.Ticks(60 * time.Second); uint64(j) != uint64(60*hz) {
		t.Fatalf("60s = %d ticks, want %d", j, 60*hz)
	}
}
