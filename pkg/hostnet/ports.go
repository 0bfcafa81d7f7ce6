package hostnet

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// portRange is an inclusive range of ports.
type portRange struct{ lo, hi int }

// parsePortList parses the ip_local_reserved_ports format: comma-separated
// ports and LO-HI ranges, possibly empty.
func parsePortList(s string) ([]portRange, error) {
	var out []portRange
	for _, f := range strings.Split(strings.TrimSpace(s), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad port %q", f)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("bad port range %q", f)
			}
		}
		out = append(out, portRange{a, b})
	}
	return out, nil
}

// formatPortList merges overlapping or adjacent ranges and formats them.
func formatPortList(rs []portRange) string {
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	var merged []portRange
	for _, r := range rs {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi+1 {
			if r.hi > merged[n-1].hi {
				merged[n-1].hi = r.hi
			}
			continue
		}
		merged = append(merged, r)
	}
	parts := make([]string, len(merged))
	for i, r := range merged {
		if r.lo == r.hi {
			parts[i] = strconv.Itoa(r.lo)
		} else {
			parts[i] = fmt.Sprintf("%d-%d", r.lo, r.hi)
		}
	}
	return strings.Join(parts, ",")
}

// ReservePorts adds lo-hi to net.ipv4.ip_local_reserved_ports so host
// sockets never pick an ephemeral port XLB uses for SNAT (DESIGN §1). The
// journal records the original list; Journal.Restore writes it back.
func ReservePorts(j *Journal, lo, hi uint16) error {
	return reservePortsAt(j, reservedPortsSysctl, lo, hi)
}

func reservePortsAt(j *Journal, path string, lo, hi uint16) error {
	cur, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	rs, err := parsePortList(strings.TrimSpace(string(cur)))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	next := formatPortList(append(rs, portRange{int(lo), int(hi)}))
	if err := j.Set(path, next); err != nil {
		return fmt.Errorf("reserve SNAT ports %d-%d: %w", lo, hi, err)
	}
	return nil
}

// PortRange is an inclusive range of ports.
type PortRange struct{ Lo, Hi uint16 }

// ReleasePorts takes the ports of release out of
// net.ipv4.ip_local_reserved_ports again, except those in keep and those
// the host reserved itself before XLB first changed the list (the
// journal's original): a retired SNAT range (issue 27 finding 3) whose
// last connection pair ended. Ports reserved by others since stay unless
// they are in release. A list XLB never changed is left alone.
func ReleasePorts(j *Journal, release, keep []PortRange) error {
	return releasePortsAt(j, reservedPortsSysctl, release, keep)
}

func releasePortsAt(j *Journal, path string, release, keep []PortRange) error {
	orig, ok := j.data.Sysctls[path]
	if !ok {
		return nil
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	have, err := parsePortList(strings.TrimSpace(string(cur)))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	host, err := parsePortList(orig)
	if err != nil {
		return fmt.Errorf("%s as the host had it: %w", path, err)
	}
	var drop, stay portSet
	for _, r := range release {
		drop.add(int(r.Lo), int(r.Hi))
	}
	for _, r := range keep {
		stay.add(int(r.Lo), int(r.Hi))
	}
	for _, r := range host {
		stay.add(r.lo, r.hi)
	}
	var next portSet
	for _, r := range have {
		next.add(r.lo, r.hi)
	}
	for p := range len(next) * 64 {
		if drop.has(p) && !stay.has(p) {
			next.clear(p)
		}
	}
	v := formatPortList(next.ranges())
	if v == formatPortList(have) {
		return nil
	}
	if err := j.Set(path, v); err != nil {
		return fmt.Errorf("release SNAT ports: %w", err)
	}
	return nil
}

// portSet is a set of ports 0..65535, a bit each.
type portSet [65536 / 64]uint64

// add adds lo-hi, clipped to 0..65535.
func (s *portSet) add(lo, hi int) {
	for p := max(lo, 0); p <= min(hi, 65535); p++ {
		s[p/64] |= 1 << (p % 64)
	}
}

func (s *portSet) has(p int) bool { return s[p/64]&(1<<(p%64)) != 0 }

func (s *portSet) clear(p int) { s[p/64] &^= 1 << (p % 64) }

// ranges lists the set as ranges, in order.
func (s *portSet) ranges() []portRange {
	var out []portRange
	for p := range len(s) * 64 {
		if !s.has(p) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].hi == p-1 {
			out[n-1].hi = p
		} else {
			out = append(out, portRange{p, p})
		}
	}
	return out
}
