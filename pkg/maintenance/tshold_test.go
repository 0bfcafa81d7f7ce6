package maintenance_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// withTS is s with Linux's data-segment options: NOP, NOP, timestamps
// (val, ecr).
func withTS(s dt.Segment, val, ecr uint32) dt.Segment {
	d := make([]byte, 8)
	binary.BigEndian.PutUint32(d[:4], val)
	binary.BigEndian.PutUint32(d[4:], ecr)
	s.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop},
		{OptionType: layers.TCPOptionKindTimestamps, OptionData: d}}
	return s
}

// A pair that negotiated timestamps and whose backend closed first holds
// its SNAT port, but its close event makes the next cycle hint the port
// (dataplane.ReapTSHold, not counted as kept): once the reuse guard has
// passed, a client SYN with timestamps takes it (issue 36). Without the
// cycle, the port stays held.
func TestTimestampHoldHintedByCloseEvent(t *testing.T) {
	onEachPath(t, func(t *testing.T, o dt.Options) {
		o.Backends, o.SNATPortLo, o.SNATPortHi = dt.OneArmBackends[:1], 40000, 40000
		r := newRig(t, o, maintenance.Options{})
		c := &conn{r: r, port: 33000, syn: 1000}
		c.send(withTS(c.fromClient(dt.SYN, 1000, 0), 100, 0))
		off := c.pair().Fwd.TsOff
		c.send(withTS(c.fromBackend(dt.SYN|dt.ACK, 5000, 1001), 7, 100+off))
		c.send(withTS(c.fromClient(dt.ACK, 1001, 5001), 101, 7))
		c.send(withTS(c.fromBackend(dt.FIN|dt.ACK, 5001, 1001), 8, 101+off))
		c.send(withTS(c.fromClient(dt.FIN|dt.ACK, 1001, 5002), 102, 8))
		old := c.pair()
		if old.Fwd.Flags&dataplane.FlagTS == 0 || old.Rev.Flags&dataplane.FlagPortFreed != 0 {
			t.Fatalf("old pair flags %#x/%#x: want timestamps negotiated and the port held", old.Fwd.Flags, old.Rev.Flags)
		}

		// The guard passes on the data path's clock; without a cycle the
		// port is not hinted, and the SYN is refused.
		guard, err := r.e.DP.Ticks(dataplane.SNATReuseGuard)
		if err != nil {
			t.Fatal(err)
		}
		until := r.lastSeen(old) + guard
		for deadline := time.Now().Add(30 * time.Second); r.e.Now(t) < until; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("data path clock did not reach %d", until)
			}
		}
		syn := func(port uint16) dt.Segment {
			s := withTS(r.e.FromClient(dt.Client(port), 80, dt.SYN, 3000, 0, nil), 500, 0)
			return s
		}
		if act, _, err := r.e.Run(syn(33001).Frame(), r.e.Front); err != nil || act != dt.XDPTX || r.e.Counters(t).SNATExhausted != 1 {
			t.Fatalf("SYN before the cycle: action %d err %v counters %+v; want a RST for want of a port", act, err, r.e.Counters(t))
		}

		s := r.cycle()
		if s.Removed != (maintenance.Removed{}) {
			t.Fatalf("the cycle removed %+v, want nothing (the hint is not a removal, nor a kept one)", s.Removed)
		}
		c2 := &conn{r: r, port: 33002, syn: 3000}
		c2.send(syn(33002))
		if got := r.e.Counters(t).SNATTimewaitReuses; got != 1 {
			t.Fatalf("timestamp reuses %d, want 1", got)
		}
		if p := c2.pair(); p.SNATPort() != old.SNATPort() {
			t.Fatalf("the SYN took port %d, want the held %d", p.SNATPort(), old.SNATPort())
		}
	})
}
