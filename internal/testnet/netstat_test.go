package testnet

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// NetstatCounter reads the calling thread's namespace: a SYN a sends to
// b's closed port raises b's IpExt InOctets and not that of a namespace
// nothing reached.
func TestNetstatCounterPerNamespace(t *testing.T) {
	p := newPair(t)
	inOctets := func(h *Host) uint64 {
		t.Helper()
		var v uint64
		if err := h.Do(func() (err error) { v, err = NetstatCounter("IpExt", "InOctets"); return err }); err != nil {
			t.Fatal(err)
		}
		return v
	}
	empty := newTopology(t)
	var quiet *Host
	if err := empty.Build([]Step{{Name: "host", Run: func() (err error) { quiet, err = empty.AddHost("q"); return err }}}, nil); err != nil {
		t.Fatal(err)
	}

	before := inOctets(p.b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := p.a.Dial(ctx, netip.AddrPortFrom(OneArmBackendIP(0), 9).String()); err == nil {
		c.Close()
		t.Fatal("connected to a closed port")
	}
	if after := inOctets(p.b); after <= before {
		t.Errorf("b's IpExt InOctets %d after a SYN reached it, %d before; want more", after, before)
	}
	if v := inOctets(quiet); v != 0 {
		t.Errorf("IpExt InOctets %d in a namespace nothing reached, want 0", v)
	}
	err := p.a.Do(func() error { _, err := NetstatCounter("TcpExt", "NoSuchCounter"); return err })
	if err == nil || !strings.Contains(err.Error(), "TcpExtNoSuchCounter") {
		t.Errorf("unknown counter: error %v, want one naming TcpExtNoSuchCounter", err)
	}
}
