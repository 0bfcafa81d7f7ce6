package bgp

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
)

// TestHostAddress: the kernel's source address toward the peer, unless it
// is announced (the VIP first on the interface); then another address of
// that interface, one on the peer's subnet first; none of its own is an
// error. In a namespace of its own, on a veth end with the VIP
// 192.0.2.10 first, then 198.51.100.5/24, then 192.0.2.11 (the host's own
// address on the peer's subnet).
func TestHostAddress(t *testing.T) {
	tn := testnet.NewForTest(t, "bgn")
	h, err := tn.AddHost("xlb")
	if err != nil {
		t.Fatal(err)
	}
	nl := h.Netlink()
	if _, err := testnet.AddVeth(testnet.VethEnd{Netlink: nl, Name: "d0"}, testnet.VethEnd{Name: "d1"}); err != nil {
		t.Fatal(err)
	}
	link, err := nl.LinkByName("d0")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"192.0.2.10/24", "198.51.100.5/24", "192.0.2.11/24"} {
		p := netip.MustParsePrefix(a)
		if err := nl.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}); err != nil {
			t.Fatal(err)
		}
	}
	router := netip.MustParseAddr("192.0.2.1")
	pfx := netip.MustParsePrefix
	tests := []struct {
		name      string
		announced []netip.Prefix
		want      string
		wantErr   string
	}{
		{"source address not announced", []netip.Prefix{pfx("203.0.113.0/24")}, "192.0.2.10", ""},
		{"source address is the VIP", []netip.Prefix{pfx("192.0.2.10/32")}, "192.0.2.11", ""},
		{"the peer's subnet is announced", []netip.Prefix{pfx("192.0.2.0/24")}, "198.51.100.5", ""},
		{"every address announced", []netip.Prefix{pfx("192.0.2.0/24"), pfx("198.51.100.0/24")}, "",
			"the source address toward 192.0.2.1 is 192.0.2.10, which is announced, and d0 has no IPv4 address of its own outside the announced prefixes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got netip.Addr
			err := h.Do(func() error {
				var err error
				got, err = HostAddress(router, tt.announced)
				return err
			})
			switch {
			case tt.wantErr != "":
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("HostAddress = %v, %v; want error %q", got, err, tt.wantErr)
				}
			case err != nil || got.String() != tt.want:
				t.Errorf("HostAddress = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
	err = h.Do(func() error {
		_, err := HostAddress(netip.MustParseAddr("203.0.113.1"), nil)
		return err
	})
	if err == nil {
		t.Errorf("HostAddress toward an address without a route: no error")
	}
}
