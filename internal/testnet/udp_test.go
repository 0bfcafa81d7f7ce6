package testnet

import (
	"bytes"
	"net/netip"
	"testing"
	"time"
)

// The UDP servers answer (or not) as their handlers say, count every
// datagram per peer, and a connected socket sees a closed port as
// ECONNREFUSED.
func TestUDPServers(t *testing.T) {
	RequireRoot(t)
	p := newPair(t)
	echo, err := p.b.ServeUDP(":5300", UDPEcho)
	if err != nil {
		t.Fatal(err)
	}
	named, err := p.b.ServeUDP(":5353", UDPNameEcho("b1"))
	if err != nil {
		t.Fatal(err)
	}
	sink, err := p.b.ServeUDP(":5400", UDPSink)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := WaitUDP(p.a, "192.0.2.31:5300", []byte("ping"), waitLong); err != nil || string(got) != "ping" {
		t.Fatalf("echo: %q, %v", got, err)
	}
	echo.ResetStats()

	// Ten exchanges from one fixed client port reach the named echo as one
	// peer.
	c, err := p.a.DialUDP(netip.AddrPortFrom(netip.Addr{}, 20000), "192.0.2.31:5353")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 10 {
		req := []byte{'q', byte('0' + i)}
		var got []byte
		// A first datagram may be lost while the pair's ARP resolves: resend.
		for try := 0; ; try++ {
			got, err = UDPExchange(c, req, time.Second)
			if err == nil || try == 20 {
				break
			}
		}
		if err != nil || !bytes.Equal(got, append([]byte("b1|"), req...)) {
			t.Fatalf("exchange %d: %q, %v", i, got, err)
		}
	}
	st, err := named.WaitDatagrams(longCtx(t), 10)
	if err != nil {
		t.Fatal(err)
	}
	from := netip.AddrPortFrom(p.a.IP(), 20000)
	if st.Replies != st.Datagrams || st.Peers[from] != int(st.Datagrams) || len(st.Peers) != 1 || st.BytesOut != st.BytesIn+3*st.Datagrams {
		t.Errorf("named echo stats %+v", st)
	}

	// The sink counts and never answers.
	sc, err := p.a.DialUDP(netip.AddrPort{}, "192.0.2.31:5400")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for range 5 {
		if _, err := sc.Write(make([]byte, 1400)); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := sink.WaitDatagrams(longCtx(t), 5); err != nil || st.BytesIn != 5*1400 || st.Replies != 0 || st.BytesOut != 0 {
		t.Errorf("sink stats %+v, %v", st, err)
	}
	if _, err := UDPExchange(sc, []byte("x"), 300*time.Millisecond); err == nil {
		t.Error("the sink answered")
	}

	// A closed port: the connected socket gets ECONNREFUSED.
	cc, err := p.a.DialUDP(netip.AddrPort{}, "192.0.2.31:5999")
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := UDPExchange(cc, []byte("x"), waitLong); !IsRefused(err) {
		t.Errorf("closed port: %v, want ECONNREFUSED", err)
	}

	// Closing the topology closes the servers.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := echo.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checkGone(t, p.Prefix)
}
