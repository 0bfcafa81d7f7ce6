package testnet

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The legacy ethtool ioctl is used instead of the ethtool binary: it needs
// nothing installed and ETHTOOL_STXCSUM is what `ethtool -K IF tx off`
// means (the kernel also drops TSO, which depends on it).

type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with the ifr_data member of the union.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(unsafe.Pointer(nil))]byte
}

func ethtoolValueIoctl(ifname string, cmd, data uint32) (uint32, error) {
	if len(ifname) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("testnet: interface name %q too long", ifname)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("testnet: ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	v := &ethtoolValue{cmd: cmd, data: data}
	var ifr ifreqData
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(v)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(v)
	if errno != 0 {
		return 0, fmt.Errorf("testnet: ethtool ioctl %#x on %s: %w", cmd, ifname, errno)
	}
	return v.data, nil
}

// SetTxChecksum turns TX checksum offload on or off for the named
// interfaces of h (`ethtool -K IF tx on|off`; the kernel drops TSO with
// it). Test endpoints turn it off, so no frame leaves with a partial
// checksum that an XDP rewrite would turn into a wrong one.
func (h *Host) SetTxChecksum(on bool, ifnames ...string) error {
	var d uint32
	if on {
		d = 1
	}
	return h.Do(func() error {
		for _, name := range ifnames {
			if _, err := ethtoolValueIoctl(name, unix.ETHTOOL_STXCSUM, d); err != nil {
				return err
			}
		}
		return nil
	})
}

// TxChecksum reports whether TX checksum offload is on for the named
// interface of h (`ethtool -k IF` "tx-checksumming").
func (h *Host) TxChecksum(ifname string) (bool, error) {
	var on bool
	err := h.Do(func() error {
		d, err := ethtoolValueIoctl(ifname, unix.ETHTOOL_GTXCSUM, 0)
		on = d != 0
		return err
	})
	return on, err
}
