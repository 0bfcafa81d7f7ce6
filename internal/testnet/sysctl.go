package testnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Sysctl sets the kernel parameter name (dotted, as `sysctl` spells it:
// "net.ipv4.ip_forward") to value for the calling thread's network
// namespace: /proc/sys/net is resolved per namespace when opened, so call
// it inside In or Host.Do.
func Sysctl(name, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
	if err := os.WriteFile(path, []byte(value+"\n"), 0o644); err != nil {
		return fmt.Errorf("testnet: sysctl %s=%s: %w", name, value, err)
	}
	return nil
}

// DisableIPv6 turns IPv6 off for all current and future interfaces of the
// calling thread's namespace, so no router solicitation, DAD or MLD frame
// shows up in a packet test (XLB is IPv4-only). A kernel without IPv6 is
// fine.
func DisableIPv6() error {
	for _, k := range []string{"net.ipv6.conf.default.disable_ipv6", "net.ipv6.conf.all.disable_ipv6"} {
		if err := Sysctl(k, "1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
