package maintenance

// SetAfterDecide installs a hook that runs in every cycle between the
// cycle's decisions and the reaper (tests only: it lets a test send a
// packet under a cycle's feet).
func SetAfterDecide(l *Loop, f func()) {
	l.mu.Lock()
	l.afterDecide = f
	l.mu.Unlock()
}

// WheelGranule and TimerWheelSlack give the TIME_WAIT lab test the timer
// wheel's model (snathold_internal_test.go) and the slack SNATHold allows.
var WheelGranule = wheelGranule

const TimerWheelSlack = timerWheelSlack
