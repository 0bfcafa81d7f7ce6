package dptest

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// Flows returns every entry of the flow map.
func (e *Env) Flows(t testing.TB) map[dataplane.FlowKey]dataplane.FlowValue {
	t.Helper()
	out := map[dataplane.FlowKey]dataplane.FlowValue{}
	var k dataplane.FlowKey
	var v dataplane.FlowValue
	it := e.DP.FlowMap().Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterate flows: %v", err)
	}
	return out
}

// Counters reads the data path counters or fails the test.
func (e *Env) Counters(t testing.TB) dataplane.Counters {
	t.Helper()
	c, err := e.DP.Counters()
	return must(t, c, err)
}

// must returns v, or fails the test when err is not nil.
func must[T any](t testing.TB, v T, err error) T {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// MustRun runs frame and fails the test unless the action is want.
func (e *Env) MustRun(t testing.TB, frame []byte, ingress Iface, want uint32) []byte {
	t.Helper()
	act, out, err := e.Run(frame, ingress)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if act != want {
		t.Fatalf("action %s, want %s", ActionName(act), ActionName(want))
	}
	return out
}
