package maintenance

import (
	"testing"
	"time"
)

// wheelGranule is the granularity, in ticks, of the level of the kernel's
// timer wheel that a timer delta ticks away goes into (kernel/time/timer.c
// calc_wheel_index, Linux 4.8 and later): level 0 holds delays below
// LVL_START(1) = 63 ticks in 1-tick granules, level n >= 1 those from
// LVL_START(n) = 63 << 3(n-1) ticks in 8^n-tick granules. The timer is
// queued at the first granule boundary after its expiry (calc_index
// rounds the expiry down to its granule and adds one), so it fires up to
// one granule late, never early. Levels 0..7 cover delays up to 12 days at
// HZ=1000 (LVL_DEPTH is 9 above HZ=100, 8 at 100): far beyond 60 s.
func wheelGranule(delta uint64) uint64 {
	lvl := 0
	for n := 1; n < 8; n++ {
		if delta >= 63<<(3*(n-1)) {
			lvl = n
		}
	}
	return 1 << (3 * lvl)
}

// SNATHold's reasoning: the backend's TIME_WAIT is 60 s (the seed's
// time-wait too), and the timer wheel fires a 60 s timer up to one granule
// of its level late: 5.12 s at HZ=100, 2.048 s at HZ=250, 1.71 s at
// HZ=300, 4.096 s at HZ=1000 (the kernel's own table in timer.c). The
// slack is the worst of those at every rate Linux can be built with from
// 100 to 1000; "1/8 of the timeout" is only the bound for a delay at the
// bottom of a level (8/63). The margin comes on top.
func TestSNATHoldCoversTheTimerWheel(t *testing.T) {
	if backendTimeWait != TimeWait || SNATHold != backendTimeWait+timerWheelSlack+snatHoldMargin {
		t.Fatalf("SNATHold %v is not %v + %v + %v (TimeWait %v)", SNATHold, backendTimeWait, timerWheelSlack, snatHoldMargin, TimeWait)
	}
	if SNATHold != 70*time.Second {
		t.Fatalf("SNATHold %v, want 70 s", SNATHold)
	}
	want := map[uint64]time.Duration{100: 5120 * time.Millisecond, 250: 2048 * time.Millisecond, 300: 1706666666, 1000: 4096 * time.Millisecond}
	var worst time.Duration
	for _, hz := range []uint64{100, 128, 200, 250, 256, 300, 500, 512, 1000} {
		g := wheelGranule(uint64(backendTimeWait/time.Second) * hz)
		late := time.Duration(g) * time.Second / time.Duration(hz)
		if w, ok := want[hz]; ok && late != w {
			t.Errorf("HZ=%d: a 60 s timer up to %v late, want %v (timer.c's table)", hz, late, w)
		}
		if late > timerWheelSlack || 63*late > 8*backendTimeWait {
			t.Errorf("HZ=%d: a 60 s timer up to %v late: beyond the slack %v or 8/63 of 60 s", hz, late, timerWheelSlack)
		}
		worst = max(worst, late)
	}
	if worst != timerWheelSlack {
		t.Errorf("worst rounding %v, slack %v: the slack is the worst case, HZ=100's granule", worst, timerWheelSlack)
	}
	if snatHoldMargin < time.Second {
		t.Errorf("margin %v: less than a retransmitted FIN's first RTO and a maintenance cycle", snatHoldMargin)
	}
}
