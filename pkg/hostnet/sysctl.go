package hostnet

import (
	"fmt"
	"path/filepath"
	"strings"
)

// SysctlRoot is where the kernel shows the sysctls of the caller's network
// namespace.
const SysctlRoot = "/proc/sys"

// The sysctls XLB sets, by their dotted names (the names `sysctl` takes and
// the setting label of xlb_host_setting_repairs_total).
const (
	// FIBLookupSetting must be "1": bpf_fib_lookup looks the
	// backend-facing route up as if the packet entered from the loopback
	// device (a locally originated lookup), and the kernel refuses lookups
	// on a device without forwarding. Forwarding on lo forwards nothing by
	// itself: packets only enter lo when this host sends them to itself.
	// A change of net.ipv4.conf.all.forwarding (or its alias
	// net.ipv4.ip_forward) sets every interface's forwarding, lo's
	// included, to the new value: `sysctl --system` with a file that sets
	// it to 0 turns it off (issue 13).
	FIBLookupSetting = "net.ipv4.conf.lo.forwarding"
	// ReservedPortsSetting must include the SNAT port range, so host
	// sockets never pick an ephemeral port XLB uses (ReservePorts).
	ReservedPortsSetting = "net.ipv4.ip_local_reserved_ports"
	// allForwardingSetting is read, never written, to tell what reset
	// FIBLookupSetting.
	allForwardingSetting = "net.ipv4.conf.all.forwarding"
)

// FIBLookupSysctl is FIBLookupSetting's file; the instance sets it to "1"
// through its Journal.
var FIBLookupSysctl = sysctlPath(SysctlRoot, FIBLookupSetting)

// reservedPortsSysctl is ReservedPortsSetting's file (ReservePorts).
var reservedPortsSysctl = sysctlPath(SysctlRoot, ReservedPortsSetting)

// sysctlPath is the file of a dotted sysctl name under root. Names of
// interfaces with a dot (eth0.100) are not supported: XLB sets none.
func sysctlPath(root, name string) string {
	return filepath.Join(root, strings.ReplaceAll(name, ".", "/"))
}

// requirement is one sysctl XLB needs: what it must hold and how to tell
// what reset it. The guard (SysctlGuard) checks each once a second.
type requirement struct {
	// name is the dotted sysctl name.
	name string
	// fix returns the value to write when cur (the file's content,
	// trimmed) lacks what XLB needs, and ok false when cur will do.
	fix func(cur string) (value string, ok bool)
	// context names sysctls read when a reset is found, to say what
	// reset it; explain turns their values (by name) into that phrase.
	context []string
	explain func(found string, ctx map[string]string) string
}

// fibLookupRequirement keeps FIBLookupSetting at "1".
func fibLookupRequirement() requirement {
	return requirement{
		name: FIBLookupSetting,
		fix: func(cur string) (string, bool) {
			if cur == "1" {
				return "", true
			}
			return "1", false
		},
		context: []string{allForwardingSetting},
		explain: func(found string, ctx map[string]string) string {
			if ctx[allForwardingSetting] == found {
				return fmt.Sprintf("a write of %s (or net.ipv4.ip_forward) changed it to %s, which sets forwarding on every interface, lo included: `sysctl -w`, or `sysctl --system` with a file that sets it", allForwardingSetting, found)
			}
			return fmt.Sprintf("something wrote %s itself (%s is %q)", FIBLookupSetting, allForwardingSetting, ctx[allForwardingSetting])
		},
	}
}

// reservedPortsRequirement keeps the SNAT range lo-hi and the retired SNAT
// ranges (retired, read at each check; nil: none) inside
// ReservedPortsSetting, merged with whatever else the list holds.
func reservedPortsRequirement(lo, hi uint16, retired func() []PortRange) requirement {
	want := func() []portRange {
		rs := []portRange{{int(lo), int(hi)}}
		if retired != nil {
			for _, r := range retired() {
				rs = append(rs, portRange{int(r.Lo), int(r.Hi)})
			}
		}
		return rs
	}
	return requirement{
		name: ReservedPortsSetting,
		fix: func(cur string) (string, bool) {
			rs, err := parsePortList(cur)
			if err != nil {
				rs = nil // unreadable: write the ranges alone
			}
			var missing []portRange
			for _, r := range want() {
				if err != nil || !covers(rs, r.lo, r.hi) {
					missing = append(missing, r)
				}
			}
			if len(missing) == 0 {
				return "", true
			}
			return formatPortList(append(rs, missing...)), false
		},
		explain: func(string, map[string]string) string {
			what := fmt.Sprintf("the SNAT range %d-%d", lo, hi)
			if rs := want(); len(rs) > 1 {
				what = fmt.Sprintf("the SNAT ranges %s (%d-%d and the retired ones live connections still hold)", formatPortList(rs), lo, hi)
			}
			return fmt.Sprintf("the list was rewritten without %s: `sysctl -w`, or `sysctl --system` with a file that sets it", what)
		},
	}
}

// covers reports whether the ranges rs cover every port of lo-hi.
func covers(rs []portRange, lo, hi int) bool {
	merged, _ := parsePortList(formatPortList(append([]portRange(nil), rs...)))
	for _, r := range merged {
		if r.lo <= lo && hi <= r.hi {
			return true
		}
	}
	return false
}
