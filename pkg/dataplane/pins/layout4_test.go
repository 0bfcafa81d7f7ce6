package pins

import (
	"fmt"
	"testing"
)

// Layout 4 to 5 changes no entry: the step names no map, so every map is
// copied as it is (the counter array only grew at its end).
func TestLayout4Step(t *testing.T) {
	if layout4Step.From != 4 || len(layout4Step.Maps) != 0 {
		t.Errorf("layout 4 step: from %d, converters for %d maps; want from 4, none", layout4Step.From, len(layout4Step.Maps))
	}
}

// Every layout from 2, the first pinned, to this build's has its step,
// registered under the layout it starts from.
func TestLayoutStepsChain(t *testing.T) {
	l := CurrentLayout()
	for v := uint32(2); v < l.Version; v++ {
		s, ok := l.Steps[v]
		if !ok {
			t.Errorf("no step from layout %d", v)
			continue
		}
		if s.From != v {
			t.Errorf("the step registered for layout %d starts from %d", v, s.From)
		}
	}
	if want := fmt.Sprintf("2 to %d", l.Version); knownLayouts(l) != want {
		t.Errorf("this build migrates layouts %s, want %s", knownLayouts(l), want)
	}
}
