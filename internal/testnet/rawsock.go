package testnet

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// RawIPv4 is a raw IPv4 socket of a host's namespace with IP_HDRINCL
// (IPPROTO_RAW): the caller writes whole IPv4 packets, header included,
// with any source address, e.g. spoofed TCP resets. The kernel fills in
// only the IP ID when it is 0 and the header checksum.
type RawIPv4 struct{ fd int }

// RawIPv4 opens a raw IPv4 socket in h's namespace. Close it when done.
func (h *Host) RawIPv4() (*RawIPv4, error) {
	fd := -1
	err := h.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testnet: raw IPv4 socket in %s: %w", h.NS, err)
	}
	return &RawIPv4{fd: fd}, nil
}

// Send sends one IPv4 packet (header included) to the destination its
// header names. ENOBUFS (the device queue is full) is returned as is:
// pace the sends.
func (r *RawIPv4) Send(pkt []byte) error {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return errors.New("testnet: not an IPv4 packet")
	}
	to := &unix.SockaddrInet4{Addr: [4]byte(pkt[16:20])}
	return unix.Sendto(r.fd, pkt, 0, to)
}

// Close closes the socket.
func (r *RawIPv4) Close() error { return unix.Close(r.fd) }

// Capture receives every frame that one interface of a host sends or
// receives (an AF_PACKET socket, as tcpdump uses), whole, Ethernet header
// included, from the moment it is opened.
type Capture struct{ fd int }

// captureBuffer is the socket's receive buffer: a burst of frames waits
// there while the reader decodes.
const captureBuffer = 8 << 20

// Capture opens a capture on h's interface ifname. Close it when done.
func (h *Host) Capture(ifname string) (*Capture, error) {
	link, err := h.nl.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("testnet: %s in %s: %w", ifname, h.NS, err)
	}
	proto := int(htons(unix.ETH_P_ALL))
	fd := -1
	err = h.Do(func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, captureBuffer); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: link.Attrs().Index})
	})
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("testnet: capture on %s in %s: %w", ifname, h.NS, err)
	}
	return &Capture{fd: fd}, nil
}

// Read waits up to timeout for the next frame and copies it into buf,
// returning its length (frames longer than buf are cut); the error is
// unix.EAGAIN when none came in time.
func (c *Capture) Read(buf []byte, timeout time.Duration) (int, error) {
	tv := unix.NsecToTimeval(max(timeout, time.Microsecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, err
	}
	n, _, err := unix.Recvfrom(c.fd, buf, 0)
	return n, err
}

// ReadUntil reads frames until stop is closed, handing each to frame (its
// bytes valid until frame returns: one 2048-byte buffer, a whole frame of
// the lab's MTU), and returns the first error other than a wait that
// timed out or was interrupted. It checks stop at least every 100 ms.
func (c *Capture) ReadUntil(stop <-chan struct{}, frame func([]byte)) error {
	buf := make([]byte, 2048)
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		n, err := c.Read(buf, 100*time.Millisecond)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		frame(buf[:n])
	}
}

// Filter attaches a classic BPF socket filter (SO_ATTACH_FILTER): from
// then on the capture keeps only the frames prog accepts, so a reader
// that wants a few keeps up with a bulk transfer.
func (c *Capture) Filter(prog []unix.SockFilter) error {
	if len(prog) == 0 {
		return errors.New("testnet: an empty socket filter")
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	return unix.SetsockoptSockFprog(c.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog)
}

// Send sends one whole Ethernet frame, header included, out of the
// captured interface exactly as written: any source and destination MAC
// (e.g. a frame for another host's MAC, which a bridge floods). The
// capture sees it too, as an outgoing frame.
func (c *Capture) Send(frame []byte) error {
	if len(frame) < 14 {
		return errors.New("testnet: not an Ethernet frame")
	}
	_, err := unix.Write(c.fd, frame)
	return err
}

// Close closes the capture.
func (c *Capture) Close() error { return unix.Close(c.fd) }

func htons(v uint16) uint16 { return v<<8 | v>>8 }
