package dptest

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// Pair is one connection pair as the flow map holds it.
type Pair struct {
	FwdKey dataplane.FlowKey   // client -> listen:local_port
	Fwd    dataplane.FlowValue // forward entry (holds the close flags)
	RevKey dataplane.FlowKey   // backend:remote_port -> SNAT:port
	Rev    dataplane.FlowValue // reverse entry
}

// Backend is the backend address and port the pair was sent to.
func (p Pair) Backend() netip.AddrPort { return p.Fwd.NewDst() }

// SNATPort is the backend-facing source port of the pair.
func (p Pair) SNATPort() uint16 { return p.Fwd.NewSrc().Port() }

// ForwardKey is the forward flow key of client -> listen:localPort.
func ForwardKey(client netip.AddrPort, localPort uint16) dataplane.FlowKey {
	return dataplane.NewFlowKey(client, netip.AddrPortFrom(ListenIP, localPort), dataplane.DirClient)
}

// LookupPair reads the pair whose forward key is client -> listen:localPort
// and its counterpart; ok is false when the forward entry is missing. A
// missing reverse entry leaves Rev zero.
func (e *Env) LookupPair(t testing.TB, client netip.AddrPort, localPort uint16) (Pair, bool) {
	t.Helper()
	p := Pair{FwdKey: ForwardKey(client, localPort)}
	v, err := e.DP.LookupFlow(p.FwdKey)
	if err == dataplane.ErrNotFound {
		return p, false
	}
	if err != nil {
		t.Fatal(err)
	}
	p.Fwd, p.RevKey = v, v.Peer(p.FwdKey)
	r, err := e.DP.LookupFlow(p.RevKey)
	if err != nil && err != dataplane.ErrNotFound {
		t.Fatal(err)
	}
	p.Rev = r
	return p, true
}

// MustPair is LookupPair that fails the test when the forward entry or its
// counterpart is missing.
func (e *Env) MustPair(t testing.TB, client netip.AddrPort, localPort uint16) Pair {
	t.Helper()
	p, ok := e.LookupPair(t, client, localPort)
	if !ok {
		t.Fatalf("no forward entry for %v -> :%d", client, localPort)
	}
	if p.Rev.Generation == 0 {
		t.Fatalf("pair %v -> :%d has no reverse entry %v", client, localPort, p.RevKey)
	}
	return p
}

// DeleteFlow removes one entry through the map API (to build broken states
// in tests) and fails the test when it is missing.
func (e *Env) DeleteFlow(t testing.TB, k dataplane.FlowKey) dataplane.FlowValue {
	t.Helper()
	v, err := e.DP.TakeFlow(k)
	if err != nil {
		t.Fatalf("delete %v: %v", k, err)
	}
	return v
}

// Now reads the data path's clock or fails the test.
func (e *Env) Now(t testing.TB) dataplane.Jiffies {
	t.Helper()
	j, err := e.DP.KernelNow()
	return must(t, j, err)
}

// WaitTick returns once the data path's clock reads later than j, so a
// packet sent afterwards stores a last-seen time different from j. It polls
// (a jiffy is 1-10 ms) and fails the test after a few seconds.
func (e *Env) WaitTick(t testing.TB, j dataplane.Jiffies) dataplane.Jiffies {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if n := e.Now(t); n > j {
			return n
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatalf("data path clock stuck at %d", j)
	return 0
}
