package dataplane

import (
	"fmt"
	"os"
	"strings"
)

// loForwarding is the sysctl bpf_fib_lookup needs: the data path looks
// routes up as if entering from the loopback device (a locally originated
// lookup), and the kernel refuses lookups on a device without forwarding.
// Forwarding on lo forwards nothing by itself: packets only enter lo when
// this host sends them to itself.
const loForwarding = "/proc/sys/net/ipv4/conf/lo/forwarding"

// FIBLookupSysctl is the sysctl the data path needs set to "1" (see
// loForwarding); the daemon sets it through its host settings journal.
const FIBLookupSysctl = loForwarding

// EnableFIBLookups turns on net.ipv4.conf.lo.forwarding in the calling
// thread's network namespace and returns a function that restores the
// previous value.
func EnableFIBLookups() (restore func() error, err error) {
	return setSysctl(loForwarding, "1")
}

// setSysctl writes value to a /proc/sys file and returns a restore function.
func setSysctl(path, value string) (func() error, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dataplane: read %s: %w", path, err)
	}
	prev := strings.TrimSpace(string(old))
	if prev == value {
		return func() error { return nil }, nil
	}
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return nil, fmt.Errorf("dataplane: write %s: %w", path, err)
	}
	return func() error {
		if err := os.WriteFile(path, []byte(prev), 0o644); err != nil {
			return fmt.Errorf("dataplane: restore %s: %w", path, err)
		}
		return nil
	}, nil
}
