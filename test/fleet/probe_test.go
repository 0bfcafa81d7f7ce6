package fleet

import (
	"errors"
	"testing"
	"time"
)

func TestOutage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fail := errors.New("timeout")
	probes := []Probe{
		{Start: at(0)}, {Start: at(100), Err: fail}, {Start: at(200)}, {Start: at(300), Err: fail},
		{Start: at(400)}, {Start: at(500)},
	}
	failed, first, recovered := Outage(probes)
	if failed != 2 || !first.Equal(at(100)) || !recovered.Equal(at(400)) {
		t.Errorf("Outage = %d, %v, %v; want 2, +100ms, +400ms", failed, first.Sub(t0), recovered.Sub(t0))
	}
	if failed, _, recovered := Outage(probes[:4]); failed != 2 || !recovered.IsZero() {
		t.Errorf("Outage without a success after the last failure = %d, %v", failed, recovered)
	}
	if failed, _, _ := Outage(probes[:1]); failed != 0 {
		t.Errorf("Outage without failures = %d", failed)
	}
}
