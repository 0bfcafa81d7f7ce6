package health

// verdict is the rise/fall state machine of one backend (plan14.md
// "Health checks", DESIGN §6b): unknown until the first result, which
// decides alone; afterwards fall consecutive failures make a healthy
// backend unhealthy and rise consecutive successes make an unhealthy one
// healthy. A result that agrees with the current state resets the
// opposite streak.
type verdict struct {
	rise, fall int

	known, healthy bool
	streak         int // consecutive results disagreeing with healthy
}

// add applies one result and reports whether the state changed (unknown →
// known counts as a change).
func (v *verdict) add(ok bool) (changed bool) {
	if !v.known {
		v.known, v.healthy, v.streak = true, ok, 0
		return true
	}
	if ok == v.healthy {
		v.streak = 0
		return false
	}
	v.streak++
	need := v.fall
	if ok {
		need = v.rise
	}
	if v.streak < need {
		return false
	}
	v.healthy, v.streak = ok, 0
	return true
}
