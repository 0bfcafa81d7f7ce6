package floor_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/internal/testnet"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// TestBalancerAttach attaches the balancer in generic mode to one end of a
// veth pair in an anonymous namespace, sends a client frame into it from
// the other end (AF_PACKET) and reads the balanced frame back there: the
// program sends it with XDP_TX out of the interface it came in on. Closing
// the link detaches it.
func TestBalancerAttach(t *testing.T) {
	f := newLB(t, dt.ListenIP)
	ns, err := testnet.NewAnon()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	idx, err := testnet.AddVeth(testnet.VethEnd{Netlink: h, Name: "flb0", MAC: f.cfg.SelfMAC,
		Addr: netip.PrefixFrom(f.cfg.VIP, 24)}, testnet.VethEnd{Name: "flb1", MAC: f.cfg.ClientMAC})
	if err != nil {
		t.Fatal(err)
	}
	in := f.fromClient(40002, dt.ACK|dt.PSH, 1, 1, []byte("through the veth"))
	want := f.toBackend(in).Frame()
	err = testnet.In(ns, func() error {
		l, err := f.bal.Attach(idx.A, link.XDPGenericMode)
		if err != nil {
			return err
		}
		defer l.Close()
		got, err := sendAndAwait(idx.B, in.Frame(), want, 2*time.Second)
		if err != nil {
			return err
		}
		if d := dt.Diff(got, want); d != "" {
			return errors.New("the frame back differs:\n" + d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sendAndAwait writes frame out of ifindex (an AF_PACKET socket of the
// calling thread's namespace) and returns the first frame received there
// whose source MAC and length are want's, or an error after timeout.
func sendAndAwait(ifindex int, frame, want []byte, timeout time.Duration) ([]byte, error) {
	proto := uint16(unix.ETH_P_ALL)<<8 | uint16(unix.ETH_P_ALL)>>8
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifindex}); err != nil {
		return nil, err
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, err
	}
	if _, err := unix.Write(fd, frame); err != nil {
		return nil, err
	}
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		if ok && ll.Pkttype != unix.PACKET_OUTGOING && n == len(want) && bytes.Equal(buf[6:12], want[6:12]) {
			return append([]byte(nil), buf[:n]...), nil
		}
	}
	return nil, errors.New("no balanced frame came back")
}
