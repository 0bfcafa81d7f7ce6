package weblisten

import (
	"net"
	"net/netip"
)

// RefuseTo returns a listener that accepts from ln but resets, at once
// and without a byte of HTTP, every connection whose local (destination)
// address is one of refused; the others are returned as ln returns them.
// With no address it returns ln itself. Closing the result closes ln.
//
// The daemon uses it for a listener bound to the unspecified address
// when the listen address is a shared service address on `lo` (a
// fleet's VIP, README "The service address"): every client of the service reaches that
// address, and through it the admin and metrics ports, which answer for
// whichever host the router picked. A reset makes such a port look
// closed, as it would on a service address that only forwards.
func RefuseTo(ln net.Listener, refused ...netip.Addr) net.Listener {
	if len(refused) == 0 {
		return ln
	}
	return &refusing{Listener: ln, refused: refused}
}

type refusing struct {
	net.Listener
	refused []netip.Addr
}

func (r *refusing) Accept() (net.Conn, error) {
	for {
		c, err := r.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !r.isRefused(c.LocalAddr()) {
			return c, nil
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // close with a RST, as a closed port answers
		}
		c.Close()
	}
}

func (r *refusing) isRefused(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, x := range r.refused {
		if x.Unmap() == ip {
			return true
		}
	}
	return false
}
